"""LpPool, MaxPool's Indices output, MaxUnpool.

Oracles: onnxruntime for the indices (onnx.reference numbers them wrongly when strides and
dilations are all 1) and for MaxUnpool with output_shape: the indices address the output_shape
tensor directly, as in onnxruntime (microsoft/onnxruntime#2193) and PyTorch. onnx.reference (and
the ONNX node test maxunpool_export_with_output_shape made with it) scatters into the shape
inferred from the attributes and pads that at the end, which breaks the MaxPool -> MaxUnpool round
trip of odd sizes (onnx/onnx#2398), so wgnn does not follow it. Where the output_shape equals the
inferred shape both agree.
"""
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, check_op, make_model, reference_outputs, run_wgnn
from wgnn.engine.ops.base import TensorSpec

import wgnn

rng = np.random.default_rng(1)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X = r(2, 5, 7, 6)  # C = 5, odd height
WINDOWS = [
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},  # asymmetric pads
    {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1},  # ceil window in padding
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 1], "dilations": [2, 1], "pads": [1, 1, 0, 1]},
    {"kernel_shape": [2, 2]},  # strides and dilations 1
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
]


def check_ort(op_type, inputs, attrs=None, **options):
    return check_op(op_type, inputs, attrs, reference="ort", **options)


# --------------------------------------------------------------------------------------- LpPool
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("window", range(len(WINDOWS)))
def test_lp_pool(window, p):
    check_ort("LpPool", [X], {**WINDOWS[window], "p": p}, **TOL)


def test_lp_pool_opsets():
    x = r(1, 6, 7, 5)
    check_op("LpPool", [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "p": 2.0}, opset=1, **TOL)  # float p
    check_op("LpPool", [x], {"kernel_shape": [2, 3], "strides": [2, 1], "p": 3}, opset=2, **TOL)
    check_op("LpPool", [x], {"kernel_shape": [2, 2], "auto_pad": "VALID", "p": 1}, opset=11, **TOL)
    check_op("LpPool", [x], {"kernel_shape": [2, 2], "dilations": [2, 2], "p": 2}, opset=18, **TOL)
    check_op("LpPool", [x], {"kernel_shape": [2, 2], "strides": [2, 2], "p": 4}, opset=22, **TOL)


def test_lp_pool_1d_3d_and_empty():
    check_ort("LpPool", [r(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1, "p": 2},
              **TOL)
    x3 = r(1, 3, 5, 4, 6)
    check_ort("LpPool", [x3], {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1], "p": 3},
              **TOL)
    check_ort("LpPool", [np.zeros((0, 3, 5, 5), np.float32)], {"kernel_shape": [2, 2], "p": 2})


# ----------------------------------------------------------------------------- MaxPool Indices
@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("window", range(len(WINDOWS)))
def test_max_pool_indices(window, storage_order):
    check_ort("MaxPool", [X], {**WINDOWS[window], "storage_order": storage_order}, outputs=2, **TOL)


@pytest.mark.parametrize("opset", [8, 10, 12, 22])
def test_max_pool_indices_opsets(opset):
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "storage_order": 1}
    if opset >= 10:
        attrs["ceil_mode"] = 1
    check_ort("MaxPool", [r(1, 3, 6, 5)], attrs, outputs=2, opset=opset, **TOL)


def test_max_pool_indices_ties_pick_the_first():
    # Few distinct values: windows hold several equal maxima; the first in tap order wins.
    x = rng.integers(0, 3, (2, 3, 6, 7)).astype(np.float32)
    for storage_order in (0, 1):
        check_ort("MaxPool", [x], {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1],
                                   "storage_order": storage_order}, outputs=2)


def test_max_pool_indices_1d_3d():
    check_ort("MaxPool", [r(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [2, 1], "ceil_mode": 1},
              outputs=2, **TOL)
    x3 = r(1, 3, 5, 4, 6)
    for storage_order in (0, 1):
        check_ort("MaxPool", [x3], {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 0, 1],
                                    "storage_order": storage_order}, outputs=2, **TOL)


def test_max_pool_indices_big_window():
    # 1200 taps: the GPU kernel takes fewer pixels per invocation to stay within llvmpipe's loop budget.
    check_ort("MaxPool", [r(1, 2, 30, 44)], {"kernel_shape": [30, 40], "strides": [1, 2]}, outputs=2, **TOL)


def test_max_pool_indices_window_outside_the_input():
    """Dilated taps can all miss the input (height 1, pads 1 + 1, taps at -1 and 1): wgnn gives the
    plain MaxPool's value there (the lowest float) and index -1, on every backend. The references
    disagree (onnx.reference 0 and -1, onnxruntime -FLT_MAX and a negative index)."""
    from helpers import test_backends

    x = r(1, 2, 1, 5)
    model = make_model("MaxPool", [x], {"kernel_shape": [2, 1], "pads": [1, 0, 1, 0], "dilations": [2, 1]},
                       outputs=2)
    for backend in test_backends():
        y, indices = run_wgnn(model, {"in0": x}, backend)
        assert y.shape == indices.shape == (1, 2, 1, 5) and indices.dtype == np.int64
        assert np.all(y == -np.inf) and np.all(indices == -1), backend


