"""Shape, Size, ConstantOfShape, Range, Cast / CastLike and Constant against onnx.reference."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import numpy as np
import pytest
from helpers import Const, check_op, make_model, run_wgnn
from onnx import TensorProto, helper, numpy_helper

import wgnn

rng = np.random.default_rng(2)
X = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)


@pytest.mark.parametrize("opset", [1, 13, 19, 21])
def test_shape_and_size(opset):
    check_op("Shape", [X], opset=opset)
    check_op("Size", [X.astype(np.int64)], opset=opset)
    check_op("Shape", [np.zeros((0, 3), np.bool_)], opset=opset)
    check_op("Size", [np.zeros((0, 3), np.float32)], opset=opset)
    check_op("Shape", [np.float32(1.0)], opset=opset)  # scalar: empty shape


@pytest.mark.parametrize("start,end", [(1, None), (-2, None), (0, -1), (1, 3), (-10, 10), (3, 1), (5, 6)])
def test_shape_start_end(start, end):
    attrs = {"start": start} | ({"end": end} if end is not None else {})
    check_op("Shape", [X], attrs, opset=15)


@pytest.mark.parametrize("opset", [9, 20, 21])
def test_constant_of_shape(opset):
    check_op("ConstantOfShape", [Const(np.array([2, 5, 3], np.int64))], opset=opset)  # float32 zeros
    check_op("ConstantOfShape", [Const(np.array([4, 1], np.int64))],
             {"value": numpy_helper.from_array(np.array([7], np.int64))}, opset=opset)
    check_op("ConstantOfShape", [Const(np.array([3], np.int64))],
             {"value": numpy_helper.from_array(np.array([True]))}, opset=opset)
    check_op("ConstantOfShape", [Const(np.array([2, 0], np.int64))],
             {"value": numpy_helper.from_array(np.array([1.5], np.float32))}, opset=opset)
    check_op("ConstantOfShape", [Const(np.zeros(0, np.int64))],
             {"value": numpy_helper.from_array(np.array([-2.5], np.float64))}, opset=opset)  # scalar


def test_constant_of_shape_fed_at_run_time():
    # The shape is data: a sync point plans the op once its value is known, for each new value.
    check_op("ConstantOfShape", [np.array([2, 3], np.int64)])
    check_op("ConstantOfShape", [np.array([4, 1, 2], np.int64)], {"value": np.array([7], np.int32)})


@pytest.mark.parametrize("start,limit,delta", [
    (0, 10, 3), (10, -3, -3), (5, 5, 1), (5, 1, 2), (-7, 9, 4),
])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_range_int(start, limit, delta, dtype):
    check_op("Range", [Const(dtype(start)), Const(dtype(limit)), Const(dtype(delta))], opset=11)


@pytest.mark.parametrize("start,limit,delta", [(0.5, 3.2, 0.7), (1.0, -2.0, -0.25), (2.0, 2.5, -1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_range_float(start, limit, delta, dtype):
    check_op("Range", [Const(dtype(start)), Const(dtype(limit)), Const(dtype(delta))], opset=11)


def test_range_errors():
    with pytest.raises(wgnn.ShapeError, match="delta"):
        run_wgnn(make_model("Range", [Const(np.int64(0)), Const(np.int64(3)), Const(np.int64(0))]), {})


VALUES = np.array([-2.7, -1.5, -0.5, -0.0, 0.0, 0.4, 1.5, 2.5, 3.9, 100.2], np.float32)
CASTS = [
    (VALUES, TensorProto.INT32), (VALUES, TensorProto.INT64), (VALUES, TensorProto.INT8),
    (VALUES, TensorProto.BOOL), (VALUES, TensorProto.DOUBLE), (VALUES, TensorProto.FLOAT16),
    (np.abs(VALUES), TensorProto.UINT8), (VALUES > 0, TensorProto.FLOAT), (VALUES > 0, TensorProto.INT64),
    (np.array([-3, 0, 7, 2**31 - 1], np.int64), TensorProto.INT32), (np.array([-3, 0, 7], np.int64), TensorProto.FLOAT),
    (np.array([0, 2, -1], np.int32), TensorProto.BOOL), (VALUES.astype(np.float16), TensorProto.FLOAT),
]


@pytest.mark.parametrize("x,to", CASTS)
@pytest.mark.parametrize("opset", [6, 13, 19, 21])
def test_cast(x, to, opset):
    check_op("Cast", [x], {"to": to}, opset=opset)


def test_cast_int64_past_int32_wraps():
    # The GPU keeps int64 as int32 and refuses such feeds by design: numpy only.
    check_op("Cast", [np.array([-3, 2**40 + 5, -(2**33)], np.int64)], {"to": TensorProto.INT32}, opset=13,
             backends=["numpy"])


def test_cast_saturate_and_shapes():
    check_op("Cast", [X], {"to": TensorProto.INT64, "saturate": 1}, opset=19)
    check_op("Cast", [np.zeros((2, 0, 3), np.float32)], {"to": TensorProto.INT32}, opset=13)
    check_op("Cast", [np.float32(-3.7)], {"to": TensorProto.INT64}, opset=13)


def test_cast_like():
    check_op("CastLike", [X, Const(np.zeros(1, np.int32))], opset=15)
    check_op("CastLike", [X > 0, np.zeros((2,), np.float64)], opset=19)


def test_cast_errors():
    with pytest.raises(wgnn.ConversionError, match="cannot cast"):
        wgnn.convert(make_model("Cast", [X], {"to": TensorProto.STRING}, opset=13))


def _constant_model(**attrs):
    node = helper.make_node("Constant", [], ["out0"], **attrs)
    output = helper.make_tensor_value_info("out0", TensorProto.UNDEFINED, None)
    graph = helper.make_graph([node], "constant", [], [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("attrs,expected", [
    ({"value": numpy_helper.from_array(np.array([[1.5, 2]], np.float32))}, np.array([[1.5, 2]], np.float32)),
    ({"value": numpy_helper.from_array(np.array([3, 4], np.int64))}, np.array([3, 4], np.int64)),
    ({"value_float": 2.5}, np.array(2.5, np.float32)),
    ({"value_floats": [1.0, -2.0]}, np.array([1.0, -2.0], np.float32)),
    ({"value_int": 7}, np.array(7, np.int64)),
    ({"value_ints": [1, 2, 3]}, np.array([1, 2, 3], np.int64)),
])
def test_constant(attrs, expected):
    model = _constant_model(**attrs)
    converted = wgnn.convert(model)
    assert not converted.graph.nodes  # a Constant node becomes an initializer
    from onnx.reference import ReferenceEvaluator

    got = run_wgnn(model, {})[0]
    want = np.asarray(ReferenceEvaluator(model).run(None, {})[0])
    assert got.dtype == want.dtype == expected.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, expected)


def test_constant_feeds_a_node():
    # Constant -> Reshape target: after conversion the shape is an initializer and Reshape folds in.
    nodes = [helper.make_node("Constant", [], ["shape"], value_ints=[3, -1]),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = X.reshape(-1)[:6].reshape(2, 3)
    np.testing.assert_array_equal(run_wgnn(model, {"x": x})[0], x.reshape(3, 2))


def test_constant_string_fails():
    with pytest.raises(wgnn.ConversionError, match="value_string"):
        wgnn.convert(_constant_model(value_string="hello"))


def test_cast_1_type_names():
    # Cast-1 names the type as a string; neither reference runs opset 1 Cast, so compare with numpy.
    got = run_wgnn(make_model("Cast", [VALUES], {"to": "INT32"}, opset=1), {"in0": VALUES})[0]
    np.testing.assert_array_equal(got, VALUES.astype(np.int32))
