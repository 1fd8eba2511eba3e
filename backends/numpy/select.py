"""Select family on numpy: TopK, NonZero, Compress, NonMaxSuppression and Einsum."""
from __future__ import annotations

import numpy as np

from ...engine.ops.select import non_max_suppression
from .kernel import numpy_kernel


def topk_order(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Indices along axis that sort x best first, equal values keeping the lower index first
    (NaN counts as the largest value, as in numpy's sort)."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")
    # A stable ascending sort of the reversed axis puts equal values' higher original index first;
    # reading it backwards gives descending values with the lower index first (no negation, so
    # integer minimums cannot overflow).
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return x.shape[axis] - 1 - np.flip(flipped, axis)


@numpy_kernel("TopK")
def topk(ex, x, k):
    axis = ex.attrs["axis"] % x.ndim
    count = ex.step.output_specs[0].shape[axis]
    order = topk_order(x, axis, bool(ex.attrs["largest"]))
    indices = np.take(order, np.arange(count), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)


@numpy_kernel("NonZero")
def non_zero(ex, x):
    if x.ndim == 0:  # a scalar has no coordinates: (0, 1) or (0, 0)
        return np.zeros((0, int(np.count_nonzero(x))), np.int64)
    return np.stack(np.nonzero(x)).astype(np.int64)


@numpy_kernel("Compress")
def compress(ex, x, condition):
    axis = ex.attrs["axis"]
    length = x.size if axis is None else x.shape[axis]
    return np.compress(np.asarray(condition, bool)[:length], x, axis=axis)


def _scalar(value, default, cast):
    if value is None or np.size(value) == 0:
        return default
    return cast(np.asarray(value).reshape(-1)[0])


@numpy_kernel("NonMaxSuppression")
def nms(ex, boxes, scores, max_boxes=None, iou_threshold=None, score_threshold=None):
    return non_max_suppression(boxes, scores, _scalar(max_boxes, 0, int), _scalar(iou_threshold, 0.0, float),
                               _scalar(score_threshold, None, float), ex.attrs["center_point_box"])


@numpy_kernel("Einsum")
def einsum(ex, *operands):
    # optimize=True contracts pairwise through BLAS (tensordot) in a good order.
    return np.einsum(ex.attrs["equation"], *operands, optimize=len(operands) > 1)
