"""check_op: one ONNX node, run by the reference and by wgnn on every available backend.

    check_op("Conv", [x, Const(w)], {"pads": [1, 1, 1, 1]})

Inputs are arrays (graph inputs), Const(array) (initializers) or None (absent optional input).
The model is converted by wgnn's converter, written to .wgnn bytes and read back (so every op's
attributes also go through the file format), then run and compared with the reference:
onnx.reference.ReferenceEvaluator by default, onnxruntime with reference="ort".
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from wgnn.models.format import model_to_bytes, read_model
from wgnn.tools.conform.cases import Const
from wgnn.tools.conform.sources import make_model as one_node_model

import wgnn


def test_backends() -> list[str]:
    """Backends the op tests run on: WGNN_TEST_BACKENDS (comma separated, e.g. "numpy,wgpu:0") or
    numpy plus every GPU adapter wgpu finds ("wgpu:<index>")."""
    chosen = os.environ.get("WGNN_TEST_BACKENDS")
    if chosen:
        return [b.strip() for b in chosen.split(",") if b.strip()]
    return ["numpy"] + [f"wgpu:{a['index']}" for a in gpu_adapters()]


def gpu_adapters() -> list[dict]:
    from wgnn.backends.wgpu.context import adapters, gpu_available

    if gpu_available() is not None:
        return []
    return [a.as_dict() for a in adapters()]


def session_for(model, backend: str) -> wgnn.InferenceSession:
    """numpy -> the numpy backend alone; wgpu:<i> -> adapter i with numpy as fallback."""
    if backend.startswith("wgpu"):
        adapter = int(backend.split(":")[1]) if ":" in backend else None
        return wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter))
    return wgnn.InferenceSession(model, providers=[backend])


def gpu_fallbacks(session: wgnn.InferenceSession) -> list[dict]:
    """Fallbacks of ops that do have a GPU kernel (so fell back for a reason worth a look)."""
    from wgnn.backends.wgpu.backend import EXECUTIONS

    def by_design(fallback):  # element types the GPU does not store, int64 values past int32
        return any("not supported on the GPU" in r or "does not fit" in r for r in fallback["reasons"])

    return [f for f in session.report()["fallbacks"]
            if f["op"].split(" ")[0] in EXECUTIONS and not by_design(f)]


def make_model(op_type: str, inputs: list, attrs: dict | None = None, *, outputs: int = 1,
               opset: int = 18, output_dtypes: list | None = None) -> onnx.ModelProto:
    """The one-node model of `wgnn conform`'s own cases; output_dtypes (ONNX type numbers) type
    the outputs, which otherwise are left for the references to infer."""
    model = one_node_model(op_type, inputs, attrs or {}, outputs=outputs, opset=opset)
    for output, dtype in zip(model.graph.output, output_dtypes or []):
        output.type.tensor_type.elem_type = dtype
    return model


def reference_outputs(model: onnx.ModelProto, feeds: dict, reference: str = "onnx") -> list[np.ndarray]:
    if reference == "ort":
        import onnxruntime as ort

        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(x) for x in ReferenceEvaluator(model).run(None, feeds)]


def run_wgnn(model: onnx.ModelProto, feeds: dict, backend: str = "numpy", *,
             allow_fallback: bool = False) -> list[np.ndarray]:
    converted = wgnn.convert(model)
    reloaded = read_model(model_to_bytes(converted))
    session = session_for(reloaded, backend)
    results = session.run(None, feeds)
    if backend.startswith("wgpu") and not allow_fallback:
        fallbacks = gpu_fallbacks(session)
        assert not fallbacks, f"ops with GPU kernels fell back to the CPU: {fallbacks}"
    return results


def assert_close(actual: np.ndarray, expected: np.ndarray, *, rtol: float, atol: float, what: str) -> None:
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != reference {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != reference {expected.dtype}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check_op(op_type: str, inputs: list, attrs: dict | None = None, *, outputs: int = 1, opset: int = 18,
             rtol: float = 1e-5, atol: float = 1e-6, reference: str = "onnx",
             backends: list[str] | None = None, allow_fallback: bool = False) -> list[np.ndarray]:
    """Run op_type on every backend and compare with the reference; returns wgnn's outputs."""
    model = make_model(op_type, inputs, attrs, outputs=outputs, opset=opset)
    feeds = {f"in{i}": np.asarray(x) for i, x in enumerate(inputs)
             if x is not None and not isinstance(x, Const)}
    expected = reference_outputs(model, feeds, reference)
    results = None
    for backend in backends or test_backends():
        results = run_wgnn(model, feeds, backend, allow_fallback=allow_fallback)
        assert len(results) == len(expected)
        # GPU math (exp, erf, division) is not bit-exact with numpy: float32 ulps, not more.
        gpu = backend.startswith("wgpu")
        tol = {"rtol": max(rtol, 1e-4), "atol": max(atol, 1e-5)} if gpu else {"rtol": rtol, "atol": atol}
        for i, (got, want) in enumerate(zip(results, expected)):
            assert_close(got, want, **tol, what=f"{op_type} output {i} on {backend}")
    return results


