"""Softmax family on numpy: softmax, logsoftmax, hardmax over one axis (or, with legacy_flatten,
over every axis from `axis` on)."""
from __future__ import annotations

import functools

import numpy as np

from .kernel import numpy_kernel

# Rows of at most this many elements along the last axis get their maximum through a transposed
# copy (_max): numpy's row-wise reduction walks a short row element by element. 16384 rows, per
# call: 8 long 0.07 against 0.98 ms, 10 long 0.06 against 0.77, 32 long 0.11 against 0.38; 64
# long 0.15 against 0.20 (a power of two: the transposing copy's accesses alias), 100 long 0.08
# against 0.08, 128 to 512 long 0.16 against 0.11-0.04.
SHORT_ROW = 32


def _max(x: np.ndarray, axis: int, scratch: np.ndarray | None) -> np.ndarray:
    """x's maximum over axis (keepdims). Over a last axis of SHORT_ROW or fewer elements (and 64
    rows or more), through a transposed copy into scratch (contiguous, x's dtype and size, not
    overlapping x) reduced over its first axis, which numpy runs as whole-row maxima."""
    length = x.shape[-1]
    rows = x.size // length
    if axis != x.ndim - 1 or length > SHORT_ROW or rows < 64 or scratch is None:
        return np.max(x, axis=axis, keepdims=True)
    columns = scratch.reshape(length, rows)
    np.copyto(columns, x.reshape(rows, length).T)
    return np.maximum.reduce(columns, axis=0).reshape(*x.shape[:-1], 1)


# Last axes up to this long are summed by BLAS (_sum); longer rows by numpy's own vectorized sum.
BLAS_SUM_ROW = 4096


def _sum(y: np.ndarray, axis: int) -> np.ndarray:
    """y's sum over axis (keepdims). Over a last axis of up to BLAS_SUM_ROW elements of a
    contiguous float32 or float64 array, a BLAS matrix-vector product with ones (2048 rows of 64:
    7 against 51 us; 8732 rows of 21: 20 against 190 us; numpy's row-wise reduction walks each row
    element by element)."""
    if (axis != y.ndim - 1 or y.shape[-1] > BLAS_SUM_ROW or y.dtype not in (np.float32, np.float64)
            or not y.flags.c_contiguous):
        return np.sum(y, axis=axis, keepdims=True)
    length = y.shape[-1]
    return (y.reshape(-1, length) @ _ones(length, y.dtype)).reshape(*y.shape[:-1], 1)


@functools.lru_cache(maxsize=32)
def _ones(length: int, dtype: np.dtype) -> np.ndarray:
    """A read-only vector of ones, kept: a long row's would be a fresh mapping on every run."""
    ones = np.ones(length, dtype)
    ones.flags.writeable = False
    return ones


def _scratch(x: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
    """out as the scratch of _max, where it can be: x's dtype, contiguous, apart from x."""
    if out is None or out.dtype != x.dtype or not out.flags.c_contiguous or np.may_share_memory(x, out):
        return None
    return out


def _softmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """exp(x - max) / sum, in one array (out when given): the same operations as the whole-array
    expression, which made three arrays of x's size."""
    # Subtracting the maximum keeps exp() in range whatever the magnitude of x.
    y = np.subtract(x, _max(x, axis, _scratch(x, out)), out=out)
    np.exp(y, out=y)
    y /= _sum(y, axis)
    return y


def _logsoftmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    shifted = np.subtract(x, _max(x, axis, _scratch(x, out)), out=out)
    shifted -= np.log(_sum(np.exp(shifted), axis))
    return shifted


def _hardmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    # One-hot of the first maximum along the axis.
    y = np.zeros_like(x) if out is None else out
    if out is not None:
        y.fill(0)
    np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y


SOFTMAX_FUNCS = {"softmax": _softmax, "logsoftmax": _logsoftmax, "hardmax": _hardmax}


def apply_softmax(kind: str, x: np.ndarray, axis: int, legacy_flatten: bool = False,
                  out: np.ndarray | None = None) -> np.ndarray:
    """The softmax of x, written to out when given (out must not overlap x, and be contiguous
    with legacy_flatten's matrix view)."""
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:
        x1 = x.reshape(1)
        return SOFTMAX_FUNCS[kind](x1, 0, None if out is None else out.reshape(1)).reshape(())
    axis = axis % x.ndim
    if legacy_flatten:
        # Opset < 13: the input is seen as a matrix [prod(shape[:axis]), prod(shape[axis:])].
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        matrix = None if out is None else out.reshape(outer, -1)
        return SOFTMAX_FUNCS[kind](x.reshape(outer, -1), 1, matrix).reshape(x.shape)
    return SOFTMAX_FUNCS[kind](x, axis, out)


@numpy_kernel("Softmax", writes_outputs=True)
def softmax(ex, inputs, outputs):
    x, out = inputs[0], outputs[0]
    # In the output itself where it can be (same type, contiguous for the reshaped views).
    direct = out.dtype == x.dtype and out.flags.c_contiguous and not np.may_share_memory(x, out)
    with np.errstate(over="ignore", under="ignore"):
        y = apply_softmax(ex.attrs["kind"], x, ex.attrs["axis"], bool(ex.attrs["legacy_flatten"]),
                          out if direct else None)
    if not direct:  # direct: written there (an empty x has nothing to write)
        np.copyto(out, y, casting="unsafe")
