"""Driver warm-ups (backends/wgpu/warmup.py): on lavapipe the kernels a session dispatches get
their machine code generated during prepare, on warm-up devices side by side, into Mesa's disk
cache; variants compiled only for a later resize are not warmed; a record skips them next time."""
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, fresh_warmup_cache, gpu_adapters, make_model, session_for
from wgnn.backends.wgpu import warmup
from wgnn.backends.wgpu.context import get_context
from wgnn.backends.wgpu.loader import STORAGE, TEXTURE_IN, UNIFORM

import wgnn

LAVAPIPE = [a["index"] for a in gpu_adapters() if "llvmpipe" in a["name"].lower() and a["backend"] == "Vulkan"]
needs_lavapipe = pytest.mark.skipif(not LAVAPIPE, reason="no lavapipe (Vulkan llvmpipe) adapter")


def fake_context(name="llvmpipe (LLVM 15.0.6, 256 bits)", backend="Vulkan"):
    return SimpleNamespace(info=SimpleNamespace(name=name, backend=backend, driver="Mesa 22.3.6"), name=name)


def test_warmups_apply_only_where_the_driver_generates_code_lazily(monkeypatch):
    monkeypatch.delenv("WGNN_DRIVER_WARMUP", raising=False)
    monkeypatch.delenv("MESA_SHADER_CACHE_DISABLE", raising=False)
    assert warmup.warmup_reason(fake_context(), 2) is None
    assert "created" in warmup.warmup_reason(fake_context("NVIDIA H200"), 2)
    assert "created" in warmup.warmup_reason(fake_context(backend="OpenGL"), 2)
    assert warmup.warmup_reason(fake_context(), 1) == "one compile thread"
    monkeypatch.setenv("MESA_SHADER_CACHE_DISABLE", "true")
    assert "MESA_SHADER_CACHE_DISABLE" in warmup.warmup_reason(fake_context(), 2)
    monkeypatch.delenv("MESA_SHADER_CACHE_DISABLE")
    monkeypatch.setenv("WGNN_DRIVER_WARMUP", "0")
    assert warmup.warmup_reason(fake_context(), 2) == "WGNN_DRIVER_WARMUP=0"


RELU = """
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: array<vec4<u32>, 4>;
override WG: u32 = 64;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < params[0].x) {
        y[id.x] = max(x[id.x], vec4<f32>(0.0));
    }
}
"""


def test_the_record_lives_beside_a_named_mesa_cache_else_in_wgnns(tmp_path, monkeypatch):
    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path / "wgnn"))
    monkeypatch.delenv("MESA_SHADER_CACHE_DIR", raising=False)
    default = warmup._record_path(fake_context())
    assert default.parent == tmp_path / "wgnn" and default.name.startswith("wgnn-driver-code-")
    monkeypatch.setenv("MESA_SHADER_CACHE_DIR", str(tmp_path / "mesa"))  # e.g. bench --empty-driver-cache's
    named = warmup._record_path(fake_context())
    assert named.parent == tmp_path / "mesa" and named.name != default.name


def unary_kernel(tag: str) -> tuple:
    """A kernel text no other test compiles (the tag is a comment line), its bindings and constants."""
    return RELU + f"// {tag}\n", (STORAGE, STORAGE, UNIFORM), {"WG": 64}, "main"


@needs_lavapipe
def test_a_warmup_records_the_kernel_and_a_later_process_skips_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    context = get_context(LAVAPIPE[0])
    first = warmup.DriverWarmup(context)
    kernel = unary_kernel(f"warm {os.getpid()} {tmp_path.name}")
    first.warm(*kernel)
    first.warm(*kernel)  # once per kernel
    assert first.broken is None and first.count == 1 and first.seconds > 0
    assert len(first.record_path.read_text().split()) == 1
    later = warmup.DriverWarmup(context)  # reads the record, as a later process does
    later.warm(*kernel)
    assert later.count == 0
    later.warm(*unary_kernel(f"other {os.getpid()} {tmp_path.name}"))
    assert later.count == 1 and len(later.record_path.read_text().split()) == 2


