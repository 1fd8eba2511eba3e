"""Views and in-place concatenations on the numpy backend: a Reshape's output lives in its input's
memory, a Concat's inputs are written by their producers into its output, and those Raster steps
move nothing. Tensors the caller gets (graph outputs, feeds) are new arrays on every run, so
they host nothing: such steps still copy."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_model
from onnx import helper
from test_views import chain_model, concat_model, conv, graph_model, nested_concat_case

import wgnn

rng = np.random.default_rng(17)


def numpy_session(model) -> wgnn.InferenceSession:
    return wgnn.InferenceSession(model, providers=["numpy"])


def rasters(session) -> list:
    return [ex for seg in session.session.segments for step, ex in seg.steps if step.op.op_type == "Raster"]


def idle(session) -> int:
    return sum(ex.nothing_to_compute for ex in rasters(session))


def test_reshapes_are_views_and_keep_their_source_alive():
    model = chain_model()
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    session = numpy_session(model)
    for _ in range(2):  # the second run reuses the arena the first one left
        (y,) = session.run(None, {"x": x})
        np.testing.assert_allclose(y, 1 / (1 + np.exp(-np.exp(x))).reshape(1, 30)
                                   + np.sin(np.abs(-x)).reshape(1, 30), rtol=1e-5)
    assert session.report()["views"] == 4 and idle(session) == 4


def test_a_view_that_is_a_graph_output_or_of_a_feed_copies():
    model = chain_model(last_is_output=True)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    session = numpy_session(model)
    _, f = session.run(None, {"x": x})
    np.testing.assert_allclose(f, np.exp(x).reshape(1, 30), rtol=1e-6)
    assert session.report()["views"] == 3 and idle(session) == 3
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("Relu", ["f"], ["y"])]
    feed_model = graph_model(nodes, [("x", [3, 2, 4])], ["y"])
    session = numpy_session(feed_model)
    (y,) = session.run(None, {"x": x.reshape(3, 2, 5)[..., :4].copy()})
    np.testing.assert_array_equal(y, np.maximum(x.reshape(3, 2, 5)[..., :4].reshape(3, 8), 0))
    assert session.report()["views"] == 0 and idle(session) == 0


@pytest.mark.parametrize("channels", [(8, 6), (3, 5)])
def test_channel_concat_of_one_image_is_written_in_place(channels):
    model = concat_model(channels)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy"], rtol=1e-4, atol=1e-5)
    session = numpy_session(model)
    got = [session.run(None, {"x": x})[0] for _ in range(2)]
    assert session.report()["views"] == 1 and idle(session) == 1
    np.testing.assert_array_equal(got[0], got[1])
    # Batch 2: each input is two runs of the output, so the Concat copies; right either way.
    x2 = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x2}, backends=["numpy"], rtol=1e-4, atol=1e-5)
    session.run(None, {"x": x2})
    assert session.report()["views"] == 0 and idle(session) == 0
    np.testing.assert_allclose(session.run(None, {"x": x})[0], got[0], rtol=1e-6)  # and back


def test_an_input_of_two_concats_is_written_into_one():
    model = concat_model((8, 4), reuse=True)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy"], rtol=1e-4, atol=1e-5)
    session = numpy_session(model)
    session.run(None, {"x": x})
    assert session.report()["views"] == 1 and idle(session) == 1


def test_concat_that_is_a_graph_output_copies():
    """The caller owns a graph output's array (a new one per run, or its out=): no part lives there."""
    model = concat_model((8, 4), output_concat=True)
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy"], rtol=1e-4, atol=1e-5)
    session = numpy_session(model)
    first = session.run(None, {"x": x})
    out = {"cat": np.empty_like(first[1])}
    second = session.run(None, {"x": x}, out=out)
    assert session.report()["views"] == 0 and idle(session) == 0
    assert second[1] is out["cat"] and not np.shares_memory(first[1], out["cat"])
    np.testing.assert_array_equal(out["cat"], first[1])
    np.testing.assert_array_equal(second[0], first[0])


