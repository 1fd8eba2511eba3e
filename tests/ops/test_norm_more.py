"""LpNormalization, MeanVarianceNormalization, GroupNormalization, RMSNormalization, LRN.

Oracles: onnx.reference where it is right, onnxruntime where it is not:
- LpNormalization p=1: the reference sums x (not |x|); onnxruntime takes the L1 norm.
- LRN: the reference loops over the batch axis instead of the channels (right only when N == C)
  and onnxruntime takes odd sizes and 4-D inputs only; other ranks are checked against the 4-D
  case with the spatial axes folded, which LRN (across channels only) cannot tell apart.
- RMSNormalization (opset 23) is in both; the reference implements stash_type 1 only.
"""
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, assert_close, check_op, make_model, reference_outputs, run_wgnn
from helpers import test_backends as backends_under_test
from wgnn.engine.ops.base import TensorSpec

import wgnn

rng = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check_ort(op_type, inputs, attrs=None, **options):
    return check_op(op_type, inputs, attrs, reference="ort", **options)


def check_against(model, expected, feeds, what, **tol):
    """wgnn on every backend against given expected outputs."""
    for backend in backends_under_test():
        got = run_wgnn(model, feeds, backend)
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_close(a, b, what=f"{what} output {i} on {backend}", **(tol or TOL))


# ------------------------------------------------------------------------------ LpNormalization
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_lp_norm_l2_axes(axis):
    check_op("LpNormalization", [r(2, 5, 3, 7)], {"axis": axis, "p": 2}, **TOL)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_lp_norm_l1_axes(axis):
    check_ort("LpNormalization", [r(3, 5, 7)], {"axis": axis, "p": 1}, **TOL)


@pytest.mark.filterwarnings("ignore:invalid value encountered in divide")  # the reference's 0 / 0
@pytest.mark.parametrize("opset", [1, 22])
def test_lp_norm_opsets_default_and_zero_rows(opset):
    x = r(4, 6)
    x[1] = 0  # a zero norm gives zeros, not NaN
    check_op("LpNormalization", [x], opset=opset, **TOL)  # defaults: axis -1, p 2
    check_ort("LpNormalization", [x], {"axis": 0, "p": 1}, opset=opset, **TOL)


def test_lp_norm_long_rows_and_1d():
    check_op("LpNormalization", [r(3, 1500)], {"axis": 1}, **TOL)
    check_op("LpNormalization", [r(7)], {"axis": 0}, **TOL)
    check_op("LpNormalization", [np.zeros((0, 5), np.float32)], {"axis": 1}, **TOL)


def test_lp_norm_rejects_other_p():
    with pytest.raises(wgnn.ConversionError, match="p must be 1 or 2"):
        wgnn.convert(make_model("LpNormalization", [r(2, 3)], {"p": 3}))


# -------------------------------------------------------------------- MeanVarianceNormalization
@pytest.mark.parametrize("opset", [9, 13])
def test_mvn_default_axes(opset):
    check_op("MeanVarianceNormalization", [r(2, 5, 3, 7)], opset=opset, **TOL)


@pytest.mark.parametrize("axes", [[1, 3], [2, 3], [-1], [0], [0, 1, 2, 3], [3, 0]])
def test_mvn_axes(axes):
    # Data of its own seed, not the module's stream (which depends on the order tests run in): over
    # axis 0 a group is 2 values, and two near-equal ones leave a variance where the reference (ONNX's
    # function body: E[x^2] - E[x]^2) loses the digits the tolerance asks for.
    x = np.random.default_rng(41).standard_normal((2, 5, 3, 7)).astype(np.float32)
    check_op("MeanVarianceNormalization", [x], {"axes": axes}, opset=13, **TOL)


def test_mvn_other_ranks_and_constant_rows():
    check_op("MeanVarianceNormalization", [r(3, 6, 5)], {"axes": [0, 2]}, opset=13, **TOL)
    check_op("MeanVarianceNormalization", [r(2, 3, 2, 3, 4)], {"axes": [0, 2, 4]}, opset=13, **TOL)
    x = r(2, 3, 4, 5)
    x[:, 1] = 2.5  # zero variance: (x - mean) / (0 + epsilon) = 0
    check_op("MeanVarianceNormalization", [x], opset=13, **TOL)
    # Rows of 2400 elements: the GPU kernel's three passes stay within llvmpipe's loop budget.
    check_op("MeanVarianceNormalization", [r(2, 3, 40, 30)], opset=13, **TOL)


# ------------------------------------------------------------------------ GroupNormalization
@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 5), 3), ((2, 6, 3, 5), 1), ((2, 6, 3, 5), 6),
                                           ((3, 5, 7), 5), ((1, 4, 2, 3, 3), 2), ((2, 10, 9, 1), 2)])
def test_group_norm_opset21(shape, groups):
    c = shape[1]
    check_op("GroupNormalization", [r(*shape), Const(r(c)), Const(r(c))], {"num_groups": groups}, opset=21, **TOL)


def test_group_norm_epsilon_runtime_params_and_empty():
    check_op("GroupNormalization", [r(2, 6, 4, 4), r(6), r(6)], {"num_groups": 2, "epsilon": 1e-2}, opset=21, **TOL)
    check_op("GroupNormalization", [r(2, 6, 40, 30), Const(r(6)), Const(r(6))], {"num_groups": 3}, opset=21, **TOL)
    empty = np.zeros((0, 6, 3), np.float32)  # both references fail on an empty batch
    model = make_model("GroupNormalization", [empty, Const(r(6)), Const(r(6))], {"num_groups": 2}, opset=21)
    check_against(model, [empty], {"in0": empty}, "GroupNormalization of an empty batch")


