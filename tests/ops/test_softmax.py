import numpy as np
import pytest
from helpers import check_op, make_model, run_wgnn

import wgnn

rng = np.random.default_rng(0)
X3 = rng.standard_normal((2, 5, 7)).astype(np.float32)  # batch 2, C = 5
X4 = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
TOL = {"rtol": 1e-4, "atol": 1e-5}
OPS = ["Softmax", "LogSoftmax", "Hardmax"]


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (where onnx.reference is wrong or cannot run the case)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_opset13(op, axis):
    check_op(op, [X3], {"axis": axis}, opset=13, **TOL)
    check_op(op, [X4], {"axis": axis}, opset=13, **TOL)


@pytest.mark.parametrize("op", OPS)
def test_softmax_opset13_default_axis(op):
    check_op(op, [X4], opset=13, **TOL)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_softmax_legacy_flatten(op, axis):
    attrs = {} if axis is None else {"axis": axis}  # None: the old default, axis 1
    check_ort(op, [X3], attrs, opset=11)
    check_ort(op, [X4], attrs, opset=11)


def test_softmax_legacy_differs_from_opset13():
    # Guards the meaning of legacy_flatten: on 4-D with axis 1 the two forms disagree.
    old = run_wgnn(make_model("Softmax", [X4], {"axis": 1}, opset=11), {"in0": X4})[0]
    new = run_wgnn(make_model("Softmax", [X4], {"axis": 1}, opset=13), {"in0": X4})[0]
    np.testing.assert_allclose(old.reshape(2, -1).sum(axis=1), 1, rtol=1e-5)
    assert not np.allclose(old, new)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_large_values(op):
    # exp(1000) overflows: the implementation must subtract the maximum first.
    x = (X4 * 5 + 1000).astype(np.float32)
    check_op(op, [x], {"axis": -1}, opset=13, **TOL)
    check_op(op, [-x], {"axis": 1}, opset=13, **TOL)
    check_ort(op, [x], {"axis": 2}, opset=11)


def test_hardmax_ties():
    x = np.array([[[3, 1, 3], [2, 2, 2]], [[0, 5, 5], [1, 1, 0]]], np.float32)
    for axis in (0, 1, 2):
        check_op("Hardmax", [x], {"axis": axis}, opset=13)


def test_softmax_single_element_axis_and_float64():
    check_op("Softmax", [rng.standard_normal((3, 1, 4)).astype(np.float32)], {"axis": 1}, opset=13, **TOL)
    check_op("LogSoftmax", [X3.astype(np.float64)], {"axis": 1}, opset=13, rtol=1e-10, atol=1e-12)


def test_softmax_bad_axis():
    with pytest.raises(wgnn.ShapeError, match="out of range"):
        run_wgnn(make_model("Softmax", [X3], {"axis": 3}, opset=13), {"in0": X3})


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("length", [1, 7, 32, 33, 64])
def test_softmax_many_short_rows(monkeypatch, op, length):
    """Many rows along a short last axis: numpy's maximum comes through a transposed copy (32
    long or less) and the sums from a matrix-vector product, which must give the row-wise
    results, with rows of NaN, infinities and values past exp's range among them, in float32 and
    float64, against float64 formulas."""
    from wgnn.backends.numpy import softmax as numpy_softmax

    transposed = []
    real_max = numpy_softmax._max
    monkeypatch.setattr(numpy_softmax, "_max", lambda x, axis, scratch: transposed.append(
        scratch is not None and x.shape[-1] <= numpy_softmax.SHORT_ROW) or real_max(x, axis, scratch))
    x = rng.standard_normal((3, 40, length)) * 4
    x[0, 0, 0], x[0, 1, -1], x[1, 2, 0], x[2, 3] = np.nan, np.inf, -np.inf, 1e4
    x[2, 4] = -1e4
    for dtype in (np.float32, np.float64):
        xs = x.astype(dtype)
        got = run_wgnn(make_model(op, [xs], {"axis": -1}, opset=13), {"in0": xs})[0]
        wide = xs.astype(np.float64)
        with np.errstate(invalid="ignore"):
            shifted = wide - wide.max(axis=-1, keepdims=True)
            total = np.exp(shifted).sum(axis=-1, keepdims=True)
            want = shifted - np.log(total) if op == "LogSoftmax" else np.exp(shifted) / total
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6 if dtype ==
                                   np.float32 else 1e-13, equal_nan=True)
    assert transposed == [length <= 32] * 2