@pytest.mark.parametrize("rows", [(8, 4), (3, 5)])
def test_linear_concat_and_nested_concat(rows):
    """Along axis 0 every input is one range of the output at any offset: both Concats in place,
    the outer one holding the inner."""
    model, feeds = nested_concat_case(rows)
    check_model(model, feeds, backends=["numpy"])
    session = numpy_session(model)
    session.run(None, feeds)
    assert session.report()["views"] == 2 and idle(session) == 2


def test_zoo_unet_concats_in_place():
    """zoo:unet's two skip Concats (batch 1) move nothing; its output is onnxruntime's."""
    import onnxruntime as ort
    from wgnn.models.zoo import build, example_inputs

    model = build("unet", size=16)
    feeds = example_inputs(model)
    session = numpy_session(model)
    got = session.run(None, feeds)[0]
    assert session.report()["views"] == 2 and idle(session) == 2
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def split_model():
    """x [6, 4] -> Exp -> Split along axis 0 into [2, 4] and [4, 4] (contiguous ranges of the Exp
    output: views at offsets), a Slice of rows 1..3 of the second part (a view of a view), then
    tensors of the Exp output's size made before the parts are read: a planner that freed the
    Exp output at the Split would let them overwrite what the parts are."""
    import onnx

    consts = {"split": np.array([2, 4], np.int64), "starts": np.array([1], np.int64),
              "ends": np.array([3], np.int64), "axes": np.array([0], np.int64)}
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("Split", ["e", "split"], ["top", "rest"], axis=0),
             helper.make_node("Slice", ["rest", "starts", "ends", "axes"], ["middle"]),
             helper.make_node("Neg", ["x"], ["n1"]), helper.make_node("Sin", ["n1"], ["n2"]),
             helper.make_node("Cos", ["n2"], ["n3"]),
             helper.make_node("ReduceSum", ["n3"], ["s"], keepdims=1, noop_with_empty_axes=0),
             helper.make_node("Add", ["top", "s"], ["y1"]), helper.make_node("Mul", ["middle", "s"], ["y2"])]
    model = graph_model(nodes, [("x", [6, 4])], ["y1", "y2"])
    model.graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in consts.items())
    return model


def test_split_and_slice_of_contiguous_rows_are_views():
    model = split_model()
    x = rng.standard_normal((6, 4)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy"], rtol=1e-5, atol=1e-6)
    session = numpy_session(model)
    for _ in range(2):
        y1, y2 = session.run(None, {"x": x})
        s = np.cos(np.sin(-x)).sum()
        np.testing.assert_allclose(y1, np.exp(x[:2]) + s, rtol=1e-5)
        np.testing.assert_allclose(y2, np.exp(x[3:5]) * s, rtol=1e-5)
    assert session.report()["views"] == 3 and idle(session) == 3


@pytest.mark.parametrize("batch, views", [(1, 1), (2, 0)])
def test_channel_slice_of_one_image_is_a_view(batch, views):
    """Channels 2..5 of one image are one range of the feature map; of two images, two."""
    import onnx

    inits: dict = {}
    nodes = [conv("a", "x", 3, 8, inits),
             helper.make_node("Slice", ["a", "starts", "ends", "axes"], ["part"]),
             helper.make_node("Slice", ["a", "starts", "ends", "axes", "steps"], ["every_other"]),
             helper.make_node("Relu", ["part"], ["y"]), helper.make_node("Relu", ["every_other"], ["z"])]
    model = graph_model(nodes, [("x", [batch, 3, 5, 4])], ["y", "z"], inits)
    consts = {"starts": np.array([2], np.int64), "ends": np.array([6], np.int64), "axes": np.array([1], np.int64),
              "steps": np.array([2], np.int64)}
    model.graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in consts.items())
    x = rng.standard_normal((batch, 3, 5, 4)).astype(np.float32)
    check_model(model, {"x": x}, backends=["numpy"], rtol=1e-4, atol=1e-5)
    session = numpy_session(model)
    session.run(None, {"x": x})
    assert session.report()["views"] == views and idle(session) == views  # never the step-2 slice
