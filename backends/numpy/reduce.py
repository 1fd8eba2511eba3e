"""Reduce family on numpy: Reduce (kinds in REDUCE_FUNCS) and ArgReduce."""
from __future__ import annotations

import numpy as np

from ...engine.ops.reduce import reduced_axes, reduced_shape
from .kernel import numpy_kernel


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    # Subtract the largest finite element so exp cannot overflow; infinite elements stay out of
    # the shift (an +inf element then gives +inf, as it should).
    finite = np.where(np.isfinite(x), x, np.array(-np.inf, x.dtype))
    shift = np.max(finite, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, np.zeros((), x.dtype))
    total = np.sum(np.exp(x - shift), axis=axes, keepdims=True, dtype=x.dtype)
    result = np.log(total) + shift
    return result if keepdims else np.squeeze(result, axis=axes)


REDUCE_FUNCS = {
    "sum": lambda x, axes, keep: np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype),
    # Integer means truncate toward zero (sum in the input type, then divide), like onnx.reference.
    "mean": lambda x, axes, keep: np.mean(x, axis=axes, keepdims=keep, dtype=x.dtype),
    "max": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep),
    "min": lambda x, axes, keep: np.min(x, axis=axes, keepdims=keep),
    "prod": lambda x, axes, keep: np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype),
    "l1": lambda x, axes, keep: np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype),
    "l2": lambda x, axes, keep: np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype)),
    "sum_square": lambda x, axes, keep: np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype),
    "log_sum": lambda x, axes, keep: np.log(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)),
    "log_sum_exp": _log_sum_exp,
}


def _empty_identity(kind: str, dtype: np.dtype):
    """What a reduction over no elements gives (onnx.reference's values)."""
    if kind in ("max", "min"):
        sign = 1 if kind == "min" else -1
        if dtype == np.bool_:
            return kind == "min"
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return info.max if kind == "min" else info.min
        return sign * np.inf
    if kind == "prod":
        return 1
    if kind in ("log_sum", "log_sum_exp"):
        return -np.inf
    if kind == "mean":
        return np.nan if np.issubdtype(dtype, np.inexact) else 0
    return 0


def apply_reduce(kind: str, x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.size == 0:
        # numpy's max/min refuse empty reductions; the others would warn (mean) or be right anyway.
        shape = reduced_shape(x.shape, axes, keepdims)
        return np.full(shape, _empty_identity(kind, x.dtype), dtype=x.dtype)
    return REDUCE_FUNCS[kind](x, axes, keepdims)


@numpy_kernel("Reduce")
def reduce(ex, x):
    axes = reduced_axes(ex.attrs, x.ndim)
    with np.errstate(all="ignore"):
        return apply_reduce(ex.attrs["kind"], x, axes, bool(ex.attrs["keepdims"]))


@numpy_kernel("ArgReduce")
def arg_reduce(ex, x):
    axis = ex.attrs["axis"] % x.ndim
    find = np.argmax if ex.attrs["kind"] == "max" else np.argmin
    keepdims = bool(ex.attrs["keepdims"])
    if ex.attrs["select_last_index"]:
        # numpy returns the first extreme; search the reversed axis and map the index back.
        return x.shape[axis] - 1 - find(np.flip(x, axis), axis=axis, keepdims=keepdims)
    return find(x, axis=axis, keepdims=keepdims)
