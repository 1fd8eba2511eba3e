"""MatMul's fused residual (input 3, what tools/convert/fusion.fold_residual_add makes of
Add(MatMul, r)): Y = act(alpha * op(A) @ op(B) + beta * C + R), as an IR op on numpy and on every
GPU adapter with every MatMul kernel variant (WGNN_MATMUL_VARIANT): 1-D operands, batched A with a
broadcast B, transposes, with and without C, activations (applied after the residual), odd M, N, K,
K = 0, integers; R's shape / type checks; and zoo BERT, whose residual Adds all fold."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, gpu_fallbacks, matmul_reference, session_for
from helpers import test_backends as backends_to_test
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, read_model
from wgnn.models.zoo import build, example_inputs

import wgnn

rng = np.random.default_rng(11)
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
VARIANTS = ["blocked", "subgroup", "tiled"]
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-4, 5, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def output_shape(a: tuple, b: tuple, trans_a: int, trans_b: int) -> tuple:
    """numpy.matmul's result shape of op(A) @ op(B) (written out, not taken from wgnn)."""
    a, b = list(a), list(b)
    if trans_a and len(a) > 1:
        a[-2], a[-1] = a[-1], a[-2]
    if trans_b and len(b) > 1:
        b[-2], b[-1] = b[-1], b[-2]
    return np.matmul(np.zeros(a, np.float32), np.zeros(b, np.float32)).shape


def residual_model(a_shape, b_shape, *, c_shape=None, attrs=None, const_b=False, dtype=np.float32,
                   res_shape=None, res_dtype=None):
    """(model, feeds, expected) of one IR MatMul(a, b, c, res) (b a graph input or an initializer,
    c an initializer), sent through the .wgnn file format. res_shape / res_dtype override R's (for
    the shape checks; expected is None then)."""
    attrs = dict(attrs or {})
    a, b = r(*a_shape, dtype=dtype), r(*b_shape, dtype=dtype)
    c = r(*c_shape, dtype=dtype) if c_shape is not None else None
    out = output_shape(a_shape, b_shape, attrs.get("trans_a", 0), attrs.get("trans_b", 0))
    res = r(*(out if res_shape is None else res_shape), dtype=res_dtype or dtype)
    dt = np.dtype(dtype).name
    inputs = [TensorInfo("a", dt, a.shape), TensorInfo("res", res.dtype.name, res.shape)]
    initializers, feeds = {}, {"a": a, "res": res}
    if const_b:
        initializers["b"] = b
    else:
        inputs.append(TensorInfo("b", dt, b.shape))
        feeds["b"] = b
    if c is not None:
        initializers["c"] = c
    node = Node("MatMul", ["a", "b", "c" if c is not None else "", "res"], ["y"], attrs, name="mm")
    graph = Graph(nodes=[node], inputs=inputs, outputs=[TensorInfo("y", dt)], initializers=initializers)
    expected = matmul_reference(a, b, c, res, attrs) if res_shape is None and res_dtype is None else None
    return read_model(model_to_bytes(Model(graph))), feeds, expected


# (A shape, B shape, extra: c_shape / attrs / const_b / dtype)
CASES = {
    "plain": ((5, 3), (3, 6), {}),
    "vector_a": ((7,), (7, 11), {"c_shape": (11,)}),  # 1-D A: Y and R are (N,)
    "vector_b": ((3, 6, 5), (5,), {}),  # 1-D B: Y and R are (batch, M)
    "dot": ((9,), (9,), {"c_shape": ()}),  # 1-D @ 1-D: a scalar residual
    "batched_a_const_b": ((2, 9, 5), (5, 13), {"c_shape": (13,), "const_b": True}),
    "batched_a_runtime_b": ((3, 10, 9), (9, 8), {}),  # batches starting mid-block; vec4 B at run time
    "broadcast_batch": ((2, 1, 5, 4), (3, 4, 6), {"c_shape": (5, 1)}),
    "trans_a_trans_b": ((11, 13), (10, 11), {"c_shape": (13, 1), "const_b": True,
                                              "attrs": {"trans_a": 1, "trans_b": 1, "alpha": 0.75, "beta": -1.5}}),
    "trans_b_relu": ((2, 7, 12), (9, 12), {"c_shape": (9,), "const_b": True,
                                            "attrs": {"trans_b": 1, "activation": "relu"}}),
    "odd_clip": ((37, 19), (19, 45), {"attrs": {"activation": "clip", "activation_alpha": -0.5,
                                                "activation_beta": 0.75}}),
    "odd_sigmoid_const": ((3, 23, 17), (17, 21), {"c_shape": (21,), "const_b": True,
                                                   "attrs": {"activation": "sigmoid", "alpha": 0.5}}),
    "k0": ((4, 0), (0, 5), {"c_shape": (5,), "attrs": {"beta": 2.0}}),  # Y = beta * C + R
    "int32": ((3, 7, 9), (9, 12), {"dtype": np.int32, "c_shape": (12,), "const_b": True,
                                    "attrs": {"activation": "relu"}}),
}


def run_case(name: str, backend: str) -> wgnn.InferenceSession:
    a_shape, b_shape, extra = CASES[name]
    model, feeds, expected = residual_model(a_shape, b_shape, **extra)
    session = session_for(model, backend)
    got = session.run(None, feeds)[0]
    if backend.startswith("wgpu"):
        assert not gpu_fallbacks(session), f"{name}: MatMul fell back to the CPU: {session.report()['fallbacks']}"
    assert got.shape == expected.shape and got.dtype == np.dtype(extra.get("dtype", np.float32)), \
        f"{name} on {backend}: {got.dtype}{got.shape}"
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, **TOL, err_msg=f"{name} on {backend}")
    else:
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} on {backend}")
    return session