def test_group_norm_past_the_loop_budget():
    """A group of 2 x 150 x 150 elements needs more loop iterations than llvmpipe runs in one
    invocation: there (and on real GPUs) the row gets a workgroup, so it stays on the GPU."""
    from wgnn.backends.wgpu.backend import LOOP_BUDGET
    from wgnn.backends.wgpu.norm import GroupNormGpu, GroupRows

    x = r(1, 4, 150, 150)
    assert GroupRows(2, 150 * 150).one_invocation() > LOOP_BUDGET
    step = SimpleNamespace(input_specs=[TensorSpec(x.shape, "float32")], attrs={"num_groups": 2})
    assert GroupNormGpu.loop_iterations(step) < LOOP_BUDGET
    check_op("GroupNormalization", [x, Const(r(4)), Const(r(4))], {"num_groups": 2}, opset=21, **TOL)


def test_group_norm_float16_stash():
    x = r(2, 6, 5).astype(np.float16)
    params = [Const(r(6).astype(np.float16)), Const(r(6).astype(np.float16))]
    check_ort("GroupNormalization", [x, *params], {"num_groups": 3}, opset=21, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("opset", [18, 20])
def test_group_norm_opset18_per_group_params(opset):
    # Opsets 18-20: scale and bias hold one value per group, shared by its channels. onnx.checker
    # calls this form deprecated; the converter loads it all the same.
    check_op("GroupNormalization", [r(2, 6, 3, 5), Const(r(3)), Const(r(3))], {"num_groups": 3}, opset=opset, **TOL)
    check_op("GroupNormalization", [r(2, 8, 7), r(2), r(2)], {"num_groups": 2, "epsilon": 1e-3}, opset=opset, **TOL)


def test_group_norm_bad_groups():
    model = make_model("GroupNormalization", [r(2, 6, 3), Const(r(6)), Const(r(6))], {"num_groups": 4}, opset=21)
    with pytest.raises(wgnn.ShapeError, match="divide the 6 channels"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 6, 3)})


# ------------------------------------------------------------------------- RMSNormalization
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -4])
def test_rms_norm_axes(axis):
    x = r(2, 5, 3, 7)
    normalized = x.shape[axis:]
    check_op("RMSNormalization", [x, Const(r(*normalized))], {"axis": axis}, opset=23, **TOL)


def test_rms_norm_broadcast_scale_epsilon_runtime_scale():
    x = r(3, 5, 6)
    check_op("RMSNormalization", [x, Const(r(6))], {"axis": 1, "epsilon": 1e-2}, opset=23, **TOL)
    check_op("RMSNormalization", [x, Const(r(1, 6))], {"axis": 1}, opset=23, **TOL)
    check_op("RMSNormalization", [x, r(6)], opset=23, **TOL)
    check_op("RMSNormalization", [r(4, 2000), Const(r(2000))], opset=23, **TOL)


def test_rms_norm_other_types():
    x = r(2, 3, 6)
    check_ort("RMSNormalization", [x.astype(np.float16), Const(r(6).astype(np.float16))], opset=23,
              rtol=2e-3, atol=2e-3)
    # Statistics in float64 (stash_type 11): the GPU kernel keeps float32 statistics, so it refuses.
    check_ort("RMSNormalization", [x, Const(r(6))], {"stash_type": 11}, opset=23, allow_fallback=True, **TOL)


def test_rms_norm_bad_scale():
    model = make_model("RMSNormalization", [r(2, 5, 4), Const(r(5))], opset=23)
    with pytest.raises(wgnn.ShapeError, match="normalized axes"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 5, 4)})


# ---------------------------------------------------------------------------------------- LRN
@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_lrn_odd_sizes(size):
    check_ort("LRN", [r(2, 5, 3, 7)], {"size": size, "alpha": 0.02, "beta": 0.6, "bias": 1.5}, **TOL)


def test_lrn_defaults_opsets_even_size():
    check_ort("LRN", [r(1, 6, 4, 4)], {"size": 3}, opset=1, **TOL)
    check_ort("LRN", [r(1, 6, 4, 4)], {"size": 3}, opset=13, **TOL)
    # Even window (lo = size // 2 - 1 below, size // 2 above): onnxruntime refuses even sizes,
    # the reference is right when N == C.
    check_op("LRN", [r(4, 4, 3, 5)], {"size": 4, "alpha": 0.05, "beta": 0.5, "bias": 2.0}, **TOL)
    check_op("LRN", [r(3, 3, 2, 5)], {"size": 2, "alpha": 0.05}, **TOL)


@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 5, 3, 2, 3), (3, 6)])
def test_lrn_other_ranks(shape):
    """LRN normalizes across channels only: an (N, C, ...) input gives the 4-D result of
    (N, C, prod(spatial), 1)."""
    x = r(*shape)
    attrs = {"size": 3, "alpha": 0.1, "beta": 0.75, "bias": 1.0}
    folded = x.reshape(shape[0], shape[1], -1, 1)
    expected = reference_outputs(make_model("LRN", [folded], attrs), {"in0": folded}, "ort")
    check_against(make_model("LRN", [x], attrs), [expected[0].reshape(shape)], {"in0": x}, f"LRN {shape}")
