"""Kernel fragments (backends/wgpu/loader.py): `// include: dir/name.wgsl` lines append the named
fragments, each once, after the kernel and before the prelude; {{NAME}} parameters are substituted
in them too; errors name the file at fault. The engine's pipeline cache and the shader harness
(`wgnn.shader.run`) both compile such kernels, and a compile error inside a fragment is reported at
the fragment's own line."""
import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.backends.wgpu import loader
from wgnn.engine.errors import WgnnError
from wgnn.tools import shader_wgsl

import wgnn.shader

ADAPTERS = [a["index"] for a in gpu_adapters()]
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")

KERNEL = """\
// y = twice(x) + 1, one element per invocation.
// include: test/twice.wgsl
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg, WG);
    if (i < pu(0u)) {
        y[i] = twice(x[i]) + one();
    }
}
"""
FRAGMENTS = {
    "test/twice.wgsl": "// include: test/one.wgsl\nfn twice(v: {{T}}) -> {{T}} {\n    return v * 2.0;\n}\n",
    "test/one.wgsl": "// include: test/twice.wgsl\nfn one() -> f32 {\n    return 1.0;\n}\n",
}


@pytest.fixture
def fragments(monkeypatch):
    """The test's fragments (and the kernel, as test/kernel.wgsl) served as packaged files."""
    files = {"test/kernel.wgsl": KERNEL, **FRAGMENTS}
    real = loader.kernel_source

    def source(path: str) -> str:
        return files[path] if path in files else real(path)

    monkeypatch.setattr(loader, "kernel_source", source)
    monkeypatch.setattr(shader_wgsl, "kernel_source", source)
    return files


def test_fragments_come_once_in_order_of_first_mention(fragments):
    fragments["test/a.wgsl"] = "// include: test/c.wgsl\n// include: test/b.wgsl\nfn a() {}\n"
    fragments["test/b.wgsl"] = "fn b() {}\n"
    fragments["test/c.wgsl"] = "// include: test/a.wgsl\n  //include:   test/k.wgsl  \nfn c() {}\n"
    fragments["test/k.wgsl"] = "// include: test/a.wgsl\n// include: test/b.wgsl\n"
    assert loader.included_fragments("test/k.wgsl") == ["test/a.wgsl", "test/c.wgsl", "test/b.wgsl"]
    assert loader.included_fragments("test/b.wgsl") == []
    # An `include:` inside a line of code or a longer comment is no directive.
    fragments["test/d.wgsl"] = "let s = 1; // include: test/a.wgsl\n// see the include: test/b.wgsl line\n"
    assert loader.included_fragments("test/d.wgsl") == []


def test_render_appends_fragments_after_the_kernel_substituted(fragments):
    code = loader.render("test/kernel.wgsl", {"T": "f32"})
    twice, one, prelude = (code.index(text) for text in ("fn twice(v: f32) -> f32", "fn one()", "fn linear_id"))
    assert code.startswith(KERNEL) and len(KERNEL) < twice < one < prelude  # the kernel's lines keep their numbers
    assert code.count("fn twice(") == 1 and code.count("fn one(") == 1
    with pytest.raises(WgnnError, match=r"kernel test/twice.wgsl needs parameter \{\{T\}\}"):
        loader.render("test/kernel.wgsl", {})


def test_include_errors_name_the_including_file(fragments):
    fragments["test/missing.wgsl"] = "// include: test/nowhere.wgsl\n"
    with pytest.raises(WgnnError, match=r"test/missing.wgsl includes test/nowhere.wgsl: kernel file "
                                        r"kernels_wgsl/test/nowhere.wgsl not found"):
        loader.render("test/missing.wgsl", {})
    fragments["test/python.wgsl"] = "// include: test/helper.py\n"
    with pytest.raises(WgnnError, match=r"test/python.wgsl includes 'test/helper.py': fragments are .wgsl files"):
        loader.included_fragments("test/python.wgsl")


@needs_gpu
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_engine_pipeline_cache_compiles_a_kernel_with_fragments(fragments, adapter):
    from wgnn.backends.wgpu.context import get_context

    cache = loader.PipelineCache(get_context(adapter))
    kernel = cache.get("test/kernel.wgsl", (loader.STORAGE, loader.STORAGE, loader.UNIFORM), params={"T": "f32"})
    assert kernel.path == "test/kernel.wgsl" and cache.compiled == 1


@needs_gpu
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_shader_harness_runs_fragments_and_reports_their_lines(fragments, adapter):
    x = np.linspace(-3, 3, 67, dtype=np.float32)
    result = wgnn.shader.run(KERNEL, inputs={"x": x}, outputs={"y": 67}, params=[67], text={"T": "f32"},
                             adapter=adapter, reference=lambda x: 2 * x + 1)
    assert result.ok
    np.testing.assert_array_equal(result.outputs["y"], 2 * x + 1)

    fragments["test/twice.wgsl"] = fragments["test/twice.wgsl"].replace("v * 2.0", "v * 2u")  # line 3
    with pytest.raises(wgnn.shader.ShaderCompileError) as caught:
        wgnn.shader.run(KERNEL, inputs={"x": x}, outputs={"y": 67}, params=[67], text={"T": "f32"}, adapter=adapter)
    # naga points at the invalid function (fragment line 2) and marks the expression on line 3
    assert caught.value.file == "test/twice.wgsl (appended by the loader)" and caught.value.line == 2
    assert "test/twice.wgsl:3 | │     return v * 2u;" in str(caught.value)
