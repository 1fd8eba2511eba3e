"""Views: a step whose output is its input's bytes (a Reshape of a linear tensor, a layout change
of 1x1 feature maps whose channels fill whole slices) shares the input's GPU storage and
dispatches nothing; the memory planner keeps that storage alive for the view's readers."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import check_model, gpu_adapters
from onnx import TensorProto, helper, numpy_helper

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(11)


def graph_model(nodes, inputs, outputs, inits=None, opset=18) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "views", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def gpu_session(model, adapter: int) -> wgnn.InferenceSession:
    return wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))


def dispatches(session) -> int:
    return sum(len(ex.dispatches) for seg in session.session.segments for _, ex in seg.steps)


def chain_model(last_is_output: bool = False) -> onnx.ModelProto:
    """x [2, 3, 5] -> Exp -> Reshape [6, 5] -> Flatten -> Sigmoid -> ... : the reshapes are views
    (a chain of two), and many same-sized tensors come after them, so a planner that freed the
    Exp output at the Reshape would let a later step overwrite what the Sigmoid reads."""
    shape = numpy_helper.from_array(np.array([6, 5], np.int64), "shape")
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Reshape", ["e", "shape"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=0),
             helper.make_node("Neg", ["x"], ["n1"]),
             helper.make_node("Abs", ["n1"], ["n2"]),
             helper.make_node("Sin", ["n2"], ["n3"]),
             helper.make_node("Sigmoid", ["f"], ["s"]),
             helper.make_node("Reshape", ["n3", "shape"], ["n4"]),
             helper.make_node("Flatten", ["n4"], ["n5"], axis=0),
             helper.make_node("Add", ["s", "n5"], ["y"])]
    outputs = ["y"] + (["f"] if last_is_output else [])
    model = graph_model(nodes, [("x", [2, 3, 5])], outputs)
    model.graph.initializer.append(shape)
    return model


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_reshapes_are_views_and_keep_their_source_alive(adapter):
    model = chain_model()
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy", f"wgpu:{adapter}"])
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    report = session.report()
    assert report["views"] == 4  # two Reshapes and two Flattens
    rasters = [ex for seg in session.session.segments for step, ex in seg.steps if step.op.op_type == "Raster"]
    assert len(rasters) == 4 and not any(ex.dispatches for ex in rasters)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_a_view_that_is_a_graph_output_or_requested_gets_its_own_storage(adapter):
    model = chain_model(last_is_output=True)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=[f"wgpu:{adapter}"])
    session = gpu_session(model, adapter)
    _, f = session.run(None, {"x": x})
    np.testing.assert_allclose(f, np.exp(x).reshape(1, 30), rtol=1e-5)
    assert session.report()["views"] == 3
    # An intermediate asked for by name is downloaded from storage of its own too.
    (r,) = session.run(["r"], {"x": x})
    np.testing.assert_allclose(r, np.exp(x).reshape(6, 5), rtol=1e-5)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_a_view_of_a_graph_input(adapter):
    """The source is the uploaded feed (storage outside the pool)."""
    model = graph_model([helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("Relu", ["f"], ["y"])],
                        [("x", [3, 2, 4])], ["y"])
    x = rng.standard_normal((3, 2, 4)).astype(np.float32)
    check_model(model, {"x": x}, backends=[f"wgpu:{adapter}"])
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    assert session.report()["views"] == 1 and dispatches(session) == 1


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
@pytest.mark.parametrize("channels, views", [(8, 2), (6, 1)])
def test_pooled_features_reach_the_gemm_without_copies(adapter, channels, views):
    """Conv -> GlobalAveragePool -> Flatten -> Gemm: with whole slices of channels the NC4HW4 ->
    linear conversion is a view too; with 6 channels (lanes padded) it converts. (The Gemm's
    weights are an input: with constant ones the three ops fuse into one GlobalPoolMatMul.)"""
    w = rng.standard_normal((channels, 3, 3, 3)).astype(np.float32)
    feeds = {"x": rng.standard_normal((2, 3, 6, 7)).astype(np.float32),
             "g": rng.standard_normal((channels, 5)).astype(np.float32)}
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                         helper.make_node("GlobalAveragePool", ["c"], ["p"]),
                         helper.make_node("Flatten", ["p"], ["f"]),
                         helper.make_node("Gemm", ["f", "g"], ["y"])],
                        [("x", [2, 3, 6, 7]), ("g", [channels, 5])], ["y"], {"w": w})
    check_model(model, feeds, backends=["numpy", f"wgpu:{adapter}"], rtol=1e-4, atol=1e-4)
    session = gpu_session(model, adapter)
    session.run(None, feeds)
    assert session.report()["views"] == views


def test_texture_and_fp16_feature_maps_convert():
    """NC4HW4 in textures, or in 16 bits, is no byte-for-byte view of a linear buffer."""
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                         helper.make_node("GlobalAveragePool", ["c"], ["p"]),
                         helper.make_node("Flatten", ["p"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                        [("x", [1, 3, 5, 5])], ["z"], {"w": w})
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    want = np.maximum(gpu_session(model, 0).run(None, {"x": x})[0], 0)
    for storage, precision in (("texture", "fp32"), ("buffer", "fp16")):
        config = wgnn.Config(providers=("wgpu",), adapter=0, storage=storage, precision=precision)
        session = wgnn.InferenceSession(model, config=config)
        got = session.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
        assert session.report()["views"] == 1  # the Flatten only


# ------------------------------------------------------------------------------- concatenations
def conv(name, x, cin, cout, inits):
    inits[f"{name}_w"] = (rng.standard_normal((cout, cin, 3, 3)) * 0.3).astype(np.float32)
    return helper.make_node("Conv", [x, f"{name}_w"], [name], pads=[1, 1, 1, 1])


def concat_model(channels, *, reuse=False, output_concat=False) -> onnx.ModelProto:
    """x -> conv a, conv b (channels) -> Concat(a, b) -> conv -> y; `reuse`: b also feeds a
    second Concat(b, a) and is read after both; `output_concat`: the Concat is a graph output."""
    inits: dict = {}
    nodes = [conv("a", "x", 3, channels[0], inits), conv("b", "x", 3, channels[1], inits),
             helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
             conv("y", "cat", sum(channels), 4, inits)]
    outputs = ["y"] + (["cat"] if output_concat else [])
    if reuse:
        nodes += [helper.make_node("Concat", ["b", "a"], ["cat2"], axis=1), conv("z", "cat2", sum(channels), 4, inits),
                  helper.make_node("Relu", ["b"], ["rb"])]
        outputs += ["z", "rb"]
    return graph_model(nodes, [("x", ["N", 3, 6, 5])], outputs, inits)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
@pytest.mark.parametrize("channels, elided", [((8, 6), True), ((4, 8), True), ((6, 8), False)])
def test_channel_concat_of_one_image_is_written_in_place(adapter, channels, elided):
    """The producers of a Concat's inputs write into its output when each input starts at a whole
    slice (the last may end in padding lanes); batch 2 copies, and the resize compiles nothing."""
    from wgnn.backends.wgpu.loader import pipeline_cache

    model = concat_model(channels)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy", f"wgpu:{adapter}"], rtol=1e-4, atol=1e-4)
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    assert session.report()["views"] == int(elided)
    before = pipeline_cache(session.session.backends[0].context).compiled
    x2 = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    got = session.run(None, {"x": x2})[0]
    assert pipeline_cache(session.session.backends[0].context).compiled == before
    assert session.report()["views"] == 0
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": x2})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_an_input_of_two_concats_is_written_into_one(adapter):
    model = concat_model((8, 4), reuse=True)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=[f"wgpu:{adapter}"], rtol=1e-4, atol=1e-4)
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    assert session.report()["views"] == 1


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_concat_that_is_a_graph_output(adapter):
    model = concat_model((8, 4), output_concat=True)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=[f"wgpu:{adapter}"], rtol=1e-4, atol=1e-4)
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    assert session.report()["views"] == 1


def nested_concat_case(rows) -> tuple[onnx.ModelProto, dict]:
    """Concat(Exp(p), Neg(q)) along axis 0, that and Sin(p) concatenated again, Tanh: p and q
    [rows[0], 4] and [rows[1], 4]. The model and its feeds."""
    nodes = [helper.make_node("Exp", ["p"], ["ep"]), helper.make_node("Neg", ["q"], ["nq"]),
             helper.make_node("Concat", ["ep", "nq"], ["cat"], axis=0),
             helper.make_node("Sin", ["p"], ["sp"]),
             helper.make_node("Concat", ["cat", "sp"], ["cat2"], axis=0),
             helper.make_node("Tanh", ["cat2"], ["y"])]
    model = graph_model(nodes, [("p", [rows[0], 4]), ("q", [rows[1], 4])], ["y"])
    feeds = {"p": rng.standard_normal((rows[0], 4)).astype(np.float32),
             "q": rng.standard_normal((rows[1], 4)).astype(np.float32)}
    return model, feeds


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
@pytest.mark.parametrize("rows", [(8, 4), (3, 5)])
def test_linear_concat_and_nested_concat(adapter, rows):
    """Concat along axis 0 of linear tensors: in place when each input's byte offset is a
    multiple of the adapter's binding alignment (32 on lavapipe: (8, 4) both Concats, the outer
    one holding the inner; (3, 5) the outer only)."""
    model, feeds = nested_concat_case(rows)
    check_model(model, feeds, backends=["numpy", f"wgpu:{adapter}"])
    session = gpu_session(model, adapter)
    session.run(None, feeds)
    alignment = session.session.backends[0].alignment
    inner, outer = rows[0] * 16 % alignment == 0, (rows[0] + rows[1]) * 16 % alignment == 0
    assert session.report()["views"] == int(inner) + int(outer)
    if alignment == 32:
        assert session.report()["views"] == (2 if rows == (8, 4) else 1)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
@pytest.mark.parametrize("split", [(2, 6), (1, 7)])
def test_split_along_rows_is_a_view_where_the_adapter_can_bind_it(adapter, split):
    """Split of x [8, 4] along axis 0: each part is one contiguous range of x, so it is a view
    where its byte offset suits the adapter's binding alignment (the first part always: offset
    0); the other parts copy. Tensors made after the Split and before the parts are read would
    overwrite x if the planner freed it at the Split."""
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Split", ["e", "split"], ["top", "rest"], axis=0),
             helper.make_node("Neg", ["x"], ["n1"]), helper.make_node("Sin", ["n1"], ["n2"]),
             helper.make_node("ReduceSum", ["n2"], ["s"], keepdims=1),
             helper.make_node("Add", ["top", "s"], ["y1"]), helper.make_node("Mul", ["rest", "s"], ["y2"])]
    model = graph_model(nodes, [("x", [8, 4])], ["y1", "y2"], {"split": np.array(split, np.int64)})
    x = rng.standard_normal((8, 4)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy", f"wgpu:{adapter}"], rtol=1e-4, atol=1e-4)
    session = gpu_session(model, adapter)
    session.run(None, {"x": x})
    aligned = split[0] * 16 % session.session.backends[0].alignment == 0
    assert session.report()["views"] == 1 + int(aligned)
