"""MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool (MaxPool's Indices output, LpPool and
MaxUnpool: test_pool_more.py).

Oracle: onnx.reference where it is right; onnxruntime where they disagree (the reference gets
MaxPool SAME_LOWER and GlobalMaxPool on 3-D input wrong and refuses ceil_mode with auto_pad;
onnxruntime applies ceil_mode with VALID, ignores it with SAME_*). onnxruntime in turn ignores
dilations when it computes SAME_* padding for pools; there wgnn follows the ONNX formula (output
ceil(size / stride), padding from the dilated kernel), see test_pool_same_with_dilations.
"""
import numpy as np
import pytest
from helpers import assert_close, check_op, make_model, reference_outputs, run_wgnn
from helpers import test_backends as backends_under_test

import wgnn

rng = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-5}
X = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)  # C = 5, odd height


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (where onnx.reference is wrong or cannot run the case)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)

WINDOWS = [
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},  # asymmetric pads
    {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1]},  # last ceil window starts in the padding
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [2, 1], "pads": [1, 1, 0, 1]},
    {"kernel_shape": [1, 1]},
]


@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("window", range(len(WINDOWS)))
def test_max_pool(window, ceil_mode):
    check_op("MaxPool", [X], {**WINDOWS[window], "ceil_mode": ceil_mode}, **TOL)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("ceil_mode", [0, 1])
@pytest.mark.parametrize("window", range(len(WINDOWS)))
def test_average_pool(window, ceil_mode, count_include_pad):
    attrs = {**WINDOWS[window], "ceil_mode": ceil_mode, "count_include_pad": count_include_pad}
    check_op("AveragePool", [X], attrs, opset=19, **TOL)


@pytest.mark.parametrize("auto_pad", ["VALID", "SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_auto_pad(op, auto_pad):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    for ceil_mode in (0, 1):
        for count_include_pad in ((0, 1) if op == "AveragePool" else (None,)):
            extra = {} if count_include_pad is None else {"count_include_pad": count_include_pad}
            for window in ({"kernel_shape": [3, 3], "strides": [2, 2]}, {"kernel_shape": [2, 2], "strides": [3, 3]}):
                check_ort(op, [x], {**window, "auto_pad": auto_pad, "ceil_mode": ceil_mode, **extra})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_same_with_dilations(op, auto_pad):
    """Neither oracle follows the ONNX formula here (onnxruntime pads for the undilated kernel,
    the reference zero-fills), so the oracle is the reference on the explicit pads that the formula
    gives: height 8, stride 2, span 3 -> 4 outputs, total padding 1; width 6, stride 1, span 4 ->
    total padding 3. The odd totals tell SAME_UPPER from SAME_LOWER."""
    x = rng.standard_normal((2, 3, 8, 6)).astype(np.float32)
    window = {"kernel_shape": [2, 2], "strides": [2, 1], "dilations": [2, 3]}
    if op == "AveragePool":
        window["count_include_pad"] = 1
    pads = [0, 1, 1, 2] if auto_pad == "SAME_UPPER" else [1, 2, 0, 1]
    expected = reference_outputs(make_model(op, [x], {**window, "pads": pads}, opset=19), {"in0": x})
    model = make_model(op, [x], {**window, "auto_pad": auto_pad}, opset=19)
    for backend in backends_under_test():
        got = run_wgnn(model, {"in0": x}, backend)
        assert_close(got[0], expected[0], what=f"{op} {auto_pad} on {backend}", **TOL)


def test_pool_1d_3d_and_1x1():
    check_op("MaxPool", [rng.standard_normal((2, 3, 9)).astype(np.float32)],
             {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1}, **TOL)
    check_op("AveragePool", [rng.standard_normal((1, 6, 10)).astype(np.float32)],
             {"kernel_shape": [4], "strides": [3], "pads": [1, 2], "count_include_pad": 1, "ceil_mode": 1}, **TOL)
    x3 = rng.standard_normal((1, 3, 5, 4, 6)).astype(np.float32)
    check_op("MaxPool", [x3], {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1]}, **TOL)
    check_op("AveragePool", [x3], {"kernel_shape": [3, 2, 2], "strides": [2, 2, 3], "pads": [1, 0, 1, 1, 1, 1]},
             **TOL)
    x1 = rng.standard_normal((2, 5, 1, 1)).astype(np.float32)
    check_op("MaxPool", [x1], {"kernel_shape": [1, 1]}, **TOL)
    check_op("AveragePool", [x1], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, **TOL)


def test_pool_opsets():
    x = rng.standard_normal((1, 6, 7, 5)).astype(np.float32)
    check_op("MaxPool", [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, opset=1, **TOL)
    check_op("MaxPool", [x], {"kernel_shape": [2, 2], "storage_order": 1}, opset=8, **TOL)
    check_op("MaxPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1, "dilations": [1, 2]},
             opset=10, **TOL)
    check_op("AveragePool", [x], {"kernel_shape": [3, 2], "pads": [1, 1, 1, 0], "count_include_pad": 1},
             opset=7, **TOL)
    check_op("AveragePool", [x], {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, opset=10, **TOL)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_integers(dtype):
    x = rng.integers(0 if dtype == np.uint8 else -128, 127, (2, 3, 5, 5)).astype(dtype)
    check_op("MaxPool", [x], {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0], "strides": [2, 2], "ceil_mode": 1},
             opset=12)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op):
    for shape in ((2, 5, 7, 6), (2, 3, 5), (1, 6, 3, 2, 4), (2, 5, 1, 1)):
        check_ort(op, [rng.standard_normal(shape).astype(np.float32)])


def test_pool_empty_batch():
    empty = np.zeros((0, 3, 5, 5), np.float32)
    check_ort("MaxPool", [empty], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1})
    check_ort("AveragePool", [empty], {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]})
    check_ort("GlobalAveragePool", [empty])


def test_pool_window_too_large():
    model = make_model("MaxPool", [X], {"kernel_shape": [9, 2]})
    with pytest.raises(wgnn.ShapeError, match="does not fit"):
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": X})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_by_workgroup(op, monkeypatch):
    """A workgroup per NC4HW4 slice (real GPUs' kernel, forced here): planes smaller than a
    workgroup, not a multiple of it and over several strides of it, channels not a multiple of 4,
    batch 2, against onnxruntime; the workgroup kernel ran."""
    from helpers import gpu_adapters, session_for

    if not gpu_adapters():
        pytest.skip("no GPU adapter (install mesa-vulkan-drivers)")
    monkeypatch.setenv("WGNN_ROW_KERNEL", "workgroup")
    for shape in ((2, 5, 9, 8), (1, 6, 17, 23), (2, 3, 40, 37)):
        x = rng.standard_normal(shape).astype(np.float32) + 3.0  # all-positive planes: max must not see zeros
        check_ort(op, [x])
        model = wgnn.convert(make_model(op, [x]))
        for adapter in gpu_adapters():
            session = session_for(model, f"wgpu:{adapter['index']}")
            session.run(None, {"in0": x})
            paths = [d.kernel.path for seg in session.session.segments for _, ex in seg.steps for d in ex.dispatches]
            assert "pool/global_pool_nc4hw4_workgroup.wgsl" in paths, paths