@pytest.mark.parametrize("name", CASES)
def test_residual_numpy(name):
    run_case(name, "numpy")


@pytest.fixture(params=VARIANTS)
def variant(request, monkeypatch):
    monkeypatch.setenv("WGNN_MATMUL_VARIANT", request.param)
    return request.param


def kernel_paths(session) -> list[str]:
    return [d.kernel.path for s in session.session.segments for _, ex in s.steps for d in getattr(ex, "dispatches", [])]


@pytest.mark.skipif(not GPUS, reason="no GPU adapter (install mesa-vulkan-drivers)")
@pytest.mark.parametrize("backend", GPUS)
@pytest.mark.parametrize("name", CASES)
def test_residual_gpu(name, backend, variant):
    session = run_case(name, backend)
    paths = kernel_paths(session)  # one dispatch, also for K = 0 (Y = beta * C + R)
    assert len(paths) == 1 and paths[0].startswith("matmul/"), paths
    if variant != "subgroup":  # subgroup runs blocked on adapters without the feature
        assert paths == [f"matmul/matmul_{variant}.wgsl"]


@pytest.mark.skipif(not GPUS, reason="no GPU adapter (install mesa-vulkan-drivers)")
@pytest.mark.parametrize("backend", GPUS)
def test_residual_resize_compiles_no_pipeline(backend, variant):
    """A symbolic row count: new sizes reuse the pipelines (R's presence is in params, not text)."""
    from wgnn.backends.wgpu.loader import pipeline_cache

    w, bias = r(19, 21), r(21)
    node = Node("MatMul", ["x", "w", "bias", "res"], ["y"], {"activation": "relu"}, name="mm")
    graph = Graph(nodes=[node], inputs=[TensorInfo("x", "float32", ("B", "M", 19)),
                                        TensorInfo("res", "float32", ("B", "M", 21))],
                  outputs=[TensorInfo("y", "float32")], initializers={"w": w, "bias": bias})
    session = session_for(Model(graph), backend)
    session.run(None, {"x": r(1, 3, 19), "res": r(1, 3, 21)})
    cache = pipeline_cache(session.session.backends[0].context)
    compiled = cache.compiled
    for batch, rows in ((2, 1), (1, 8), (3, 17)):
        x, res = r(batch, rows, 19), r(batch, rows, 21)
        got = session.run(None, {"x": x, "res": res})[0]
        np.testing.assert_allclose(got, np.maximum(x @ w + bias + res, 0), **TOL)
    assert cache.compiled == compiled
    assert not gpu_fallbacks(session)


@pytest.mark.parametrize("res_shape, res_dtype", [
    ((1, 6), None),  # broadcasts onto (5, 6), but the residual must have Y's shape exactly
    ((6,), None),
    ((5, 7), None),
    ((2, 5, 6), None),
    ((5, 6), np.int32),
])
def test_residual_must_have_the_output_shape_and_type(res_shape, res_dtype):
    model, feeds, _ = residual_model((5, 3), (3, 6), res_shape=res_shape, res_dtype=res_dtype)
    with pytest.raises(wgnn.ShapeError, match=r"residual must be float32 of the output's shape \[5, 6\]"):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)


def test_residual_flops():
    model, feeds, _ = residual_model((2, 5, 3), (3, 6))
    session = wgnn.InferenceSession(model, providers=["numpy"])
    session.run(None, feeds)
    assert session.report()["flops"] == 2 * (2 * 5 * 6) * 3 + 2 * 5 * 6  # MACs, then the residual add


# ------------------------------------------------------------------------------------ zoo BERT
def test_bert_residual_adds_fold_and_match_onnxruntime():
    """Each block's two residual Adds (after the attention output and the feed-forward MatMuls,
    both with a bias already) become MatMul residuals: no Add reading a MatMul is left, and the
    converted model matches onnxruntime on numpy and on every GPU adapter, all on the GPU."""
    model = build("bert")
    converted = wgnn.convert(model)
    nodes = converted.graph.nodes
    producers = {out: n for n in nodes for out in n.outputs}
    adds = [n for n in nodes if n.op_type == "Binary" and n.attrs.get("kind") == "add"]
    assert not [n for n in adds if any(producers.get(i) is not None and producers[i].op_type == "MatMul"
                                       for i in n.inputs)], "a residual Add was left"
    residual = [n for n in nodes if n.op_type == "MatMul" and n.input(3)]
    assert len(residual) == 4 and all(n.input(2) for n in residual)  # 2 layers x 2, each with its bias
    reference_session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reloaded = read_model(model_to_bytes(converted))
    for backend in backends_to_test():
        session = session_for(reloaded, backend)
        for batch in (1, 2):
            feeds = example_inputs(model, batch, seq=4 + batch, seed=batch)
            want = reference_session.run(None, feeds)[0]
            got = session.run(None, feeds)[0]
            assert got.shape == want.shape and got.dtype == want.dtype
            error = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
            assert error <= (1e-3 if backend.startswith("wgpu") else 1e-4), f"{backend} batch {batch}: {error:.3g}"
        if backend.startswith("wgpu"):
            report = session.report()
            assert report["fallbacks"] == [] and list(report["ops_per_backend"]) == ["wgpu"], report["fallbacks"]
