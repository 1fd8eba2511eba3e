"""Grid family: GridSample, AffineGrid and Col2Im.

Reference: onnx.reference, except where noted: onnxruntime for GridSample-16 (onnx.reference
knows only opset 20's mode names) and for cubic sampling with border padding (onnx.reference
clamps the coordinate before taking the taps; PyTorch, whose grid_sample ONNX follows, and
onnxruntime clamp each tap, which is what wgnn does).
"""
import numpy as np
import pytest
from helpers import Const, check_op, make_model, run_wgnn

import wgnn

rng = np.random.default_rng(1)
TOL = {"rtol": 1e-4, "atol": 1e-5}
CUBIC_TOL = {"rtol": 1e-4, "atol": 1e-4}  # 4x4 taps with weights outside [0, 1]

X = rng.standard_normal((2, 5, 4, 7)).astype(np.float32)  # batch 2, C = 5, odd width
# Positions inside and well outside [-1, 1] (reflection folds several times), plus exact
# centres, edges and half-pixel ties (nearest rounds those half to even).
GRID = rng.uniform(-2.6, 2.6, (2, 3, 6, 2)).astype(np.float32)
GRID[0, 0, :, 0] = [-1.0, 1.0, 0.0, 0.5, -0.5, -0.75]
GRID[0, 0, :, 1] = [-1.0, 1.0, 0.0, 0.25, -0.25, 0.75]
OPSET16_MODES = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}


def sample(mode, padding, align, *, x=X, grid=GRID, opset=20, **options):
    attrs = {"mode": OPSET16_MODES[mode] if opset < 20 else mode, "padding_mode": padding,
             "align_corners": align}
    reference = "ort" if opset < 20 or (mode, padding) == ("cubic", "border") else "onnx"
    tol = CUBIC_TOL if mode == "cubic" else TOL
    return check_op("GridSample", [x, grid], attrs, opset=opset, reference=reference, **tol, **options)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample(mode, padding, align):
    sample(mode, padding, align)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_opset16(mode):
    for padding in ("zeros", "border", "reflection"):
        sample(mode, padding, 1, opset=16)
    # Opset 16's defaults: bilinear, zeros, align_corners 0.
    check_op("GridSample", [X, GRID], {}, opset=16, reference="ort", **TOL)


def test_grid_sample_shapes():
    # One channel block of 4 plus 5 more, a 1-pixel row, a single output position.
    x = rng.standard_normal((1, 9, 1, 5)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (1, 1, 1, 2)).astype(np.float32)
    for mode in ("linear", "nearest", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            sample(mode, padding, 0, x=x, grid=grid)
    # No output positions (onnx.reference returns a bare array for it: onnxruntime).
    check_op("GridSample", [X, GRID[:, :0]], {}, opset=20, reference="ort")


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_volumetric(mode):
    x = rng.standard_normal((2, 5, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.8, 1.8, (2, 2, 3, 4, 3)).astype(np.float32)
    # Cubic with border padding has no 3-D reference: onnxruntime samples cubic in 2-D only, and
    # onnx.reference clamps the coordinate (see the module docstring).
    for padding in ("zeros", "reflection") if mode == "cubic" else ("zeros", "border", "reflection"):
        for align in (0, 1):
            sample(mode, padding, align, x=x, grid=grid)


def test_grid_sample_1d_on_cpu():
    # 1-D sampling: numpy only (the GPU kernel samples 2-D and 3-D images and refuses, by design).
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, (2, 4, 1)).astype(np.float32)
    for mode in ("linear", "nearest", "cubic"):
        sample(mode, "reflection", 0, x=x, grid=grid, allow_fallback=True)


def test_grid_sample_bad_grid():
    model = make_model("GridSample", [X, GRID[..., :1]], {}, opset=20)
    with pytest.raises(wgnn.ShapeError, match="grid must have shape"):
        run_wgnn(model, {"in0": X, "in1": GRID[..., :1]})


# ------------------------------------------------------------------------------- AffineGrid
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align):
    theta2 = rng.standard_normal((2, 2, 3)).astype(np.float32)
    check_op("AffineGrid", [theta2, Const(np.array([2, 5, 3, 7], np.int64))], {"align_corners": align},
             opset=20, **TOL)
    theta3 = rng.standard_normal((3, 3, 4)).astype(np.float32)
    check_op("AffineGrid", [theta3, Const(np.array([3, 1, 2, 5, 3], np.int64))], {"align_corners": align},
             opset=20, **TOL)


def test_affine_grid_single_pixel_rows():
    theta = rng.standard_normal((1, 2, 3)).astype(np.float32)
    check_op("AffineGrid", [theta, Const(np.array([1, 2, 1, 6], np.int64))], {}, opset=20, **TOL)
    check_op("AffineGrid", [Const(theta), Const(np.array([1, 2, 4, 1], np.int64))], {}, opset=20, **TOL)


# ----------------------------------------------------------------------------------- Col2Im
COL2IM = [
    # (N, C, image, block, attrs)
    (2, 3, [5, 6], [2, 2], {}),
    (1, 5, [5, 6], [2, 3], {"strides": [2, 2], "pads": [1, 0, 1, 1], "dilations": [2, 1]}),
    (2, 2, [7, 4], [3, 1], {"strides": [1, 2], "pads": [2, 1, 0, 1]}),
    (1, 2, [9], [3], {"strides": [2], "dilations": [2], "pads": [1, 2]}),
    (1, 2, [3, 4, 5], [2, 2, 3], {"pads": [1, 0, 1, 0, 1, 1]}),
]


def blocks(image, block, attrs):
    r = len(image)
    pads = attrs.get("pads", [0] * 2 * r)
    strides = attrs.get("strides", [1] * r)
    dilations = attrs.get("dilations", [1] * r)
    return int(np.prod([(image[i] + pads[i] + pads[i + r] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
                        for i in range(r)]))


@pytest.mark.parametrize("n,c,image,block,attrs", COL2IM, ids=[str(i) for i in range(len(COL2IM))])
def test_col2im(n, c, image, block, attrs):
    x = rng.standard_normal((n, c * int(np.prod(block)), blocks(image, block, attrs))).astype(np.float32)
    check_op("Col2Im", [x, Const(np.array(image, np.int64)), Const(np.array(block, np.int64))], attrs,
             opset=18, **TOL)


def test_col2im_bad_block_count():
    x = np.zeros((1, 4, 7), np.float32)
    model = make_model("Col2Im", [x, Const(np.array([5, 6], np.int64)), Const(np.array([2, 2], np.int64))],
                       opset=18)
    with pytest.raises(wgnn.ShapeError, match="blocks"):
        run_wgnn(model, {"in0": x})
