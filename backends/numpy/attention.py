"""Attention on numpy: the scores, softmax and context products of engine/ops/attention.py, as the
MatMul and Softmax kernels would compute them one after the other."""
from __future__ import annotations

import numpy as np

from .kernel import numpy_kernel
from .softmax import apply_softmax


def operand(x: np.ndarray, perm: list[int], trans: int) -> np.ndarray:
    """A view of x as the product reads it."""
    if perm:
        x = np.transpose(x, perm)
    return np.swapaxes(x, -1, -2) if trans else x


@numpy_kernel("Attention")
def attention(ex, q, k, v, mask=None):
    attrs = ex.attrs
    scores = np.matmul(operand(q, attrs["perm_q"], attrs["trans_q"]), operand(k, attrs["perm_k"], attrs["trans_k"]))
    if attrs["alpha"] != 1.0:
        scores *= scores.dtype.type(attrs["alpha"])
    if mask is not None:
        scores += mask if attrs["beta"] == 1.0 else mask * mask.dtype.type(attrs["beta"])
    with np.errstate(over="ignore", under="ignore"):
        probs = apply_softmax("softmax", scores, -1, out=scores)  # in place: scores is this call's own
    y = np.matmul(probs, operand(v, attrs["perm_v"], attrs["trans_v"]))
    return np.transpose(y, attrs["perm_y"]) if attrs["perm_y"] else y
