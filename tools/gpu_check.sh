#!/usr/bin/env bash
# wgnn's real-GPU checks on a machine lent with a GPU (the `device` tool), in one command:
# installs what tools/gpu_check_prepare.sh fetched here into .gl (Vulkan/EGL loaders) and .whl
# (wheels the machine lacks), installs wgnn from this checkout, then runs
# `python -m wgnn.tools.gpu_check` into $OUT (report.md first). Arguments go to gpu_check.
# The setup's own output goes to $OUT/setup.log.
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-$REPO/gpu-check}"
PYTHON="${PYTHON:-python3}"
SITE="${WGNN_CHECK_SITE:-/tmp/wgnn-check-site}"
mkdir -p "$OUT"
# Python runs outside the checkout: its wgnn/ folder (the public API alone; setuptools maps the rest
# in) would shadow the installed package.
cd /tmp
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/wgnn-xdg}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

setup() {
  if compgen -G "$REPO/.gl/*.deb" >/dev/null; then
    for deb in "$REPO"/.gl/*.deb; do dpkg -x "$deb" /; done
    ldconfig
  fi
  # The NVIDIA driver's Vulkan and EGL manifests where a container mounts them (not on the loader's path).
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  local egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
  [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f "$egl" ] && export __EGL_VENDOR_LIBRARY_FILENAMES="$egl"
  if compgen -G "$REPO/.whl/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      "$REPO"/.whl/*.whl
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  fi
  # wgnn from this checkout: as installed (an editable install of it), else into $SITE, again each
  # time (a copy there from an earlier checkout would be stale).
  local where
  where="$("$PYTHON" -c "import wgnn.engine, wgnn; print(wgnn.__file__)" 2>/dev/null || true)"
  if [ -z "$where" ] || [[ "$where" == "$SITE"/* ]]; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade \
      --target "$SITE" "$REPO"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  fi
  command -v nvidia-smi >/dev/null && nvidia-smi
  ldconfig -p | grep -E "libvulkan|libEGL" || true
  "$PYTHON" -c "import wgnn, wgpu; print('wgnn', wgnn.__version__, 'from', wgnn.__file__, '; wgpu', wgpu.__version__)"
}

setup >"$OUT/setup.log" 2>&1 || echo "setup: see $OUT/setup.log"
exec "$PYTHON" -m wgnn.tools.gpu_check --out "$OUT" "$@"
