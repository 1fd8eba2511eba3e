"""The numpy twin of the GPU image preprocessing (wgnn.image): the reference the WGSL kernel is
tested against. Vectorised over the batch and every output pixel; float64 after the float32
sampling positions (which both providers compute identically)."""
from __future__ import annotations

import numpy as np


def sampling_positions(plan) -> tuple[np.ndarray, np.ndarray]:
    """(sx, sy), each (out_h, out_w) float32: one float32 addition of the tabulated terms, as the
    shader computes them."""
    w, h, t = plan.out_w, plan.out_h, plan.table
    sx = t[:w][None, :] + t[2 * w:2 * w + h][:, None]
    sy = t[w:2 * w][None, :] + t[2 * w + h:][:, None]
    return sx, sy


def _gather(plan, images: np.ndarray, ix: np.ndarray, iy: np.ndarray) -> np.ndarray:
    """Source pixels at integer positions (out_h, out_w) -> (N, out_h, out_w, C) float64, with the
    plan's border rule for positions outside the image."""
    xi = np.clip(ix, 0, plan.in_w - 1)
    yi = np.clip(iy, 0, plan.in_h - 1)
    values = images[:, yi, xi, :].astype(np.float64)
    if plan.constant_border:
        inside = (ix >= 0) & (ix < plan.in_w) & (iy >= 0) & (iy < plan.in_h)
        values *= inside[None, :, :, None]
    return values


def preprocess_numpy(plan, images: np.ndarray) -> np.ndarray:
    """images (N, H, W, C) uint8 -> the plan's output array (float32)."""
    sx, sy = sampling_positions(plan)
    # Far-outside positions are clamped to just outside the image: same result, safe int conversion.
    fx0 = np.clip(np.floor(sx), -2, plan.in_w + 1)
    fy0 = np.clip(np.floor(sy), -2, plan.in_h + 1)
    x0, y0 = fx0.astype(np.int64), fy0.astype(np.int64)
    if plan.nearest:  # the table already holds s + 0.5
        values = _gather(plan, images, x0, y0)
    else:
        fx = (sx - np.floor(sx)).astype(np.float64)[None, :, :, None]
        fy = (sy - np.floor(sy)).astype(np.float64)[None, :, :, None]
        top = _gather(plan, images, x0, y0) * (1 - fx) + _gather(plan, images, x0 + 1, y0) * fx
        bottom = _gather(plan, images, x0, y0 + 1) * (1 - fx) + _gather(plan, images, x0 + 1, y0 + 1) * fx
        values = top * (1 - fy) + bottom * fy
    converted = values @ plan.colour.T  # (N, h, w, out_c)
    normalised = (converted * plan.scale - plan.mean) / plan.std
    if plan.layout == "nhwc":
        return normalised.astype(np.float32)
    if plan.layout == "nchw":
        return np.ascontiguousarray(normalised.transpose(0, 3, 1, 2), dtype=np.float32)
    packed = np.zeros(plan.out_shape, np.float32)  # nc4hw4 with one channel block (at most 4 channels)
    packed[:, 0, :, :, :plan.out_c] = normalised
    return packed
