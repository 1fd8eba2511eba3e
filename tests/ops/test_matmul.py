"""MatMul (numpy semantics: 1-D operands, broadcast batch axes) and Gemm (transposes, alpha/beta,
C broadcast, opsets 7..13)."""
import numpy as np
import pytest
from helpers import Const, check_op, make_model

import wgnn

rng = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("a, b", [
    ((5, 3), (3, 6)),
    ((3,), (3,)),  # -> scalar
    ((3,), (3, 4)),
    ((2, 5, 3), (3,)),
    ((3,), (2, 3, 4)),
    ((2, 1, 5, 3), (4, 3, 6)),  # broadcast batch axes
    ((1, 5, 3), (2, 3, 6)),
    ((7, 1), (1, 5)),  # K = 1
    ((2, 5, 0), (2, 0, 3)),  # K = 0 -> zeros
    ((0, 3), (3, 4)),  # empty rows
])
def test_matmul(a, b):
    check_op("MatMul", [r(*a), r(*b)], **TOL)


@pytest.mark.parametrize("a, b", [
    ((5, 3), (3, 6)),
    ((2, 7, 9), (9, 13)),  # weights: repacked once on the GPU (rows padded to 8 columns)
    ((4,), (4, 3)),
    ((3, 4), (4,)),
    ((2, 1, 3, 5), (2, 5, 4)),  # batched constant B, broadcast
])
def test_matmul_constant_b(a, b):
    check_op("MatMul", [r(*a), Const(r(*b))], **TOL)


def test_matmul_integers_and_opsets():
    a = rng.integers(-5, 5, (2, 3, 4)).astype(np.int32)
    b = rng.integers(-5, 5, (4, 5)).astype(np.int32)
    check_op("MatMul", [a, b], opset=13)
    check_op("MatMul", [a.astype(np.int64), b.astype(np.int64)], opset=9)
    check_op("MatMul", [r(4, 3), r(3, 2)], opset=1, **TOL)


@pytest.mark.parametrize("c_shape", [(), (1,), (6,), (5, 1), (1, 6), (5, 6), None])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("trans_a", [0, 1])
def test_gemm(trans_a, trans_b, c_shape):
    a = r(3, 5) if trans_a else r(5, 3)
    b = r(6, 3) if trans_b else r(3, 6)
    c = [] if c_shape is None else [r(*c_shape)]
    check_op("Gemm", [a, b, *c], {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0}, opset=13, **TOL)


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
def test_gemm_opsets(opset):
    check_op("Gemm", [r(4, 3), r(3, 5), r(5)], {"transA": 0, "alpha": 1.5}, opset=opset, **TOL)
    check_op("Gemm", [r(3, 4), r(5, 3), r(4, 1)], {"transA": 1, "transB": 1, "beta": 0.25}, opset=opset, **TOL)


def test_gemm_c_required_before_opset_11():
    """The ONNX checker refuses the model before the converter's own check would (either names Gemm)."""
    model = make_model("Gemm", [r(4, 3), r(3, 5)], opset=9)
    with pytest.raises((wgnn.ModelError, wgnn.ConversionError), match=r"Gemm.*(required before opset 11|input size 2)"):
        wgnn.convert(model)


def test_matmul_shape_error_and_flops():
    model = make_model("MatMul", [r(2, 5, 3), r(4, 6)])
    with pytest.raises(wgnn.ShapeError, match="inner dimensions differ"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 5, 3),
                                                                                        "in1": r(4, 6)})
    session = wgnn.InferenceSession(make_model("MatMul", [r(2, 5, 3), r(3, 6)]).SerializeToString(),
                                    providers=["numpy"])
    session.run(None, {"in0": r(2, 5, 3), "in1": r(3, 6)})
    assert session.report()["flops"] == 2 * (2 * 5 * 6) * 3
