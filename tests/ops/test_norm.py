"""BatchNormalization (against onnxruntime: onnx.reference uses batch statistics for opset 9 and
whenever `momentum` is set), LayerNormalization, InstanceNormalization."""
import numpy as np
import pytest
from helpers import Const, check_op, far_from_zero_norm_cases, make_model, normalise_float64, run_wgnn
from helpers import test_backends as backends_under_test

import wgnn

rng = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def positive(*shape):
    return (np.abs(r(*shape)) + 0.1).astype(np.float32)


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (where onnx.reference is wrong or cannot run the case)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)

def bn_params(c, const=True):
    wrap = Const if const else (lambda v: v)
    return [wrap(r(c)), wrap(r(c)), wrap(r(c)), wrap(positive(c))]


# ---------------------------------------------------------------------------- BatchNormalization
@pytest.mark.parametrize("opset", [7, 9, 14, 15])
def test_batch_norm_opsets_with_momentum(opset):
    check_ort("BatchNormalization", [r(2, 5, 4, 3), *bn_params(5)], {"momentum": 0.8, "epsilon": 1e-3}, opset=opset)
    check_ort("BatchNormalization", [r(2, 6, 7), *bn_params(6)], {"momentum": 0.9}, opset=opset)


def test_batch_norm_shapes():
    check_ort("BatchNormalization", [r(3, 5), *bn_params(5)], opset=15)  # (N, C)
    check_ort("BatchNormalization", [r(2, 3, 1, 1), *bn_params(3)], opset=15)
    check_ort("BatchNormalization", [r(1, 3, 2, 3, 4), *bn_params(3)], opset=15)
    check_ort("BatchNormalization", [r(2, 5, 4, 3), *bn_params(5, const=False)], opset=15)  # runtime params


def test_batch_norm_opset15_mixed_types():
    # BatchNormalization-15: float16 X with float32 scale/bias/mean/var.
    x = r(2, 3, 4, 5).astype(np.float16)
    check_ort("BatchNormalization", [x, *bn_params(3)], opset=15, rtol=2e-3, atol=2e-3)


def test_norm_empty_batch():
    empty = np.zeros((0, 3, 4), np.float32)
    check_ort("BatchNormalization", [empty, *bn_params(3)], opset=15)
    check_ort("InstanceNormalization", [empty, Const(r(3)), Const(r(3))])
    check_ort("LayerNormalization", [empty, Const(r(4))], opset=17)


def test_batch_norm_spatial0_opset7():
    params = [Const(r(5, 4, 3)), Const(r(5, 4, 3)), Const(r(5, 4, 3)), Const(positive(5, 4, 3))]
    check_ort("BatchNormalization", [r(2, 5, 4, 3), *params], {"spatial": 0}, opset=7)


def test_batch_norm_training_is_rejected():
    with pytest.raises(wgnn.ConversionError, match="training_mode"):
        wgnn.convert(make_model("BatchNormalization", [r(2, 5, 3), *bn_params(5)], {"training_mode": 1}, opset=15))
    with pytest.raises(wgnn.ConversionError, match="training outputs"):
        wgnn.convert(make_model("BatchNormalization", [r(2, 5, 3), *bn_params(5)], outputs=3, opset=15))


def test_batch_norm_bad_param_shape():
    model = make_model("BatchNormalization", [r(2, 5, 3), Const(r(4)), Const(r(5)), Const(r(5)), Const(positive(5))],
                       opset=15)
    with pytest.raises(wgnn.ShapeError, match="expected \\(5,\\)"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 5, 3)})


# ---------------------------------------------------------------------------- LayerNormalization
@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
def test_layer_norm_axes(axis):
    x = r(2, 5, 4, 3)
    normalized = x.shape[axis:]
    check_op("LayerNormalization", [x, Const(r(*normalized)), Const(r(*normalized))], {"axis": axis}, opset=17, **TOL)


def test_layer_norm_no_bias_epsilon_broadcast_scale():
    x = r(2, 6, 5)
    check_op("LayerNormalization", [x, Const(r(5))], {"epsilon": 1e-2}, opset=17, **TOL)
    check_op("LayerNormalization", [x, Const(r(1, 5)), Const(r(5))], {"axis": 1}, opset=17, **TOL)
    check_op("LayerNormalization", [x, r(5), r(5)], opset=17, **TOL)  # runtime scale and bias


def test_layer_norm_mean_and_inv_std_outputs():
    x = r(3, 5, 7)
    check_op("LayerNormalization", [x, Const(r(7)), Const(r(7))], outputs=3, opset=17, **TOL)
    check_op("LayerNormalization", [x, Const(r(5, 7))], {"axis": 1}, outputs=3, opset=17, **TOL)


def test_layer_norm_other_float_types():
    """Mean and InvStdDev have the stash type (float32), as in onnxruntime; onnx.reference gives
    them X's type and implements no other stash_type."""
    x = rng.standard_normal((2, 3, 6))
    check_ort("LayerNormalization", [x, Const(rng.standard_normal(6)), Const(rng.standard_normal(6))], outputs=3,
              opset=17)
    half = x.astype(np.float16)
    check_ort("LayerNormalization", [half, Const(rng.standard_normal(6).astype(np.float16))], outputs=3, opset=17,
              rtol=2e-3, atol=2e-3)