@needs_lavapipe
def test_a_failing_warmup_never_fails_and_no_device_turns_them_off(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    context = get_context(LAVAPIPE[0])
    failing = warmup.DriverWarmup(context)
    failing.warm(RELU + "fn broken( {\n", (STORAGE, STORAGE, UNIFORM), {"WG": 64}, "main")  # does not compile
    assert failing.broken is None and failing.count == 0
    failing.warm(*unary_kernel(f"after a failure {os.getpid()} {tmp_path.name}"))
    assert failing.count == 1  # only that kernel was skipped

    no_device = warmup.DriverWarmup(context)

    def refuse():
        raise RuntimeError("device lost\nmore")

    monkeypatch.setattr(no_device, "_device", refuse)
    with caplog.at_level("INFO", logger="wgnn.wgpu"):
        no_device.warm(*unary_kernel("no device"))
        no_device.warm(*unary_kernel("no device either"))
    assert no_device.broken == "device lost" and no_device.count == 0
    assert [r.getMessage() for r in caplog.records if "warm-ups off" in r.getMessage()] == [
        f"driver warm-ups off on {context.name}: device lost"]


def conv_model(seed: int):
    """A 3x3 Conv on channels not a multiple of 4, with padding: its step dispatches one kernel and
    compiles the other conv paths' kernels for a later resize."""
    rng = np.random.default_rng(seed)
    return make_model("Conv", [rng.standard_normal((1, 6, 9, 7), np.float32),
                               Const(rng.standard_normal((5, 6, 3, 3), np.float32))], {"pads": [1, 1, 1, 1]})


def conv_feeds(model) -> dict:
    return {model.graph.input[0].name: np.random.default_rng(1).standard_normal((1, 6, 9, 7)).astype(np.float32)}


def head_model(seed: int):
    """Conv -> GlobalAveragePool -> Flatten -> Gemm: a GlobalPoolMatMul head, whose step prepares
    its two-dispatch path too (for a resize) and drops those dispatches."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {"cw": rng.standard_normal((5, 6, 3, 3), np.float32), "B": rng.standard_normal((3, 5), np.float32)}
    nodes = [helper.make_node("Conv", ["x", "cw"], ["f"], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["f"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
             helper.make_node("Gemm", ["flat", "B"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 9, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@needs_lavapipe
@pytest.mark.parametrize(("build", "storage", "precision"), [
    (conv_model, "buffer", "fp32"), (conv_model, "texture", "fp32"), (conv_model, "texture", "fp16"),
    (head_model, "buffer", "fp32")])
def test_a_session_warms_the_kernels_it_dispatches_only(tmp_path, monkeypatch, build, storage, precision):
    cache = fresh_warmup_cache(monkeypatch, tmp_path, LAVAPIPE[0])
    model = build(8)
    session = wgnn.InferenceSession(model.SerializeToString(), config=wgnn.Config(
        providers=("wgpu", "numpy"), adapter=LAVAPIPE[0], storage=storage, precision=precision))
    new = list(cache.pipelines.values())
    dispatched = {id(d.kernel) for s in session.session.segments for _, ex in s.steps
                  for d in getattr(ex, "dispatches", [])}
    warmed = [kernel for kernel in new if kernel.warmed_for]
    assert warmed and all(id(kernel) in dispatched for kernel in warmed)
    assert dispatched <= {id(kernel) for kernel in warmed}
    assert any(id(kernel) not in dispatched and not kernel.warmed_for for kernel in new)  # for a resize
    assert cache.warmup.count == len(warmed) and cache.warmup.broken is None
    kinds = {kind for kernel in warmed for kind in kernel.bindings}
    assert (TEXTURE_IN in kinds) == (storage == "texture")  # stand-ins of the session's formats
    assert not any(kernel.pending for kernel in warmed)  # the resize waited for their warm-ups too
    x = conv_feeds(model)
    tolerance = 1e-2 if precision == "fp16" else 1e-4
    np.testing.assert_allclose(session.run(None, x)[0], session_for(model.SerializeToString(), "numpy").run(None, x)[0],
                               rtol=tolerance, atol=tolerance)


PROCESS = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    import wgnn
    adapter, model, mesa, storage, precision = sys.argv[1:]
    config = wgnn.Config(providers=("wgpu",), adapter=int(adapter), storage=storage, precision=precision)
    session = wgnn.InferenceSession(model, config=config)
    cache = session.session.backends[0].pipelines

    def files():  # Mesa's entries (one still being written ends in .tmp), not wgnn's record
        return {f.name.removesuffix(".tmp") for f in Path(mesa).rglob("*")
                if f.is_file() and not f.name.startswith("wgnn-")}

    def settled():  # Mesa writes its cache on a thread of its own: wait until the folder is still
        seen, still = files(), 0
        for _ in range(100):
            time.sleep(0.05)
            now = files()
            still = still + 1 if now == seen else 0
            if still == 6:
                break
            seen = now
        return len(now)

    at_prepare = settled()
    x = session.get_inputs()[0]
    out = session.run(None, {x.name: np.linspace(-1, 1, np.prod(x.shape), dtype=np.float32).reshape(x.shape)})[0]
    print(json.dumps({"warmed": cache.warmup.count if cache.warmup else None, "cache_files_at_prepare": at_prepare,
                      "cache_files_after_run": settled(), "output": out.tolist()}))
""")


