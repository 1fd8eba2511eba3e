"""Pool family on numpy: a strided window view of the padded input, reduced tap by tap.

Lp pooling sums |x|^p (padding contributes 0) and takes the p-th root. Max pooling with indices
keeps, per output, the first tap holding the window's maximum (strictly greater replaces: the
ONNX reference and onnxruntime pick the first in row-major tap order) and turns it into a flat
input position.

Average pooling divides by a per-axis count (a window is a box, so its count of counted elements
is the product of per-axis counts): with count_include_pad the padding up to the declared border
counts, never the extra room ceil_mode adds past it.
"""
from __future__ import annotations

import numpy as np

from ...engine.errors import InputError
from ...engine.ops.pool import pool_geometry
from .conv import infer_context, pad_spatial, window_view
from .kernel import numpy_kernel


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _divisor(sizes, kernel, strides, dilations, begin, end, out, include_pad: bool) -> np.ndarray:
    """Number of counted elements in each window, shape (*out)."""
    divisor = np.ones((), np.int64)
    per_axis = zip(sizes, kernel, strides, dilations, begin, end, out, strict=True)
    for axis, (n, k, s, d, b, e, o) in enumerate(per_axis):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - b  # input index of each tap
        low, high = (-b, n + e) if include_pad else (0, n)
        count = ((pos >= low) & (pos < high)).sum(axis=1)
        divisor = divisor[..., None] * count.reshape((1,) * axis + (o,))
    return np.maximum(divisor, 1)


def _plan(ex):
    plan = ex.state.get("plan")
    if plan is None:
        kernel, strides, dilations, begin, end, out = pool_geometry(infer_context(ex))
        sizes = ex.step.input_specs[0].shape[2:]
        # ceil_mode may need room past the declared end padding for the last, partial window.
        end_room = [max(e, (o - 1) * s + (k - 1) * d + 1 - n - b)
                    for n, k, s, d, b, e, o in zip(sizes, kernel, strides, dilations, begin, end, out, strict=True)]
        divisor = None
        if ex.attrs["kind"] == "avg":
            divisor = _divisor(sizes, kernel, strides, dilations, begin, end, out,
                               bool(ex.attrs["count_include_pad"]))
        plan = ex.state["plan"] = (kernel, strides, dilations, begin, end_room, out, divisor)
    return plan


def _lp_term(v: np.ndarray, p: float) -> np.ndarray:
    if p == 1:
        return np.abs(v)
    if p == 2:
        return v * v
    return np.abs(v) ** p


def _lp_root(total: np.ndarray, p: float) -> np.ndarray:
    if p == 1:
        return total
    return np.sqrt(total) if p == 2 else total ** (1 / p)


def _flat_positions(ex, x_shape, kernel, strides, dilations, begin, out, best_tap) -> np.ndarray:
    """Flat input index of each output's chosen tap: (n * C + c) * prod(spatial) plus the spatial
    position, row-major (storage_order 0) or with the first spatial axis fastest (1)."""
    sizes = x_shape[2:]
    rank = len(sizes)
    taps = np.unravel_index(best_tap, kernel)
    order = range(rank) if ex.attrs["storage_order"] else reversed(range(rank))
    flat = np.zeros(best_tap.shape, np.int64)
    step = 1
    for axis in order:  # accumulate coordinate * stride, fastest axis first
        o = np.arange(out[axis]).reshape((-1,) + (1,) * (rank - 1 - axis))
        flat += (o * strides[axis] - begin[axis] + taps[axis] * dilations[axis]) * step
        step *= sizes[axis]
    planes = np.arange(x_shape[0] * x_shape[1], dtype=np.int64).reshape(x_shape[:2] + (1,) * rank)
    return flat + planes * step


def _inside(sizes, out, strides, dilations, begin, tap) -> np.ndarray:
    """Whether the tap of each output window lies in the input (not in padding), shape (*out)."""
    inside = np.ones((), bool)
    for n, o, s, d, b, t in zip(sizes, out, strides, dilations, begin, tap, strict=True):
        pos = np.arange(o) * s - b + t * d
        inside = inside[..., None] & ((pos >= 0) & (pos < n))
    return inside


def _max_with_indices(ex, x_shape, view, kernel, strides, dilations, begin, out):
    """Maximum and flat input index per window: the first tap inside the input, then any tap
    strictly greater (padding never wins, even over -inf or NaN inputs). A window with no tap
    inside the input (dilated taps can all miss it) gives the lowest value and index -1."""
    y = np.full(view.shape[:-len(kernel)], _lowest(view.dtype), view.dtype)
    found = np.zeros(y.shape, bool)
    best = np.zeros(y.shape, np.int64)
    for number, tap in enumerate(np.ndindex(*kernel)):
        v = view[(Ellipsis, *tap)]
        take = _inside(x_shape[2:], out, strides, dilations, begin, tap) & (~found | (v > y))
        y = np.where(take, v, y)
        best[take] = number
        found |= take
    return y, np.where(found, _flat_positions(ex, x_shape, kernel, strides, dilations, begin, out, best), -1)


@numpy_kernel("Pool")
def pool(ex, x):
    """Reduce the window view one kernel tap at a time: each step is one vectorised op over all
    output pixels (reducing the view's kernel axes directly is ~40x slower in numpy)."""
    kernel, strides, dilations, begin, end_room, out, divisor = _plan(ex)
    kind = ex.attrs["kind"]
    fill = _lowest(x.dtype) if kind == "max" else 0
    view = window_view(pad_spatial(x, begin, end_room, fill), out, kernel, strides, dilations)
    taps = np.ndindex(*kernel)
    if kind == "max" and len(ex.step.output_specs) > 1:
        return _max_with_indices(ex, x.shape, view, kernel, strides, dilations, begin, out)
    if kind == "max":
        y = view[(Ellipsis, *next(taps))].copy()
        for tap in taps:
            np.maximum(y, view[(Ellipsis, *tap)], out=y)
        return y
    if kind == "lp":
        p = ex.attrs["p"]
        work = np.promote_types(x.dtype, np.float32)
        y = np.zeros(view.shape[:-len(kernel)], work)
        for tap in taps:
            y += _lp_term(view[(Ellipsis, *tap)].astype(work, copy=False), p)
        return _lp_root(y, p).astype(x.dtype, copy=False)
    # Accumulate in at least float32 (float16 sums of large windows lose precision).
    y = np.zeros(view.shape[:-len(kernel)], np.promote_types(x.dtype, np.float32))
    for tap in taps:
        y += view[(Ellipsis, *tap)]
    y /= divisor
    return y.astype(x.dtype, copy=False)


@numpy_kernel("GlobalPool")
def global_pool(ex, x):
    axes = tuple(range(2, x.ndim))
    if ex.attrs["kind"] == "max":
        return x.max(axis=axes, keepdims=True)
    return x.mean(axis=axes, keepdims=True, dtype=np.promote_types(x.dtype, np.float32)).astype(x.dtype)


@numpy_kernel("MaxUnpool")
def max_unpool(ex, x, indices, output_shape=None):
    shape = ex.step.output_specs[0].shape
    size = int(np.prod(shape, dtype=np.int64))
    flat = indices.reshape(-1).astype(np.int64, copy=False)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        bad = flat[(flat < 0) | (flat >= size)][0]
        raise InputError(f"{ex.step.label}: index {bad} is outside the output's {size} elements {list(shape)}")
    y = np.zeros(size, x.dtype)
    y[flat] = x.reshape(-1)
    return y.reshape(shape)
