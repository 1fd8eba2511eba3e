"""Grid family on numpy: GridSample (any number of spatial dims), AffineGrid and Col2Im.

GridSample follows the ONNX reference's arithmetic: coordinates are float32; nearest rounds half
to even before the padding mode moves a coordinate back inside; linear and cubic taps outside the
image read 0 (zeros), the edge (border) or their mirror image (reflection); interpolation is
separable, innermost dim first. One exception: cubic with border padding clamps each tap, not the
coordinate (PyTorch's grid_sample and onnxruntime; onnx.reference clamps the coordinate too,
which changes the weights of points outside the image).
"""
from __future__ import annotations

import itertools

import numpy as np

from ...engine.ops.base import InferContext
from ...engine.ops.grid import col2im_geometry
from .kernel import numpy_kernel

CUBIC_A = np.float32(-0.75)  # Keys' cubic convolution coefficient (PyTorch's and ONNX's)


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Fold coordinates outside [lo, hi] back in, mirroring at the nearer edge repeatedly
    (float64, as the reference computes it)."""
    x = np.asarray(x, np.float64)
    span = hi - lo
    if span <= 0:  # a one-pixel axis with align_corners: every position is pixel 0
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    flips = np.floor(dx / span)
    rest = dx - flips * span
    even = flips % 2 == 0
    folded_below = np.where(even, lo + rest, hi - rest)
    folded_above = np.where(even, hi - rest, lo + rest)
    return np.where(below, folded_below, np.where(above, folded_above, x))


def cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Weights of the taps at -1, 0, 1, 2 from the floor, for fractions t in [0, 1)."""
    a = CUBIC_A

    def near(s):  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    one = np.float32(1)
    return [far(t + one), near(t), near(one - t), far(np.float32(2) - t)]


def axis_taps(coord: np.ndarray, length: int, mode: str, padding: str, align: bool):
    """(indices, weights, valid) of one spatial dim: one entry per tap, each shaped like coord."""
    lo, hi = (0.0, length - 1.0) if align else (-0.5, length - 0.5)
    if align:
        x = (coord + np.float32(1)) / np.float32(2) * np.float32(length - 1)
    else:
        x = ((coord + np.float32(1)) * np.float32(length) - np.float32(1)) / np.float32(2)
    if mode == "nearest":
        x = np.rint(x)
    outside = (x < lo) | (x > hi)
    if padding == "border" and mode != "cubic":
        x = np.where(outside, np.clip(x, 0, length - 1), x).astype(np.float32)
    elif padding == "reflection":
        x = np.where(outside, reflect(x, lo, hi), x).astype(np.float32)
    if mode == "nearest":
        starts, weights = [np.trunc(x)], [None]
    else:
        base = np.floor(x)
        t = (x - base).astype(np.float32)
        if mode == "linear":
            starts, weights = [base, base + 1], [np.float32(1) - t, t]
        else:
            starts, weights = [base - 1, base, base + 1, base + 2], cubic_weights(t)
    indices, valid = [], []
    for start in starts:
        # Finite coordinates only: NaN / inf positions read nothing (zeros) or the clamped edge.
        start = np.nan_to_num(start, nan=-1.0, posinf=length + 1.0, neginf=-2.0)
        index = np.clip(start, -2, length + 1).astype(np.int64)
        if padding == "zeros":
            valid.append((index >= 0) & (index < length))
            index = np.clip(index, 0, length - 1)
        elif padding == "border":
            valid.append(None)
            index = np.clip(index, 0, length - 1)
        else:
            valid.append(None)
            index = np.clip(np.trunc(reflect(index, lo, hi)).astype(np.int64), 0, length - 1)
        indices.append(index)
    return indices, weights, valid


@numpy_kernel("GridSample")
def grid_sample(ex, x, grid):
    out_shape = ex.step.output_specs[0].shape
    if int(np.prod(out_shape)) == 0:
        return np.zeros(out_shape, x.dtype)
    mode, padding, align = ex.attrs["mode"], ex.attrs["padding_mode"], bool(ex.attrs["align_corners"])
    rank = x.ndim - 2
    grid = grid.astype(np.float32, copy=False)
    # grid's last axis lists coordinates innermost dim (width) first.
    taps = [axis_taps(grid[..., rank - 1 - d], x.shape[2 + d], mode, padding, align) for d in range(rank)]
    channels_last = np.moveaxis(x, 1, -1)  # (N, d1..dr, C): one gather reads every channel
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * rank)

    def interpolate(d: int, index: tuple, mask):
        if d == rank:
            values = channels_last[(batch, *index)]
            return values if mask is None else np.where(mask[..., None], values, np.zeros((), x.dtype))
        indices, weights, valid = taps[d]
        total = None
        for tap, (i, w, v) in enumerate(zip(indices, weights, valid)):
            m = v if mask is None else (mask if v is None else mask & v)
            part = interpolate(d + 1, (*index, i), m)
            if w is not None:
                part = w[..., None].astype(x.dtype) * part
            total = part if tap == 0 else total + part
        return total

    with np.errstate(invalid="ignore", over="ignore"):
        result = interpolate(0, (), None)
    return np.moveaxis(result, -1, 1)


def base_coordinates(length: int, align: bool) -> np.ndarray:
    """Normalized positions of the pixel centers (or corners, with align_corners) of one dim."""
    if align:
        return np.full(1, -1.0) if length == 1 else -1.0 + np.arange(length) * (2.0 / (length - 1))
    step = 2.0 / length
    return -1.0 + step / 2 + np.arange(length) * step


@numpy_kernel("AffineGrid")
def affine_grid(ex, theta, size):
    dims = [int(d) for d in np.asarray(size).reshape(-1)[2:]]
    align = bool(ex.attrs["align_corners"])
    # Homogeneous positions (x, y[, z], 1), x along the last dim; in float64 like the reference.
    axes = [base_coordinates(d, align) for d in dims]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per dim, outermost first
    points = np.stack([*mesh[::-1], np.ones(dims)], axis=-1)  # (*dims, r + 1)
    grid = np.einsum("...k,njk->n...j", points, theta.astype(np.float64))
    return grid.astype(theta.dtype)


@numpy_kernel("Col2Im")
def col2im(ex, x, image_shape, block_shape):
    ctx = InferContext(ex.step.node, ex.attrs, ex.step.input_specs, [None, image_shape, block_shape])
    image, block, dilations, pads, strides, counts = col2im_geometry(ctx)
    r = len(image)
    n, c = x.shape[0], ex.step.output_specs[0].shape[1]
    cols = x.reshape(n, c, *block, *counts)
    padded = np.zeros((n, c, *(image[i] + pads[i] + pads[i + r] for i in range(r))), x.dtype)
    # Each kernel tap adds one strided lattice of the image: the blocks' values for that tap.
    for tap in itertools.product(*(range(b) for b in block)):
        window = tuple(slice(t * d, t * d + s * (k - 1) + 1, s) for t, d, s, k in zip(tap, dilations, strides, counts))
        padded[(slice(None), slice(None), *window)] += cols[(slice(None), slice(None), *tap)]
    return padded[(slice(None), slice(None), *(slice(pads[i], pads[i] + image[i]) for i in range(r)))]