def layer_norm_model():
    """LayerNorm over rows of whole vec4s: its kernel loops over a count read from the params
    uniform, and lavapipe's code for it depends on that value (the warm-up binds the real params)."""
    rng = np.random.default_rng(4)
    return make_model("LayerNormalization", [rng.standard_normal((2, 5, 8), np.float32),
                                             Const(rng.standard_normal(8).astype(np.float32)),
                                             Const(rng.standard_normal(8).astype(np.float32))], {"axis": -1})


@needs_lavapipe
@pytest.mark.parametrize(("graph", "storage", "precision"), [
    ("conv", "buffer", "fp32"), ("conv", "texture", "fp16"), ("layer_norm", "buffer", "fp32")])
def test_warmups_fill_mesas_cache_during_prepare_in_a_new_process(tmp_path, graph, storage, precision):
    """A fresh process with an empty Mesa cache: with warm-ups the driver's code is on disk before
    the first run, which then generates none (a cache miss would add a file); without them lavapipe
    generates it at the first dispatch."""
    model = tmp_path / "conv.onnx"
    model.write_bytes((conv_model(11) if graph == "conv" else layer_norm_model()).SerializeToString())
    results = {}
    for setting in ("1", "0"):
        mesa = tmp_path / f"mesa{setting}"
        env = {**os.environ, "WGNN_DRIVER_WARMUP": setting, "WGNN_COMPILE_THREADS": "2",
               "MESA_SHADER_CACHE_DIR": str(mesa), "WGNN_CACHE_DIR": str(tmp_path / f"wgnn{setting}")}
        env.pop("MESA_SHADER_CACHE_DISABLE", None)
        done = subprocess.run([sys.executable, "-c", PROCESS, str(LAVAPIPE[0]), str(model), str(mesa), storage,
                               precision], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        results[setting] = json.loads(done.stdout.strip().splitlines()[-1])
    warmed, cold = results["1"], results["0"]
    assert warmed["warmed"] > 0 and cold["warmed"] is None
    # Mesa's index file is there either way; the kernels' code only with warm-ups.
    assert warmed["cache_files_at_prepare"] > cold["cache_files_at_prepare"]
    assert warmed["cache_files_after_run"] == warmed["cache_files_at_prepare"]
    assert cold["cache_files_after_run"] > cold["cache_files_at_prepare"]
    np.testing.assert_allclose(warmed["output"], cold["output"], rtol=1e-5, atol=1e-5)
