#!/usr/bin/env bash
# Run here (with network) before the `device` tool's run of tools/gpu_check.sh: fetches what the
# lent GPU machine lacks into .whl (wheels for its Python: wgpu, ncnn, pnnx, wonnx and their missing
# needs) and .gl (the Vulkan and EGL loaders, amd64 Debian packages). Both folders are git-ignored;
# the run names them in `carry`. The machine's Python version: DEVICE_PYTHON (default 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${DEVICE_PYTHON:-3.12}"
wgpu_version="$(python3 -c 'import wgpu; print(wgpu.__version__)' 2>/dev/null || echo 0.32.0)"
mkdir -p .whl .gl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
  "${platforms[@]}" -d .whl "wgpu==$wgpu_version" cffi pycparser rendercanvas ncnn pnnx wonnx
lists=/tmp/wgnn-apt-amd64
mkdir -p "$lists/partial"
apt_options=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o "Dir::State::Lists=$lists")
apt-get "${apt_options[@]}" update -qq
(cd .gl && apt-get "${apt_options[@]}" download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
du -sh .whl .gl
echo 'then: run(command="bash tools/gpu_check.sh", carry=[".whl", ".gl"], timeout_s=600)'
