import numpy as np
import pytest
from helpers import Const, check_op, make_model, run_wgnn

import wgnn

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)  # batch 2, C = 5: not a multiple of 4
POSITIVE = np.abs(X) + 0.1  # ReduceLogSum needs a positive sum
TOL = {"rtol": 1e-4, "atol": 1e-5}

KINDS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES_INPUT_SINCE = {op: 13 if op == "ReduceSum" else 18 for op in KINDS}


def data_for(op):
    return POSITIVE if op == "ReduceLogSum" else X


def axes_form(op, opset, axes):
    """Inputs and attributes of a reduction in the form its opset uses."""
    if opset >= AXES_INPUT_SINCE[op]:
        return [None if axes is None else Const(np.array(axes, np.int64))], {}
    return [], ({} if axes is None else {"axes": axes})


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", KINDS)
def test_reduce_axes(op, keepdims):
    for axes in ([1], [-1, 1], [0, 2, 3], [0, 1, 2, 3], None):
        extra, attrs = axes_form(op, 18, axes)
        check_op(op, [data_for(op)] + extra, {"keepdims": keepdims, **attrs}, opset=18, **TOL)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", KINDS)
def test_reduce_older_opsets(op, opset):
    for axes in ([2], [-3, 3], None):
        extra, attrs = axes_form(op, opset, axes)
        check_op(op, [data_for(op)] + extra, {"keepdims": 0, **attrs}, opset=opset, **TOL)


@pytest.mark.parametrize("op", KINDS)
def test_reduce_empty_axes(op):
    x = data_for(op)
    # No axes: reduce everything, or nothing with noop_with_empty_axes=1 (composite kinds still
    # apply their element-wise part: ReduceL2 gives |x|, ReduceLogSum gives log x).
    opset = AXES_INPUT_SINCE[op]
    for axes in (None, Const(np.zeros(0, np.int64))):
        check_op(op, [x, axes], {"noop_with_empty_axes": 0}, opset=opset, **TOL)
        check_op(op, [x, axes], {"noop_with_empty_axes": 1, "keepdims": 0}, opset=opset, **TOL)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceL2", "ReduceSumSquare"])
def test_reduce_int64(op):
    x = rng.integers(-6, 7, (3, 5, 2)).astype(np.int64)
    extra, attrs = axes_form(op, 18, [1])
    out = check_op(op, [x] + extra, attrs, opset=18)[0]
    assert out.dtype == np.int64
    check_op(op, [x, None], {"keepdims": 0}, opset=18)


@pytest.mark.parametrize("op", KINDS)
def test_reduce_over_empty_axis(op):
    # Reducing a length-0 axis gives each kind's identity: 0, 1, -inf, +inf, ...
    x = np.zeros((2, 0, 3), np.float32)
    extra, attrs = axes_form(op, 18, [1])
    if op == "ReduceMean":  # the mean of nothing is NaN (0/0): compare without onnx.reference's warning
        out = run_wgnn(make_model(op, [x] + extra, attrs, opset=18), {"in0": x})[0]
        assert out.shape == (2, 1, 3) and np.isnan(out).all()
        return
    check_op(op, [x] + extra, attrs, opset=18)
    if op in ("ReduceMax", "ReduceMin"):
        check_op(op, [np.zeros((0, 4), np.int64)] + extra, {"keepdims": 0, **attrs}, opset=18)


def test_reduce_log_sum_exp_large_values():
    x = (rng.standard_normal((2, 3, 5)) * 10 + 500).astype(np.float32)  # exp(500) overflows float32
    check_op("ReduceLogSumExp", [x, Const(np.array([2], np.int64))], opset=18, **TOL)
    check_op("ReduceLogSumExp", [-x, Const(np.array([0, 2], np.int64))], opset=18, **TOL)


def test_reduce_axes_must_be_constant():
    model = make_model("ReduceSum", [X, np.array([1], np.int64)], opset=13)
    with pytest.raises(wgnn.ConversionError, match="axes"):
        wgnn.convert(model)


def test_reduce_bad_axes():
    with pytest.raises(wgnn.ShapeError, match="out of range"):
        run_wgnn(make_model("ReduceMax", [X, Const(np.array([4], np.int64))], opset=18), {"in0": X})
    with pytest.raises(wgnn.ShapeError, match="twice"):
        run_wgnn(make_model("ReduceMax", [X, Const(np.array([1, -3], np.int64))], opset=18), {"in0": X})


TIES = np.array([[[3, 1, 3, 0], [2, 2, 1, 2], [0, 5, 5, 5]],
                 [[1, 1, 1, 1], [4, 0, 4, 0], [7, 7, 6, 7]]], np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_reduce_ties(op, select_last_index, keepdims):
    for axis in (0, 1, 2, -1):
        attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
        out = check_op(op, [TIES], attrs, opset=13)[0]
        assert out.dtype == np.int64


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce_forms(op):
    check_op(op, [X], opset=11)  # axis 0, keepdims 1 by default; no select_last_index before 12
    check_op(op, [X], {"axis": -3, "keepdims": 0}, opset=11)
    check_op(op, [rng.integers(0, 3, (4, 6)).astype(np.int64)], {"axis": 1, "select_last_index": 1}, opset=12)
    check_op(op, [np.array([2.0, 9.0, 9.0], np.float32)], {"keepdims": 0}, opset=13)
