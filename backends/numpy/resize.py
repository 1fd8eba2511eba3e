"""Resize on numpy, separable: each resampled axis gets an (index, weight) table of shape
(out_len, taps), built once per resize, and is applied with np.take + a weighted sum over taps."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...engine.ops.resize import AxisResize, normalize_values, plan_resize
from .kernel import numpy_kernel


@dataclass
class AxisTable:
    axis: int
    index: np.ndarray  # (out_len, taps) intp, already clamped into [0, in_len)
    weight: np.ndarray | None  # (out_len, taps) float64; None = plain gather (nearest)
    outside: np.ndarray | None  # (out_len,) bool: tf_crop_and_resize extrapolated positions


def source_coordinates(attrs: dict, step: AxisResize) -> np.ndarray:
    """x_original (float64) of every output position along one axis."""
    mode = attrs["coordinate_transformation_mode"]
    n, scale = step.in_len, step.scale
    y = np.arange(step.out_len, dtype=np.float64)
    width = scale * n  # the fractional output width, as onnx.reference uses it
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        # Centres the sampled window when floor(width) cut the output short.
        offset = n / 2 * (1 - step.out_len / width)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros_like(y) if width == 1 else y * (n - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    # tf_crop_and_resize. start/end keep the roi's type (float32 usually), so (end - start) and
    # start * (n - 1) round in that type, exactly as onnx.reference computes them.
    start, end = step.roi
    if width == 1:
        return np.full_like(y, (end - start) * (n - 1) / 2 + start * (n - 1))
    return y * (end - start) * (n - 1) / (width - 1) + start * (n - 1)


def _nearest_index(attrs: dict, x: np.ndarray, scale: float) -> np.ndarray:
    base = np.floor(x)
    frac = x - base
    rule = attrs["nearest_mode"]
    if rule == "round_prefer_floor":
        up = frac > 0.5
    elif rule == "round_prefer_ceil":
        up = frac >= 0.5
    elif rule == "floor":
        up = np.zeros_like(frac, dtype=bool)
    elif rule == "ceil":
        up = frac > 0
    else:  # simple: ceil when downsampling, truncate otherwise
        return (np.ceil(x) if scale < 1 else np.trunc(x)).astype(np.int64)
    return (base + up).astype(np.int64)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter a."""
    t = np.abs(t)
    inner = ((a + 2) * t - (a + 3)) * t * t + 1
    outer = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, inner, np.where(t < 2, outer, 0.0))


def _filter_taps(attrs: dict, x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices and weights of linear / cubic interpolation (stretched by 1/scale with antialias)."""
    cubic = attrs["mode"] == "cubic"
    radius = 2 if cubic else 1
    # Antialias widens the filter when downsampling, so every input element contributes.
    stretch = min(scale, 1.0) if attrs["antialias"] else 1.0
    first = math.floor(-radius / stretch) + 1
    offsets = np.arange(first, 1 - first + 1)
    index = np.floor(x).astype(np.int64)[:, None] + offsets[None, :]
    t = (index - x[:, None]) * stretch
    weight = _cubic(t, attrs["cubic_coeff_a"]) if cubic else np.maximum(0.0, 1 - np.abs(t))
    if attrs["antialias"]:
        weight = weight / weight.sum(axis=1, keepdims=True)
    return index, weight


def axis_table(attrs: dict, step: AxisResize) -> AxisTable:
    """The (index, weight) table of one resampled axis."""
    x = source_coordinates(attrs, step)
    if attrs["mode"] == "nearest":
        index = _nearest_index(attrs, x, step.scale)[:, None]
        weight = np.ones(index.shape)
    else:
        index, weight = _filter_taps(attrs, x, step.scale)
    if attrs["exclude_outside"]:
        weight = np.where((index < 0) | (index >= step.in_len), 0.0, weight)
        total = weight.sum(axis=1, keepdims=True)
        weight = weight / np.where(total == 0, 1.0, total)
    if attrs["mode"] == "nearest" and np.all(weight == 1):
        weight = None
    outside = None
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = (x < 0) | (x > step.in_len - 1)
        if not outside.any():
            outside = None
    # Indices past the edges read the edge element (ONNX pads by replicating the border).
    index = np.clip(index, 0, step.in_len - 1).astype(np.intp)
    return AxisTable(step.axis, index, weight, outside)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    if dtype == np.float64 or not np.issubdtype(dtype, np.floating):
        return np.dtype(np.float64)  # integers are rounded once at the end, from float64
    return np.dtype(np.float32)


def apply_table(data: np.ndarray, table: AxisTable, extrapolation_value: float) -> np.ndarray:
    axis = table.axis
    if table.weight is None:
        result = np.take(data, table.index[:, 0], axis=axis)
    else:
        dtype = _compute_dtype(data.dtype)
        data = data.astype(dtype, copy=False)
        weight = table.weight.astype(dtype)
        bshape = (-1,) + (1,) * (data.ndim - axis - 1)  # weights broadcast along the resampled axis
        result = np.take(data, table.index[:, 0], axis=axis) * weight[:, 0].reshape(bshape)
        for tap in range(1, table.index.shape[1]):
            result += np.take(data, table.index[:, tap], axis=axis) * weight[:, tap].reshape(bshape)
    if table.outside is not None:
        mask = table.outside.reshape((-1,) + (1,) * (data.ndim - axis - 1))
        result = np.where(mask, np.asarray(extrapolation_value).astype(result.dtype), result)
    return result


def _to_dtype(result: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if result.dtype == dtype:
        return result
    if np.issubdtype(dtype, np.integer):
        # Interpolated integers round to nearest and saturate, as onnx.reference does.
        info = np.iinfo(dtype)
        return np.clip(np.round(result), info.min, info.max).astype(dtype)
    return result.astype(dtype)


def _prepare(ex, x, roi, scales, sizes) -> dict:
    # roi / scales / sizes are known at resize (shape inference needed them), so they are the same
    # on every run of this execution.
    arrays = normalize_values(roi, scales, sizes)

    def fail(message: str) -> Exception:
        return ValueError(f"{ex.step.label}: {message}")

    out_shape, plan = plan_resize(ex.attrs, tuple(x.shape), *arrays, fail)
    # Shrinking axes first leaves less data for the axes after them.
    plan = sorted(plan, key=lambda s: s.out_len / s.in_len)
    return {"shape": out_shape, "tables": [axis_table(ex.attrs, s) for s in plan]}


@numpy_kernel("Resize")
def resize(ex, x, roi=None, scales=None, sizes=None):
    state = ex.state
    if "tables" not in state:  # built once per resize: the sampling grid depends on shapes only
        state.update(_prepare(ex, x, roi, scales, sizes))
    if 0 in state["shape"]:
        return np.empty(state["shape"], x.dtype)
    result = x
    for table in state["tables"]:
        result = apply_table(result, table, ex.attrs["extrapolation_value"])
    return _to_dtype(result, x.dtype)
