"""MatMul (numpy semantics: 1-D operands, broadcast batch axes) and Gemm (transposes, alpha/beta,
C broadcast, opsets 7..13)."""
import numpy as np
import pytest
from helpers import Const, check_op, make_model, reference_outputs, session_for
from wgnn.backends.numpy import blas as numpy_blas

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


# (A shape, B shape, Gemm attributes or None for MatMul), products of 4 to 8 rows
SMALL_PRODUCT_CASES = [
    ((8, 40), (40, 50), None),
    ((2, 6, 24), (24, 45), None),  # batched A, one B
    ((2, 5, 24), (2, 24, 33), None),  # batched both
    ((6, 30), (45, 30), {"transB": 1, "alpha": 0.5}),  # Gemm: B read transposed, C broadcast
    ((30, 4), (30, 40), {"transA": 1}),
]


@pytest.mark.parametrize("a_shape, b_shape, gemm", SMALL_PRODUCT_CASES)
def test_matmul_small_products_in_column_bands(monkeypatch, a_shape, b_shape, gemm):
    """Where numpy's BLAS runs small products faster (blas.small_gemm_limit) on one OpenBLAS
    thread, a product of a few rows goes in bands of columns, each within the bound (here 16
    columns a band); the same results as the references'."""
    rows, depth = (a_shape[-1], a_shape[-2]) if gemm and gemm.get("transA") else a_shape[-2:]
    columns = b_shape[-2] if gemm and gemm.get("transB") else b_shape[-1]
    monkeypatch.setattr(numpy_blas, "SMALL_PRODUCT_COLUMNS", 1)
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: rows * depth * 16)
    inputs = [r(*a_shape), Const(r(*b_shape))] + ([Const(r(columns))] if gemm else [])
    model = make_model("Gemm" if gemm else "MatMul", inputs, gemm, opset=13)
    feeds = {"in0": inputs[0]}
    (expected,) = reference_outputs(model, feeds)

    def prepared(threads):
        monkeypatch.setattr(numpy_blas, "openblas_threads", lambda: threads)
        session = session_for(wgnn.convert(model), "numpy")
        (result,) = session.run(None, feeds)
        np.testing.assert_allclose(result, expected, **TOL)
        [execution] = [ex for segment in session.session.segments for step, ex in segment.steps
                       if step.op.op_type == "MatMul"]
        return execution.state["column_bands"]

    bands = prepared(1)
    assert [(s.start, min(s.stop, columns)) for s in bands] == [(i, min(i + 16, columns))
                                                                 for i in range(0, columns, 16)]
    assert prepared(2) == []  # several OpenBLAS threads: one product (on all of them)


@pytest.mark.parametrize("backend", ["numpy", "wgpu"])
def test_empty_output_computes_nothing(monkeypatch, backend):
    """A step whose outputs have no elements runs no kernel: numpy's matmul loops over the batch
    dims of empty operands, and the fuzzer's (2147483647, 0, 8) @ (8, 8) took seconds in it. The
    empty result has the right shape, and a non-empty run still multiplies."""
    from wgnn.backends.numpy import matmul as numpy_matmul

    products = []
    counted = numpy_matmul.matmul_in_bands
    monkeypatch.setattr(numpy_matmul, "matmul_in_bands", lambda *args: (products.append(1), counted(*args)))
    w = r(8, 5)
    model = make_model("MatMul", [r(2, 3, 8), Const(w)], opset=13)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "M"
    session = session_for(wgnn.convert(model), backend)
    (empty,) = session.run(None, {"in0": np.zeros((2 ** 31 - 1, 0, 8), np.float32)})
    assert empty.shape == (2 ** 31 - 1, 0, 5) and not products
    x = r(2, 3, 8)
    (y,) = session.run(None, {"in0": x})
    np.testing.assert_allclose(y, x @ w, **TOL)
    assert products or backend != "numpy"


def test_small_product_rule(monkeypatch):
    """blas.small_product_columns: columns per band within the bound, else all of them (one
    product): for a single row, past SMALL_PRODUCT_ROWS rows, bands under SMALL_PRODUCT_COLUMNS,
    other dtypes, several OpenBLAS threads when asked, or no small-product kernel."""
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: 100 ** 3)
    monkeypatch.setattr(numpy_blas, "openblas_threads", lambda: 2)
    columns = numpy_blas.small_product_columns
    assert columns(8, 768, 768, np.float32) == 162  # 8 x 768 x 162 within 100^3
    assert columns(16, 144, 3248, np.float32) == 434
    assert columns(16, 144, 400, np.float32) == 400  # one band holds them all
    assert columns(1, 768, 768, np.float32) == 768  # numpy's matrix-vector path
    assert columns(33, 100, 5000, np.float32) == 5000
    assert columns(16, 576, 3136, np.float32) == 3136  # 108-column bands: too narrow
    assert columns(8, 768, 768, np.float64) == 768
    assert columns(5, 0, 3, np.float32) == 3  # an empty depth: one product of zeros
    assert columns(8, 768, 768, np.float32, unless_threaded=True) == 768
    monkeypatch.setattr(numpy_blas, "openblas_threads", lambda: 1)
    assert columns(8, 768, 768, np.float32, unless_threaded=True) == 162
    monkeypatch.setattr(numpy_blas, "small_gemm_limit", lambda: 0)
    assert columns(8, 768, 768, np.float32) == 768
