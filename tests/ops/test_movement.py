"""Data-movement ops (all lowered to Raster regions, Gather also with its numpy kernel) against
onnx.reference, or onnxruntime where the reference lacks a form (negative pads, old opsets)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import numpy as np
import pytest
from helpers import Const, assert_close, check_op, make_model, reference_outputs, run_wgnn
from onnx import TensorProto, helper

import wgnn

rng = np.random.default_rng(1)
INT_MAX, INT_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def rand(*shape, dtype=np.float32):
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def ints(*values):
    return Const(np.array(values, np.int64))


def check_ort(op_type, inputs, attrs=None, *, opset=18, outputs=1):
    """check_op against onnxruntime; the graph outputs are left untyped so that ORT infers them."""
    model = make_model(op_type, inputs, attrs, opset=opset, outputs=outputs)
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(f"out{i}") for i in range(outputs))
    feeds = {f"in{i}": np.asarray(x) for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    expected = reference_outputs(model, feeds, "ort")
    got = run_wgnn(model, feeds)
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert_close(a, b, rtol=0, atol=0, what=f"{op_type} output {i}")
    return got


def run_only(op_type, inputs, attrs=None, *, opset=18, outputs=1):
    """wgnn alone (for inputs the reference rejects)."""
    feeds = {f"in{i}": np.asarray(x) for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    return run_wgnn(make_model(op_type, inputs, attrs, opset=opset, outputs=outputs), feeds)


# ------------------------------------------------------------------ Reshape / Flatten / Squeeze
@pytest.mark.parametrize("opset", [5, 13, 14, 19, 21])
def test_reshape_opsets(opset):
    check_op("Reshape", [rand(2, 5, 3, 1), ints(0, -1, 3)], opset=opset)
    check_op("Reshape", [rand(7), ints(7, 1, 1, 1, 1)], opset=opset)  # rank 1 -> 5
    check_op("Reshape", [rand(2, 3, 4, 5, 1).astype(np.int64), ints(-1)], opset=opset)


def test_reshape_allowzero_and_empty():
    check_op("Reshape", [rand(0, 3), ints(3, 0)], {"allowzero": 1}, opset=14)
    check_op("Reshape", [rand(0, 3), ints(3, -1)], opset=14)
    check_op("Reshape", [rand(2, 3, 4) > 0, ints(0, 0, 2, 2)], {"allowzero": 0}, opset=14)


def test_reshape_1_attribute():
    check_ort("Reshape", [rand(2, 6)], {"shape": [3, 4]}, opset=4)


def test_reshape_errors():
    with pytest.raises(wgnn.ShapeError, match="cannot reshape"):
        run_only("Reshape", [rand(2, 5), ints(3, 3)])
    with pytest.raises(wgnn.ShapeError, match="more than one -1"):
        run_only("Reshape", [rand(2, 5), ints(-1, -1)])


@pytest.mark.parametrize("axis", [0, 1, 3, 4, -1, -4])
def test_flatten(axis):
    check_op("Flatten", [rand(2, 5, 1, 3)], {"axis": axis}, opset=13)


def test_flatten_opsets():
    check_op("Flatten", [rand(2, 5, 3)], opset=9)
    check_op("Flatten", [rand(2, 5, 3).astype(np.int64)], {"axis": -2}, opset=21)
    check_ort("Flatten", [rand(0, 5, 3)], {"axis": 2}, opset=11)  # onnx.reference cannot reshape empty


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_squeeze_unsqueeze(opset):
    x = rand(1, 5, 1, 3, 1)

    def axes(*a):
        return {"axes": list(a)} if opset < 13 else ints(*a)

    for a in [(0,), (-1, 2), (0, 2, 4)]:
        spec = axes(*a)
        if opset < 13:
            check_op("Squeeze", [x], spec, opset=opset)
        else:
            check_op("Squeeze", [x, spec], opset=opset)
    check_op("Squeeze", [x], opset=opset)  # every size-1 axis
    for a in [(0,), (-1,), (0, 3), (-1, 1), (1, 3, 4)]:
        spec = axes(*a)
        y = rand(5, 3).astype(np.int64)
        if opset < 13:
            check_op("Unsqueeze", [y], spec, opset=opset)
        else:
            check_op("Unsqueeze", [y, spec], opset=opset)


def test_unsqueeze_scalar_and_bool():
    check_op("Unsqueeze", [np.array(3.5, np.float32), ints(0, 1)], opset=13)
    check_op("Squeeze", [rand(1, 1, 1, dtype=np.bool_), ints(0, 1, 2)], opset=13)


def test_squeeze_errors():
    with pytest.raises(wgnn.ShapeError, match="not 1"):
        run_only("Squeeze", [rand(2, 1), ints(0)], opset=13)


# ---------------------------------------------------------------------------------- Transpose
@pytest.mark.parametrize("shape,perm", [
    ((7,), [0]), ((3, 5), None), ((2, 5, 3), [1, 0, 2]), ((2, 5, 3, 7), [0, 2, 3, 1]),
    ((2, 1, 5, 3, 2), [4, 2, 0, 3, 1]), ((0, 3, 2), [2, 0, 1]),
])
def test_transpose(shape, perm):
    attrs = {"perm": perm} if perm is not None else {}
    check_op("Transpose", [rand(*shape)], attrs, opset=13)
    check_op("Transpose", [rand(*shape, dtype=np.int64)], attrs, opset=21)
    check_op("Transpose", [rand(*shape, dtype=np.bool_)], attrs, opset=1)


# ------------------------------------------------------------------------------------ Concat
@pytest.mark.parametrize("opset", [4, 11, 13])
def test_concat(opset):
    check_op("Concat", [rand(2, 5, 3), rand(2, 1, 3), rand(2, 0, 3)], {"axis": 1}, opset=opset)
    check_op("Concat", [rand(2, 5, 3), rand(2, 5, 4)], {"axis": -1}, opset=opset)
    check_op("Concat", [rand(3, dtype=np.int64), rand(0, dtype=np.int64), rand(1, dtype=np.int64)], {"axis": 0},
             opset=opset)
    check_op("Concat", [rand(1, 2, 3, 1, 2, dtype=np.bool_), rand(2, 2, 3, 1, 2, dtype=np.bool_)], {"axis": -5},
             opset=opset)


def test_concat_single_and_repeated_input():
    x = rand(2, 3)
    check_op("Concat", [x], {"axis": 0})
    model = make_model("Concat", [x], {"axis": 0})
    model.graph.node[0].input.extend(["in0", "in0"])  # the same tensor three times
    got = run_wgnn(model, {"in0": x})[0]
    np.testing.assert_array_equal(got, np.concatenate([x, x, x]))


# ------------------------------------------------------------------------------------- Slice
def test_slice_1_attributes():
    x = rand(4, 5, 6)
    check_op("Slice", [x], {"starts": [1, 0], "ends": [3, -1]}, opset=1)
    check_op("Slice", [x], {"starts": [-2, 1], "ends": [INT_MAX, 100], "axes": [2, 0]}, opset=9)


@pytest.mark.parametrize("opset", [10, 13])
def test_slice_inputs(opset):
    x = rand(4, 5, 6, 3)
    check_op("Slice", [x, ints(1, 0), ints(3, -1)], opset=opset)
    check_op("Slice", [x, ints(-1, 10), ints(-100, 0), ints(2, 1), ints(-2, -1)], opset=opset)  # negative steps
    check_op("Slice", [x, ints(INT_MAX, -1), ints(INT_MIN, INT_MIN), ints(0, -1), ints(-1, -1)], opset=opset)
    check_op("Slice", [x, ints(0, 2), ints(INT_MAX, INT_MAX), ints(-1, 1), ints(2, 3)], opset=opset)
    check_op("Slice", [x, ints(3), ints(1), ints(1)], opset=opset)  # empty
    check_op("Slice", [x, ints(-100), ints(100), ints(3)], opset=opset)  # clamped to the whole axis
    int32 = [Const(np.array(v, np.int32)) for v in ([1], [4], [2], [2])]
    check_op("Slice", [x.astype(np.int64), *int32], opset=opset)


def test_slice_rank5_bool_and_empty_input():
    check_op("Slice", [rand(2, 1, 5, 3, 4, dtype=np.bool_), ints(0, -2, 1), ints(1, 0, 4), ints(0, 2, -1),
                       ints(1, -1, 2)])
    check_op("Slice", [rand(0, 5), ints(1), ints(4), ints(1)])


def test_slice_errors():
    with pytest.raises(wgnn.ShapeError, match="contain 0"):
        run_only("Slice", [rand(4), ints(0), ints(4), ints(0), ints(0)])


# ------------------------------------------------------------------------------------- Split
def test_split_attribute_forms():
    x = rand(2, 7, 3)
    check_op("Split", [x], {"axis": 1, "split": [2, 4, 1]}, outputs=3, opset=2)
    check_op("Split", [x], {"axis": -2, "split": [3, 0, 4]}, outputs=3, opset=11)
    check_op("Split", [rand(6, 2, dtype=np.int64)], outputs=3, opset=11)  # equal parts


def test_split_input_forms():
    x = rand(2, 7, 5)
    check_op("Split", [x, ints(1, 4)], {"axis": -1}, outputs=2, opset=13)
    check_op("Split", [x[:, :6], None], {"axis": 1}, outputs=2, opset=13)
    check_op("Split", [x], {"axis": 1, "num_outputs": 3}, outputs=3, opset=18)  # 3, 3, 1
    check_op("Split", [rand(2, 5, dtype=np.bool_)], {"axis": 1, "num_outputs": 2}, outputs=2, opset=18)


# --------------------------------------------------------------------------------------- Pad
def test_pad_2_attributes():
    x = rand(2, 5, 3)
    check_op("Pad", [x], {"pads": [0, 1, 2, 1, 0, 1], "value": 1.5}, opset=2)
    check_op("Pad", [x], {"pads": [0, 2, 2, 1, 0, 1], "mode": "reflect"}, opset=2)
    check_op("Pad", [x], {"pads": [1, 0, 0, 0, 3, 2], "mode": "edge"}, opset=2)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_inputs(mode):
    x = rand(2, 5, 4, 7)
    check_op("Pad", [x, ints(0, 0, 2, 3, 1, 0, 1, 2)], {"mode": mode}, opset=11)
    check_op("Pad", [x, ints(1, 2, 3, 2), None, ints(-1, 1)], {"mode": mode}, opset=18)
    check_op("Pad", [x[0, 0], ints(3, 1, 2, 4)], {"mode": mode}, opset=13)  # corners of a 2-D map
    check_op("Pad", [rand(6, dtype=np.int64), ints(2, 3)], {"mode": mode}, opset=13)


def test_pad_constant_values():
    x = rand(2, 3, 4)
    check_op("Pad", [x, ints(1, 0, 2, 0, 2, 1), Const(np.float32(-2.5))], opset=11)
    check_op("Pad", [rand(3, 4, dtype=np.int64), ints(1, 2, 0, 1), Const(np.array(7, np.int64))], opset=13)
    check_op("Pad", [rand(3, 4, dtype=np.bool_), ints(1, 1, 1, 1), Const(np.array(True))], opset=13)
    check_op("Pad", [x, ints(1, 0, 0, 0, 0, 1), np.float32(3.25)], opset=11)  # value fed at run time
    check_op("Pad", [rand(0, 3), ints(1, 1, 2, 0)], opset=11)  # empty input


def test_pad_wrap_and_large_reflect():
    x = rand(2, 3, 4)
    check_op("Pad", [x, ints(0, 2, 3, 0, 4, 1)], {"mode": "wrap"}, opset=19)
    check_op("Pad", [x, ints(0, 7, 5, 0, 6, 9)], {"mode": "wrap"}, opset=19)  # wraps more than once
    check_op("Pad", [x, ints(0, 5, 4, 0, 6, 7)], {"mode": "reflect"}, opset=18)  # reflects more than once


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_negative_crops(mode):
    # onnx.reference uses np.pad, which rejects negative pads: onnxruntime is the reference here.
    check_ort("Pad", [rand(2, 6, 5), ints(0, -1, 2, 0, 3, -2)], {"mode": mode}, opset=19)


# ------------------------------------------------------------------------------- Expand/Tile
@pytest.mark.parametrize("opset", [8, 13])
def test_expand(opset):
    check_op("Expand", [rand(2, 1, 4), ints(2, 1, 1, 5, 1)], opset=opset)
    check_op("Expand", [rand(3, 1), ints(2, 1, 6)], opset=opset)
    check_op("Expand", [rand(2, 1, 5), ints(3, 1)], opset=opset)  # shape of lower rank: two-way
    check_op("Expand", [rand(1, dtype=np.int64), ints(0, 3)], opset=opset)
    check_op("Expand", [rand(4, 1, dtype=np.bool_), ints(4, 3)], opset=opset)
    check_op("Expand", [np.array(2.0, np.float32), ints(2, 3)], opset=opset)


@pytest.mark.parametrize("shape,repeats", [
    ((5,), (3,)), ((2, 3), (2, 1)), ((2, 1, 3), (1, 4, 2)), ((1, 5, 3, 2), (2, 1, 1, 3)), ((2, 3), (0, 2)),
    ((1, 2, 1, 2, 1), (2, 1, 3, 1, 2)),
])
def test_tile(shape, repeats):
    check_op("Tile", [rand(*shape), ints(*repeats)], opset=13)
    check_op("Tile", [rand(*shape, dtype=np.int64), ints(*repeats)], opset=6)


# ------------------------------------------------------------------- DepthToSpace/SpaceToDepth
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", [((2, 8, 3, 5), 2), ((1, 18, 2, 1), 3), ((3, 4, 1, 1), 2)])
def test_depth_to_space(mode, shape, b):
    check_op("DepthToSpace", [rand(*shape)], {"blocksize": b, "mode": mode}, opset=13)


def test_depth_to_space_opset1_and_int():
    check_op("DepthToSpace", [rand(2, 12, 3, 2)], {"blocksize": 2}, opset=1)
    check_op("DepthToSpace", [rand(2, 8, 3, 2, dtype=np.int64)], {"blocksize": 2, "mode": "CRD"}, opset=11)


@pytest.mark.parametrize("shape,b", [((2, 3, 4, 6), 2), ((1, 5, 6, 3), 3), ((2, 1, 2, 2), 2)])
def test_space_to_depth(shape, b):
    check_op("SpaceToDepth", [rand(*shape)], {"blocksize": b}, opset=13)
    check_op("SpaceToDepth", [rand(*shape, dtype=np.int64)], {"blocksize": b}, opset=1)


def test_depth_space_errors():
    with pytest.raises(wgnn.ShapeError, match="multiple"):
        run_only("DepthToSpace", [rand(1, 6, 2, 2)], {"blocksize": 2})


# ------------------------------------------------------------------------------------ Gather
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_constant_indices(axis):
    x = rand(3, 5, 7)
    check_op("Gather", [x, ints(0, -1, 2)], {"axis": axis}, opset=13)
    check_op("Gather", [x, Const(np.array([[1, 0], [-2, 2]], np.int32))], {"axis": axis}, opset=11)
    check_op("Gather", [x, Const(np.array(-1, np.int64))], {"axis": axis}, opset=13)  # scalar: rank - 1
    check_op("Gather", [x.astype(np.int64), Const(np.zeros((0,), np.int64))], {"axis": axis}, opset=13)


def test_gather_runtime_and_many_indices():
    x = rand(6, 5, 4)
    check_op("Gather", [x, np.array([[5, -6], [0, 3]], np.int64)], {"axis": 0}, opset=13)
    check_op("Gather", [x > 0, np.array([1, -1, 0], np.int32)], {"axis": -2}, opset=13)
    many = Const(rng.integers(-4, 4, (10, 9)).astype(np.int64))  # 90 indices: numpy kernel
    check_op("Gather", [x, many], {"axis": 2}, opset=13)
    check_op("Gather", [rand(7), Const(np.array(3, np.int64))], opset=1)
    # Embedding lookups: rows of whole vec4s move a vec4 at a time (int64 tables too, 32-bit on the GPU).
    table = rand(11, 2, 8)
    check_op("Gather", [table, rng.integers(-11, 11, (3, 5)).astype(np.int64)], {"axis": 0}, opset=13)
    check_op("Gather", [table.astype(np.int64), np.array([2, -1], np.int64)], {"axis": 0}, opset=13)


def test_gather_out_of_range():
    with pytest.raises(wgnn.ShapeError, match="out of range"):
        run_only("Gather", [rand(3, 4), ints(3)])
    model = make_model("Gather", [rand(3, 4), np.array([0, 0], np.int64)])
    with pytest.raises(wgnn.InputError, match=r"indices must lie in \[-3, 3\) for axis 0, got values from 0 to 7"):
        run_wgnn(model, {"in0": rand(3, 4), "in1": np.array([0, 7], np.int64)})
    with pytest.raises(wgnn.InputError, match=r"got values from -4 to 2"):  # past the negative end
        run_wgnn(model, {"in0": rand(3, 4), "in1": np.array([2, -4], np.int64)})


# ---------------------------------------------------------------------------- Identity/Dropout
def test_identity_and_dropout():
    x = rand(2, 5, 3)
    check_op("Identity", [x], opset=13)
    check_op("Identity", [x.astype(np.int64)], opset=21)
    check_op("Dropout", [x], {"ratio": 0.3}, opset=10)
    check_op("Dropout", [x], outputs=2, opset=12)  # mask: all true, bool
    check_op("Dropout", [x, Const(np.float32(0.5)), Const(np.array(False))], outputs=2, opset=13)
    # Before opset 10 the mask has the input's type. onnx.reference returns bool and onnxruntime
    # zeros; the spec's inference mask keeps every element: ones.
    out, mask = run_only("Dropout", [x], outputs=2, opset=7)
    np.testing.assert_array_equal(out, x)
    assert mask.dtype == np.float32 and mask.shape == x.shape and np.all(mask == 1)


def test_dropout_training_mode_fails():
    with pytest.raises(wgnn.ConversionError, match="training_mode"):
        wgnn.convert(make_model("Dropout", [rand(2, 3), Const(np.float32(0.5)), Const(np.array(True))],
                                opset=13))


# --------------------------------------------------------- shape-like inputs computed at resize
def test_shape_inputs_known_at_resize():
    """Reshape / Expand / Tile / Slice / Pad / ConstantOfShape / Unsqueeze / Squeeze operands from Shape of
    inputs with symbolic dims: the session folds them at resize, for every new input shape."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),  # [n, 6]
        helper.make_node("Shape", ["y"], ["sy"]),  # [1, m]
        helper.make_node("Shape", ["y"], ["m"], start=-1),  # [m]
        helper.make_node("Slice", ["sx", "zero", "one"], ["n"]),
        helper.make_node("Slice", ["sx", "one", "two"], ["six"]),
        helper.make_node("Concat", ["six", "n"], ["flipped"], axis=0),
        helper.make_node("Reshape", ["x", "flipped"], ["r0"]),  # (6, n): reshaping to Shape(x) would be no step
        helper.make_node("Transpose", ["r0"], ["r"]),
        helper.make_node("Concat", ["n", "one"], ["n1"], axis=0),
        helper.make_node("Expand", ["y", "n1"], ["e"]),  # (n, m)
        helper.make_node("Tile", ["y", "sx"], ["t"]),  # (n, 6m)
        helper.make_node("Slice", ["x", "zero", "m"], ["s"]),  # x[:m]
        helper.make_node("Concat", ["zero", "m", "zero", "m"], ["pads"], axis=0),
        helper.make_node("Pad", ["y", "pads"], ["p"], mode="reflect"),  # (1, 3m): reflect needs m > 1
        helper.make_node("ConstantOfShape", ["sy"], ["c"]),
        helper.make_node("Shape", ["y"], ["axes"], end=1),  # [1]: Unsqueeze/Squeeze axes at resize
        helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),  # (n, 1, 6)
        helper.make_node("Squeeze", ["u", "axes"], ["q"]),
    ]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("two", TensorProto.INT64, [1], [2])]
    graph = helper.make_graph(nodes, "dynamic", [vi("x", TensorProto.FLOAT, ["n", 6]),
                                                 vi("y", TensorProto.FLOAT, [1, "m"])],
                              [vi(name, TensorProto.FLOAT, None) for name in "retspcuq"], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    session = wgnn.InferenceSession(model.SerializeToString())
    from onnx.reference import ReferenceEvaluator

    reference = ReferenceEvaluator(model)
    for n, m in ((5, 4), (7, 3)):
        feeds = {"x": rand(n, 6), "y": rand(1, m)}
        for got, want, name in zip(session.run(None, feeds), reference.run(None, feeds), "retspcuq", strict=True):
            assert_close(got, np.asarray(want), rtol=0, atol=0, what=name)
        steps = session.session.steps
        assert not any(s.op.op_type == "Shape" for s in steps)
        assert {s.node.attrs.get("source_op") for s in steps} >= {"Reshape", "Expand", "Tile", "Slice", "Pad",
                                                                    "Unsqueeze", "Squeeze"}


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes_opset_28(mode):
    check_op("SpaceToDepth", [rand(2, 3, 4, 6)], {"blocksize": 2, "mode": mode}, opset=28)