def test_layer_norm_bad_scale():
    model = make_model("LayerNormalization", [r(2, 5, 4), Const(r(5))], opset=17)
    with pytest.raises(wgnn.ShapeError, match="normalized axes"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": r(2, 5, 4)})


# ------------------------------------------------------------------------- InstanceNormalization
def test_instance_norm():
    check_op("InstanceNormalization", [r(2, 5, 4, 3), Const(r(5)), Const(r(5))], {"epsilon": 1e-3}, **TOL)
    check_op("InstanceNormalization", [r(2, 3, 7), Const(r(3)), Const(r(3))], **TOL)
    check_op("InstanceNormalization", [r(1, 6, 3, 2, 4), r(6), r(6)], **TOL)
    check_op("InstanceNormalization", [r(2, 3, 1, 5), Const(r(3)), Const(r(3))], opset=6, **TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case", ["instance", "group_per_channel", "group_per_group"])
def test_instance_and_group_norm_row_path(monkeypatch, case, dtype):
    """Numpy's InstanceNorm and GroupNorm normalise (image, channel or group) rows in place in
    their statistics' type (float32; float64 for InstanceNorm's float64 inputs), with the scale
    folded into each row's factor (norm._centre_rows); the rest takes the general path. Both
    against float64 formulas."""
    from wgnn.backends.numpy import norm

    calls = []
    centre_rows = norm._centre_rows
    monkeypatch.setattr(norm, "_centre_rows", lambda *args: calls.append(1) or centre_rows(*args))
    x = (r(2, 6, 5, 7) * 3 + 1).astype(dtype)
    groups = 6 if case == "instance" else 3
    params = 3 if case == "group_per_group" else 6
    scale, bias = r(params).astype(dtype), r(params).astype(dtype)
    if case == "instance":
        model = make_model("InstanceNormalization", [x, Const(scale), Const(bias)])
    else:
        model = make_model("GroupNormalization", [x, Const(scale), Const(bias)], {"num_groups": groups},
                           opset=18 if case == "group_per_group" else 21)
    per_channel = lambda v: np.repeat(v.astype(np.float64), 6 // params).reshape(1, 6, 1, 1)  # noqa: E731
    grouped = normalise_float64(x.reshape(2, groups, -1), (2,), 1e-5)[0].reshape(x.shape)
    want = grouped * per_channel(scale) + per_channel(bias)
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    tol = 1e-2 if dtype == np.float16 else 1e-5
    got = session.run(None, {"in0": x})[0]
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    # GroupNorm's statistics are float32 (stash_type), so float64 inputs take the general path too
    assert len(calls) == (dtype == np.float32 or (dtype == np.float64 and case == "instance"))


@pytest.mark.parametrize("name, model, x, want", far_from_zero_norm_cases())
def test_rows_far_from_zero(name, model, x, want):
    """Rows near 50 with a spread of 0.1, against float64, on every backend: a float32 mean alone
    would put up to 6e-5 of a normalised unit into the outputs (as in onnx's reference); the
    numpy backend and the GPU kernels keep the mean as the row's first element plus an offset and
    stay within 1e-5 (1e-6 on lavapipe). The kernels that give a row a workgroup:
    tests/backends/test_wgpu_row_kernels.py."""
    for backend in backends_under_test():
        for got, exact in zip(run_wgnn(model, {"in0": x}, backend), want, strict=True):
            np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-5, err_msg=f"{name} on {backend}")


@pytest.mark.parametrize("shape, axis, scale, bias, kernel", [
    ((3, 5, 8), -1, (8,), (8,), "layer_norm_vec4"),  # rows of whole vec4s, (D,) scale and bias
    ((2, 3, 4, 2), 2, (4, 2), None, "layer_norm_vec4"),  # two normalized axes, contiguous: one vec4 row
    ((3, 5, 8), -1, (1,), (8,), "layer_norm"),  # a broadcast scale: read element by element
    ((3, 5, 6), -1, (6,), (6,), "layer_norm"),  # rows of 6
])
def test_layer_norm_kernel_choice(shape, axis, scale, bias, kernel):
    """The vec4 kernel where rows are whole vec4s and scale / bias contiguous along them, with the
    Mean and InvStdDev outputs too; the element kernel elsewhere. Both against the reference."""
    from helpers import gpu_adapters, session_for

    inputs = [r(*shape), Const(r(*scale))] + ([Const(r(*bias))] if bias else [])
    check_op("LayerNormalization", inputs, {"axis": axis}, outputs=3, opset=17, **TOL)
    for adapter in gpu_adapters():
        session = session_for(make_model("LayerNormalization", inputs, {"axis": axis}, outputs=3, opset=17),
                              f"wgpu:{adapter['index']}")
        session.run(None, {"in0": inputs[0]})
        paths = [d.kernel.path for seg in session.session.segments for _, ex in seg.steps
                 for d in getattr(ex, "dispatches", [])]
        assert paths == [f"norm/{kernel}.wgsl"]
