"""Softmax family on numpy: softmax, logsoftmax, hardmax over one axis (or, with legacy_flatten,
over every axis from `axis` on)."""
from __future__ import annotations

import numpy as np

from .kernel import numpy_kernel


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    # Subtracting the maximum keeps exp() in range whatever the magnitude of x.
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _logsoftmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    # One-hot of the first maximum along the axis.
    y = np.zeros_like(x)
    np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y


SOFTMAX_FUNCS = {"softmax": _softmax, "logsoftmax": _logsoftmax, "hardmax": _hardmax}


def apply_softmax(kind: str, x: np.ndarray, axis: int, legacy_flatten: bool = False) -> np.ndarray:
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:
        x1 = x.reshape(1)
        return SOFTMAX_FUNCS[kind](x1, 0).reshape(())
    axis = axis % x.ndim
    if legacy_flatten:
        # Opset < 13: the input is seen as a matrix [prod(shape[:axis]), prod(shape[axis:])].
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        return SOFTMAX_FUNCS[kind](x.reshape(outer, -1), 1).reshape(x.shape)
    return SOFTMAX_FUNCS[kind](x, axis)


@numpy_kernel("Softmax")
def softmax(ex, x):
    with np.errstate(over="ignore", under="ignore"):
        return apply_softmax(ex.attrs["kind"], x, ex.attrs["axis"], bool(ex.attrs["legacy_flatten"]))