def test_max_pool_indices_refused_past_int32():
    """The GPU stores indices as int32: inputs of 2^31 elements or more run on the CPU."""
    from wgnn.backends.wgpu.pool import PoolGpu

    def step(shape):
        node = SimpleNamespace(outputs=["y", "i"])
        return SimpleNamespace(node=node, input_specs=[TensorSpec(shape, "float32")], attrs={"kind": "max"})

    assert PoolGpu.unsupported_reason(step((2, 3, 4, 5))) is None
    assert "int32" in PoolGpu.unsupported_reason(step((1, 2, 2 ** 15, 2 ** 15)))


# ----------------------------------------------------------------------------------- MaxUnpool
def pooled(x, attrs):
    """MaxPool's outputs (values, indices) by onnxruntime."""
    return reference_outputs(make_model("MaxPool", [x], attrs, outputs=2), {"in0": x}, "ort")


@pytest.mark.parametrize("opset", [9, 11, 22])
def test_max_unpool_inferred_shape(opset):
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    y, i = pooled(r(2, 5, 5, 5), attrs)  # (5 + 2 - 3) // 2 + 1 = 3 -> (3 - 1) * 2 - 2 + 3 = 5
    check_op("MaxUnpool", [y, i], attrs, opset=opset)
    check_op("MaxUnpool", [y, Const(i)], {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=opset)


def test_max_unpool_output_shape_round_trip():
    """Odd sizes: the pool forgets the last row and column, output_shape brings them back."""
    x = np.abs(r(2, 3, 7, 5)) + 0.1  # positive: pooling the unpooled zeros gives the maxima back
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    y, i = pooled(x, attrs)
    shape = np.array(x.shape, np.int64)
    check_ort("MaxUnpool", [y, i, Const(shape)], attrs, opset=11)
    check_ort("MaxUnpool", [y, i, shape], attrs, opset=11)  # output_shape known only when running
    # Unpooling then pooling again gives the pooled values back.
    unpooled = check_ort("MaxUnpool", [y, i, Const(shape)], attrs, opset=11, backends=["numpy"])[0]
    np.testing.assert_array_equal(pooled(unpooled, attrs)[0], y)


def test_max_unpool_1d_3d():
    attrs = {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}
    y, i = pooled(r(2, 5, 9), attrs)
    check_ort("MaxUnpool", [y, i], attrs)
    attrs = {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}
    x3 = r(1, 3, 4, 5, 6)
    y, i = pooled(x3, attrs)
    check_ort("MaxUnpool", [y, i, Const(np.array(x3.shape, np.int64))], attrs)


def test_max_unpool_bad_indices():
    y, i = r(1, 1, 2, 2), np.array([[[[0, 3], [9, 100]]]], np.int64)
    model = make_model("MaxUnpool", [y, i], {"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    with pytest.raises(wgnn.InputError, match="index 100 is outside"):
        run_wgnn(model, {"in0": y, "in1": i}, "numpy")
    model = make_model("MaxUnpool", [y, r(1, 1, 2, 3)], {"kernel_shape": [2, 2]}, opset=11)
    with pytest.raises(wgnn.ShapeError, match="indices shape"):
        run_wgnn(model, {"in0": y, "in1": r(1, 1, 2, 3)}, "numpy")


# ------------------------------------------------------------------------------ GPU layouts
@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_gpu_layouts(storage):
    """LpPool runs on NC4HW4 feature maps (buffer and texture storage), max pooling with indices
    linear; both on the GPU alone (a refusal raises instead of falling back)."""
    from helpers import gpu_adapters

    adapters = gpu_adapters()
    if not adapters:
        pytest.skip("no GPU adapter (install mesa-vulkan-drivers)")
    cases = [("LpPool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "p": 3}, 1, "nc4hw4"),
             ("LpPool", {"kernel_shape": [2, 2], "p": 2}, 1, "nc4hw4"),
             ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 2, "linear")]
    for op, attrs, outputs, layout in cases:
        model = make_model(op, [X], attrs, outputs=outputs)
        want = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"in0": X})
        for adapter in adapters:
            config = wgnn.Config(providers=("wgpu",), adapter=adapter["index"], storage=storage)
            sess = wgnn.InferenceSession(model.SerializeToString(), config=config)
            got = sess.run(None, {"in0": X})
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype
                np.testing.assert_allclose(g, w, **TOL)
            ran = [execution.layout for segment in sess.session.segments for step, execution in segment.steps
                   if step.op.op_type == "Pool"]
            assert ran == [layout], f"{op} {attrs} ran {ran} on adapter {adapter['index']} ({storage})"
