"""Attention on numpy: the scores, softmax and context products of engine/ops/attention.py, as the
MatMul and Softmax kernels would compute them one after the other; small ones (a few tokens) as
one compiled loop where numba runs (backends/numpy/compiled.py)."""
from __future__ import annotations

import math

import numpy as np

from . import compiled
from .kernel import numpy_kernel
from .softmax import apply_softmax

# Attention of up to this many multiply-adds (scores x (head size + value size)) goes through the
# compiled loop where numba runs: one call where numpy makes about ten, but scalar arithmetic and
# exp. Against the numpy path (float32, us): 4 scores x 16 10.0 / 15.3, 256 x 16 12.9 / 19.3,
# 512 x 16 16.5 / 23.1, 512 x 32 21.0 / 21.4, 576 x 32 23.0 / 22.2, 1024 x 32 32.9 / 23.6.
SMALL_ATTENTION = 8192


def operand(x: np.ndarray, perm: list[int], trans: int) -> np.ndarray:
    """A view of x as the product reads it."""
    if perm:
        x = np.transpose(x, perm)
    return np.swapaxes(x, -1, -2) if trans else x


def _compiled_operands(q, k, v, mask):
    """(q, k, v, mask) as compiled_loops.attention_rows takes them, 4-D with one batch shape, the
    mask broadcast to the scores' shape (size 0: none); None where it does not run: numba missing
    or off, not float32 / float64 throughout, batch shapes that broadcast, more than 4 axes, or
    work past SMALL_ATTENTION (there the products' BLAS and numpy's vectorized exp are faster)."""
    dtype = q.dtype
    if (q.ndim != k.ndim or q.ndim != v.ndim or not 2 <= q.ndim <= 4 or dtype not in (np.float32, np.float64)
            or k.dtype != dtype or v.dtype != dtype or (mask is not None and mask.dtype != dtype)
            or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return None
    scores_shape = (*q.shape[:-1], k.shape[-1])
    if math.prod(scores_shape) * (q.shape[-1] + v.shape[-1]) > SMALL_ATTENTION or not compiled.enabled():
        return None
    lead = (None,) * (4 - q.ndim)
    if mask is None:
        mask = np.empty((0, 0, 0, 0), dtype)
    else:
        try:
            mask = np.broadcast_to(mask, scores_shape)[lead]
        except ValueError:
            return None
    return q[lead], k[lead], v[lead], mask


@numpy_kernel("Attention")
def attention(ex, q, k, v, mask=None):
    attrs = ex.attrs
    q, k = operand(q, attrs["perm_q"], attrs["trans_q"]), operand(k, attrs["perm_k"], attrs["trans_k"])
    v = operand(v, attrs["perm_v"], attrs["trans_v"])
    operands = _compiled_operands(q, k, v, mask)
    if operands is not None:
        q4, k4, v4, mask4 = operands
        y4 = np.empty((*q4.shape[:-1], v4.shape[-1]), q.dtype)
        compiled.loops().attention_rows(q4, k4, v4, mask4, attrs["alpha"], attrs["beta"],
                                        np.empty(k4.shape[-1], np.float64), y4)
        y = y4.reshape(y4.shape[4 - q.ndim:])
        return np.transpose(y, attrs["perm_y"]) if attrs["perm_y"] else y
    scores = np.matmul(q, k)
    if attrs["alpha"] != 1.0:
        scores *= scores.dtype.type(attrs["alpha"])
    if mask is not None:
        scores += mask if attrs["beta"] == 1.0 else mask * mask.dtype.type(attrs["beta"])
    with np.errstate(over="ignore", under="ignore"):
        probs = apply_softmax("softmax", scores, -1, out=scores)  # in place: scores is this call's own
    y = np.matmul(probs, v)
    return np.transpose(y, attrs["perm_y"]) if attrs["perm_y"] else y
