"""Dynamic-shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write
them): folded away at conversion when shapes are static, evaluated at resize when they are not."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import wgnn

SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Concat", "Squeeze", "Cast"}


def attention_split_model(batch, seq, hidden=8, heads=2, opset=13) -> bytes:
    """x (batch, seq, hidden) -> reshape to (batch, seq, heads, hidden/heads) with the target built
    from Shape(x) at run time -> transpose to (batch, heads, seq, hidden/heads) -> flatten the
    last two dims with a second computed target (batch, heads, -1)."""
    const = helper.make_tensor

    def unsqueeze(src, dst):  # axes: an attribute before opset 13, an input from 13 on
        if opset < 13:
            return helper.make_node("Unsqueeze", [src], [dst], axes=[0])
        return helper.make_node("Unsqueeze", [src, "axes0"], [dst])

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["seq"], axis=0),
        unsqueeze("batch", "batch1"),
        unsqueeze("seq", "seq1"),
        helper.make_node("Concat", ["batch1", "seq1", "heads", "head_dim"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["split"]),
        helper.make_node("Transpose", ["split"], ["heads_first"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["batch1", "heads", "minus1"], ["target2"], axis=0),
        helper.make_node("Reshape", ["heads_first", "target2"], ["y"]),
    ]
    inits = [const("i0", TensorProto.INT64, [], [0]), const("i1", TensorProto.INT64, [], [1]),
             const("heads", TensorProto.INT64, [1], [heads]),
             const("head_dim", TensorProto.INT64, [1], [hidden // heads]),
             const("minus1", TensorProto.INT64, [1], [-1])]
    if opset >= 13:
        inits.append(const("axes0", TensorProto.INT64, [1], [0]))
    graph = helper.make_graph(
        nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def test_static_shapes_fold_away_at_conversion():
    converted = wgnn.convert(attention_split_model(2, 5))
    ops = [node.op_type for node in converted.graph.nodes]
    assert not SHAPE_OPS & set(ops), ops
    assert ops == ["Reshape", "Transpose", "Reshape"]
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    got = wgnn.InferenceSession(converted).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3).reshape(2, 2, -1))


@pytest.mark.parametrize("opset", [11, 13])
def test_dynamic_batch_and_sequence_fold_at_resize(opset):
    model = attention_split_model("batch", "seq", opset=opset)
    converted = wgnn.convert(model)
    assert "Shape" in {n.op_type for n in converted.graph.nodes}  # shapes unknown at conversion
    session = wgnn.InferenceSession(model)
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch, seq in ((2, 5), (3, 1), (1, 7)):
        x = rng.standard_normal((batch, seq, 8)).astype(np.float32)
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0])
        report = session.session.report()
        assert report["input_shapes"] == {"x": [batch, seq, 8]}
        assert report["folded_nodes"] > 0
        steps = session.session.steps
        assert not any(s.op.op_type == "Shape" for s in steps)
        assert [s.node.attrs.get("source_op") for s in steps] == ["Reshape", "Transpose", "Reshape"]
    assert session.session.resize_count == 3


@pytest.mark.parametrize("providers", [["numpy"], ["wgpu", "numpy"]])
def test_run_time_shape_input_is_a_sync_point(providers):
    # A Reshape target fed as data is only known at run time: the session runs up to the
    # Reshape, then plans the rest for the target it got (one plan per distinct target).
    if "wgpu" in providers and not wgnn.adapters():
        pytest.skip("no GPU adapter")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Reshape", ["r", "target"], ["y0"], name="reshape_node"),
         helper.make_node("Neg", ["y0"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("target", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = wgnn.InferenceSession(model.SerializeToString(), providers=providers)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    for target in ([3, 2], [6, 1], [3, 2], [1, 6]):
        y, r = session.run(None, {"x": x, "target": np.array(target, np.int64)})
        np.testing.assert_array_equal(y, -np.maximum(x, 0).reshape(target))
        np.testing.assert_array_equal(r, np.maximum(x, 0))
    (sync,) = session.session.report()["sync_points"]
    assert sync["node"] == "reshape_node" and "target" in sync["reason"]
    assert sync["plans_made"] == 3  # [3, 2] planned once and reused
    with pytest.raises(wgnn.ShapeError, match="reshape_node"):
        session.run(None, {"x": x, "target": np.array([4, 2], np.int64)})