def check_model(model: onnx.ModelProto, feeds: dict, *, expected: list[np.ndarray] | None = None,
                reference: str = "onnx", rtol: float = 1e-5, atol: float = 1e-6,
                backends: list[str] | None = None, allow_fallback: bool = False) -> list[np.ndarray]:
    """Run a whole model on every backend (through a .wgnn round trip) and compare with the
    reference's outputs (or with `expected`); returns the last backend's outputs."""
    expected = expected if expected is not None else reference_outputs(model, feeds, reference)
    results = None
    for backend in backends or test_backends():
        results = run_wgnn(model, feeds, backend, allow_fallback=allow_fallback)
        assert len(results) == len(expected)
        gpu = backend.startswith("wgpu")
        tol = {"rtol": max(rtol, 1e-4), "atol": max(atol, 1e-5)} if gpu else {"rtol": rtol, "atol": atol}
        for i, (got, want) in enumerate(zip(results, expected)):
            assert_close(np.asarray(got), np.asarray(want), **tol, what=f"output {i} on {backend}")
    return results


def check_fusion(model: onnx.ModelProto, feeds: dict, expected_ops: list[str], *,
                 atol: float = 1e-4) -> onnx.ModelProto:
    """A fusion pass's case: the converted nodes' op types are expected_ops, and the converted
    model (as .wgnn bytes) on numpy and on every GPU adapter, with no fallback, computes what
    onnxruntime computes on the original. Returns the converted model."""
    import onnxruntime as ort

    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == expected_ops
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    data = model_to_bytes(converted)
    configs = [wgnn.Config(providers=("numpy",))] + [wgnn.Config(providers=("wgpu", "numpy"), adapter=a["index"])
                                                       for a in gpu_adapters()]
    for config in configs:
        session = wgnn.InferenceSession(data, config=config)
        got = session.run(None, feeds)
        assert session.report()["fallbacks"] == []
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=str(config.providers))
    return converted


