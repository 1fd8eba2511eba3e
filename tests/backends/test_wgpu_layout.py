"""NC4HW4 on the GPU: the layout pass, Convert steps, both storages (buffer, texture), accessors,
padding lanes, download of NC4HW4 outputs, and tensors past texture limits."""
import numpy as np
import onnx
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper
from wgnn.backends.wgpu import elementwise
from wgnn.backends.wgpu.layout import pack_nc4hw4, unpack_nc4hw4

import wgnn

ADAPTERS = [a["index"] for a in gpu_adapters()]
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


@pytest.fixture
def unary_prefers_nc4hw4(monkeypatch):
    """Until the conv family prefers NC4HW4, make Unary prefer it so the pass has a reason to act."""
    monkeypatch.setattr(elementwise.UnaryGpu, "layouts", classmethod(lambda cls, step: ("nc4hw4", "linear")))


def chain(channels=5):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, 3, 7])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 1, 3, 7])
    bias = onnx.numpy_helper.from_array(np.linspace(-1, 1, channels).astype(np.float32).reshape(1, channels, 1, 1),
                                        "bias")
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]),  # sigmoid(0) = 0.5: padding lanes must be re-zeroed
             helper.make_node("Add", ["a", "bias"], ["b"]), helper.make_node("Mul", ["b", "s"], ["c"]),
             helper.make_node("Exp", ["c"], ["d"]), helper.make_node("Sub", ["d", "x"], ["y"]),
             helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0)]  # linear consumer: converts back
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("total", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "chain", [x, s], outputs, [bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return wgnn.convert(model, optimize=False)  # unfused: one step per op for the layout pass to place


def test_pack_unpack_round_trip():
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 5)).astype(np.float32)
    packed = pack_nc4hw4(x)
    assert packed.shape == (2, 2, 3, 5, 4)
    assert not packed[:, 1, :, :, 2:].any()  # channels 6, 7 are padding
    np.testing.assert_array_equal(unpack_nc4hw4(packed.reshape(-1), x.shape), x)


@pytest.mark.parametrize("storage", ["buffer", "texture"])
@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("channels", [5, 8, 1])
def test_nc4hw4_chain_matches_numpy(unary_prefers_nc4hw4, storage, adapter, channels):
    model = chain(channels)
    rng = np.random.default_rng(channels)
    feeds = {"x": rng.standard_normal((2, channels, 3, 7)).astype(np.float32),
             "s": rng.standard_normal((2, 1, 3, 7)).astype(np.float32)}
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage))
    got = session.run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    report = session.report()
    # x, bias and s enter NC4HW4 once each; y is read linearly by ReduceSum once.
    assert report["conversions"] == 4
    placements = session.session.backends[0].placements
    assert {p.storage for p in placements.values()} == {storage}
    # A new batch re-plans without compiling.
    feeds2 = {k: np.concatenate([v, v]) for k, v in feeds.items()}
    np.testing.assert_allclose(session.run(None, feeds2)[0], np.concatenate([want[0], want[0]]), rtol=1e-5, atol=1e-5)


def test_tensor_past_texture_limits_stays_in_a_buffer(unary_prefers_nc4hw4, monkeypatch):
    model = chain(5)
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), storage="texture"))
    backend = session.session.backends[0]
    monkeypatch.setitem(backend.context.limits, "max-texture-array-layers", 1)  # every tensor needs >= 2
    feeds = {"x": np.ones((2, 5, 3, 7), np.float32), "s": np.ones((2, 1, 3, 7), np.float32)}
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    np.testing.assert_allclose(session.run(None, feeds)[0], want[0], rtol=1e-5)
    assert {p.storage for p in backend.placements.values()} == {"buffer"}


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("storage, precision", [("buffer", "fp32"), ("texture", "fp32"), ("texture", "fp16"),
                                                ("buffer", "fp16-arith")])
def test_first_conv_reads_its_linear_image(adapter, channels, storage, precision):
    """A conv whose input has at most 4 channels reads the linear graph input a slice at a time:
    no Convert step before it (its NC4HW4 output is unpacked by the download)."""
    rng = np.random.default_rng(channels)
    w = onnx.numpy_helper.from_array(rng.standard_normal((5, channels, 3, 3)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, channels, 6, 7])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 2]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "first", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": rng.standard_normal((2, channels, 6, 7)).astype(np.float32)}
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
    if precision != "fp32" and storage == "buffer" and "shader-f16" not in gpu_adapters()[adapter]["features"]:
        pytest.skip("16-bit buffers need shader-f16")
    session = wgnn.InferenceSession(model, config=config)
    got = session.run(None, feeds)[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert [s.op.op_type for seg in session.session.segments for s, _ in seg.steps] == ["Conv"]
