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


# Past this many elements per selected one, TopK partitions instead of sorting whole rows.
PARTITION_RATIO = 4


def topk_rows(rows: np.ndarray, k: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row of a 2-D array and their column indices, in topk_order's order (best
    first, equal values lower index first, NaN the largest value): a partition finds each row's
    k-th value, the rows' elements better than it and the first of those equal to it make k, and
    only those k are sorted. O(n) per row against the whole sort's O(n log n): a 32000-element row
    (an LLM's vocabulary), k = 50: 0.29 against 2.57 ms."""
    n = rows.shape[1]
    kth = n - k if largest else k - 1
    threshold = np.partition(rows, kth, axis=1)[:, kth, None]
    if rows.dtype.kind == "f":  # partition puts NaN last, as sort does: compare it apart
        nan, nan_threshold = np.isnan(rows), np.isnan(threshold)
        if largest:  # NaN ranks above every number
            better = (rows > threshold) | nan
            better &= ~nan_threshold
        else:  # and so after every number here
            better = np.where(nan_threshold, ~nan, rows < threshold)
        equal = np.where(nan_threshold, nan, rows == threshold)
    else:
        better = rows > threshold if largest else rows < threshold
        equal = rows == threshold
    missing = k - np.count_nonzero(better, axis=1)
    taken = better | (equal & (np.cumsum(equal, axis=1, dtype=np.int32) <= missing[:, None]))
    index = np.nonzero(taken)[1].reshape(rows.shape[0], k)  # k per row, in column order
    values = np.take_along_axis(rows, index, axis=1)
    order = topk_order(values, 1, largest)  # stable: ties stay in column order
    return np.take_along_axis(values, order, axis=1), np.take_along_axis(index, order, axis=1)


@numpy_kernel("TopK")
def topk(ex, x, k):
    axis = ex.attrs["axis"] % x.ndim
    count = ex.step.output_specs[0].shape[axis]
    largest = bool(ex.attrs["largest"])
    if count and x.size and x.shape[axis] >= PARTITION_RATIO * count:
        moved = np.moveaxis(x, axis, -1)
        values, indices = topk_rows(moved.reshape(-1, moved.shape[-1]), count, largest)
        shape = (*moved.shape[:-1], count)
        return (np.moveaxis(values.reshape(shape), -1, axis),
                np.moveaxis(indices.reshape(shape), -1, axis).astype(np.int64))
    order = topk_order(x, axis, largest)
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
