"""GPU MatMul / norm kernels beyond tests/ops: both MatMul variants (the tiled one is meant for real
GPUs; forced here so lavapipe checks it), fused epilogues, refusals, long rows, resize, BERT."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import Const, check_op, gpu_adapters, run_wgnn, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.format import model_to_bytes, read_model
from wgnn.models.zoo import build, example_inputs

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
TOL = {"rtol": 1e-4, "atol": 1e-5}
rng = np.random.default_rng(1)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["blocked", "tiled"])
def variant(request, monkeypatch):
    from wgnn.backends.wgpu.matmul import MatMulGpu

    monkeypatch.setattr(MatMulGpu, "force_variant", request.param)
    return request.param


# ----------------------------------------------------------------------------------- MatMul
@pytest.mark.parametrize("a, b", [
    ((37, 45), (45, 70)),  # several 4x4 blocks, strips and 32x32 tiles, ragged edges
    ((2, 1, 33, 17), (3, 17, 35)),  # broadcast batch axes
    ((2, 3, 1, 2, 5, 9), (3, 1, 2, 9, 6)),  # rank 6, axes that merge only in part
    ((1, 65), (65, 1)),
    ((9,), (4, 9, 7)),
    ((4, 9, 7), (7,)),
    ((6, 0), (0, 5)),  # K = 0
])
def test_matmul_variants(variant, a, b):
    check_op("MatMul", [r(*a), r(*b)], backends=GPUS, **TOL)


@pytest.mark.parametrize("c_shape", [(), (70,), (37, 1), (37, 70), None])
def test_gemm_variants(variant, c_shape):
    c = [] if c_shape is None else [r(*c_shape)]
    check_op("Gemm", [r(45, 37), r(70, 45), *c], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": -2.0},
             opset=13, backends=GPUS, **TOL)


def test_gemm_k0_gives_the_bias(variant):
    got = check_op("Gemm", [r(5, 0), r(0, 6), r(6)], {"beta": 3.0}, opset=13, backends=GPUS, **TOL)
    assert np.abs(got[0]).max() > 0


def _model(nodes, inputs, output, inits, opset=14):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in inputs.items()],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


ACTIVATIONS = [("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}), ("HardSwish", {}),
               ("Clip", {})]


@pytest.mark.parametrize("op, attrs", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_fused_bias_and_activation(variant, op, attrs):
    """MatMul + Add(bias) + activation become one MatMul with bias and activation: on the GPU."""
    extra = ["lo", "hi"] if op == "Clip" else []
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
             helper.make_node(op, ["z", *extra], ["out"], **attrs)]
    inits = {"w": r(13, 6), "b": r(6), "lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}
    model = _model(nodes, {"x": [2, 5, 13]}, "out", inits)
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == ["MatMul"]
    feeds = {"x": r(2, 5, 13)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in GPUS:
        got = run_wgnn(model, feeds, backend)
        np.testing.assert_allclose(got[0], want[0], **TOL)


def test_unmergeable_batch_axes_fall_back():
    """Five batch axes whose broadcast patterns alternate cannot merge into the kernel's four."""
    a, b = r(2, 1, 3, 1, 2, 3, 4), r(1, 3, 1, 2, 1, 4, 2)
    model = wgnn.convert(_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                                {"a": list(a.shape), "b": list(b.shape)}, "y", {}))
    for backend in GPUS:
        session = session_for(model, backend)
        np.testing.assert_allclose(session.run(None, {"a": a, "b": b})[0], a @ b, **TOL)
        [fallback] = session.report()["fallbacks"]
        assert "batch axes" in fallback["reasons"][0]


def test_matmul_resize_compiles_no_pipeline():
    from wgnn.backends.wgpu.loader import pipeline_cache

    w = r(11, 7)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 11])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    for backend in GPUS:
        session = session_for(wgnn.convert(model), backend)
        session.run(None, {"x": r(3, 11)})
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = cache.compiled
        for rows in (1, 8, 33):
            x_value = r(rows, 11)
            np.testing.assert_allclose(session.run(None, {"x": x_value})[0], x_value @ w, **TOL)
        assert cache.compiled == compiled


# ------------------------------------------------------------------------------------- norms
def test_layer_norm_unmerged_broadcast_parameters():
    check_op("LayerNormalization", [r(2, 3, 6, 5), Const(r(6, 1)), Const(r(3, 1, 5))], {"axis": 1}, opset=17,
             backends=GPUS, **TOL)
    check_op("LayerNormalization", [r(4, 1), Const(r(1))], outputs=3, opset=17, backends=GPUS, **TOL)


def test_batch_norm_many_elements():
    x = r(2, 7, 33, 31)
    params = [Const(r(7)), Const(r(7)), Const(r(7)), Const((np.abs(r(7)) + 0.1).astype(np.float32))]
    check_op("BatchNormalization", [x, *params], {"epsilon": 1e-3}, opset=15, backends=GPUS, reference="ort", **TOL)


# -------------------------------------------------------------------------------------- BERT
def test_bert_runs_matmul_and_layernorm_on_the_gpu():
    model = build("bert")
    converted = read_model(model_to_bytes(wgnn.convert(model)))
    reference = wgnn.InferenceSession(converted, providers=["numpy"])
    for backend in GPUS:
        session = session_for(converted, backend)
        for batch in (1, 2):
            feeds = example_inputs(model, batch, seq=4 + batch, seed=batch)
            for got, want in zip(session.run(None, feeds), reference.run(None, feeds), strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            fell_back = {f["op"].split(" ")[0] for f in session.report()["fallbacks"]}
            assert not fell_back & {"MatMul", "LayerNorm"}