def normalise_float64(x: np.ndarray, axes: tuple, epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x normalised over `axes` in float64, with its mean and 1 / sqrt(variance + epsilon): the truth
    that float32 results are held to where a float32 reference's own rounding would be the larger
    error (rows far from zero)."""
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)
    return (wide - mean) * inv_std, mean, inv_std


def far_from_zero_norm_cases() -> list:
    """pytest params (name, model, X, float64 outputs) of every norm kernel on rows near 50 with a
    spread of 0.1 and scales near 3: a float32 mean alone is off by up to half an ulp of 50, 1.9e-6,
    which is 6e-5 of a normalised unit after the scale. Row lengths pick every kernel: odd and
    whole-vec4 spatial sizes and row lengths, all past a workgroup (64), and rows of thousands."""
    rng = np.random.default_rng(50)

    def rows(*shape):
        return (rng.standard_normal(shape) * 0.1 + 50.0).astype(np.float32)

    def near_three(n):
        return (3.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    def channel(v, ndim):
        return v.reshape((1, -1) + (1,) * (ndim - 2))

    cases = []
    for shape in [(2, 3, 9, 9), (2, 3, 8, 10), (1, 2, 63, 65)]:
        x, scale, bias = rows(*shape), near_three(shape[1]), rng.standard_normal(shape[1]).astype(np.float32)
        y = normalise_float64(x, (2, 3), 1e-5)[0] * channel(scale, 4) + channel(bias, 4)
        cases.append((f"InstanceNorm{shape}", make_model("InstanceNormalization", [x, Const(scale), Const(bias)]),
                      x, [y]))
    for shape in [(2, 6, 9, 9), (2, 6, 4, 6)]:
        x, scale, bias = rows(*shape), near_three(6), rng.standard_normal(6).astype(np.float32)
        grouped = normalise_float64(x.reshape(shape[0], 3, -1), (2,), 1e-5)[0].reshape(shape)
        model = make_model("GroupNormalization", [x, Const(scale), Const(bias)], {"num_groups": 3}, opset=21)
        cases.append((f"GroupNorm{shape}", model, x, [grouped * channel(scale, 4) + channel(bias, 4)]))
    for shape in [(3, 259), (3, 260), (2, 2999)]:
        x, scale, bias = rows(*shape), near_three(shape[1]), rng.standard_normal(shape[1]).astype(np.float32)
        normalised, mean, inv_std = normalise_float64(x, (1,), 1e-5)
        model = make_model("LayerNormalization", [x, Const(scale), Const(bias)], outputs=3, opset=17)
        cases.append((f"LayerNorm{shape}", model, x, [normalised * scale + bias, mean, inv_std]))
    x = rows(2, 3, 5, 7)
    mean = x.astype(np.float64).mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt(((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True))
    cases.append(("MeanVarianceNorm(2, 3, 5, 7)", make_model("MeanVarianceNormalization", [x]), x,
                  [(x - mean) / (std + 1e-9)]))
    return [pytest.param(*case, id=case[0]) for case in cases]


class Pipelines(dict):
    """id(kernel) -> (path, FLOAT text, override constants) of every pipeline the pipeline caches
    hand out while a test records them (record_pipelines)."""

    def float_of(self, kernel) -> str | None:
        return self[id(kernel)][1]


def record_pipelines(monkeypatch) -> Pipelines:
    """Record, for the rest of the test, what each pipeline was built with (its kernel path, the
    {{FLOAT}} text and the override constants it was asked for)."""
    from wgnn.backends.wgpu import loader

    seen = Pipelines()
    original = loader.PipelineCache.get

    def get(self, path, bindings, *, params=None, constants=None, entry="main", deferred=False):
        kernel = original(self, path, bindings, params=params, constants=constants, entry=entry, deferred=deferred)
        seen[id(kernel)] = (path, (params or {}).get("FLOAT"), dict(constants or {}))
        return kernel

    monkeypatch.setattr(loader.PipelineCache, "get", get)
    return seen



def fresh_warmup_cache(monkeypatch, tmp_path, adapter: int):
    """The adapter's pipeline cache with driver warm-ups on (the suite's default is off), an empty
    record, and every kernel compiled anew, as in a new process; all restored after the test."""
    from wgnn.backends.wgpu import warmup
    from wgnn.backends.wgpu.context import get_context
    from wgnn.backends.wgpu.loader import pipeline_cache

    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "2")
    context = get_context(adapter)
    relu = make_model("Relu", [np.zeros((1, 4), np.float32)])
    feeds = {relu.graph.input[0].name: np.ones((1, 4), np.float32)}
    session_for(relu.SerializeToString(), f"wgpu:{adapter}").run(None, feeds)
    cache = pipeline_cache(context)  # its compile threads exist now
    monkeypatch.setattr(cache, "warmup", warmup.DriverWarmup(context))
    monkeypatch.setattr(cache, "pipelines", {})
    return cache


def matmul_reference(a, b, c, res, attrs) -> np.ndarray:
    """An IR MatMul's act(alpha * op(A) @ op(B) + beta * C + R) in float64 (int64 for integers,
    whose kernels take no alpha and beta); c and res may be None."""
    wide = np.float64 if a.dtype.kind == "f" else np.int64
    a, b = a.astype(wide), b.astype(wide)
    if attrs.get("trans_a") and a.ndim > 1:
        a = np.swapaxes(a, -1, -2)
    if attrs.get("trans_b") and b.ndim > 1:
        b = np.swapaxes(b, -1, -2)
    floats = wide is np.float64
    y = np.matmul(a, b) * attrs.get("alpha", 1.0) if floats else np.matmul(a, b)
    if c is not None:
        y = y + attrs.get("beta", 1.0) * c.astype(wide) if floats else y + c
    if res is not None:
        y = y + res.astype(wide)
    kind, lo, hi = attrs.get("activation", ""), attrs.get("activation_alpha", 0.0), attrs.get("activation_beta", 0.0)
    if kind == "relu":
        y = np.maximum(y, 0)
    elif kind == "leaky_relu":
        y = np.where(y >= 0, y, lo * y)
    elif kind == "clip":
        y = np.minimum(np.maximum(y, lo), hi)
    elif kind == "sigmoid":
        y = 1.0 / (1.0 + np.exp(-y))
    return np.asarray(y)
