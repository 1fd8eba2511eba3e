"""Softmax family on numpy: softmax, logsoftmax, hardmax over one axis (or, with legacy_flatten,
over every axis from `axis` on)."""
from __future__ import annotations

import numpy as np

from .kernel import numpy_kernel


def _softmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """exp(x - max) / sum, in one array (out when given): the same operations as the whole-array
    expression, which made three arrays of x's size."""
    # Subtracting the maximum keeps exp() in range whatever the magnitude of x.
    y = np.subtract(x, np.max(x, axis=axis, keepdims=True), out=out)
    np.exp(y, out=y)
    y /= np.sum(y, axis=axis, keepdims=True)
    return y


def _logsoftmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    shifted = np.subtract(x, np.max(x, axis=axis, keepdims=True), out=out)
    shifted -= np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
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
