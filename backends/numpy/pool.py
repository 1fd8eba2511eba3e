"""Pool family on numpy: a strided window view of the padded input, reduced tap by tap.

Average pooling divides by a per-axis count (a window is a box, so its count of counted elements
is the product of per-axis counts): with count_include_pad the padding up to the declared border
counts, never the extra room ceil_mode adds past it.
"""
from __future__ import annotations

import numpy as np

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


@numpy_kernel("Pool")
def pool(ex, x):
    """Reduce the window view one kernel tap at a time: each step is one vectorised op over all
    output pixels (reducing the view's kernel axes directly is ~40x slower in numpy)."""
    kernel, strides, dilations, begin, end_room, out, divisor = _plan(ex)
    is_max = ex.attrs["kind"] == "max"
    fill = _lowest(x.dtype) if is_max else 0
    view = window_view(pad_spatial(x, begin, end_room, fill), out, kernel, strides, dilations)
    taps = np.ndindex(*kernel)
    if is_max:
        y = view[(Ellipsis, *next(taps))].copy()
        for tap in taps:
            np.maximum(y, view[(Ellipsis, *tap)], out=y)
        return y
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
