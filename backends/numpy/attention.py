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


def _fits_compiled(q, k, v, mask) -> bool:
    """Whether compiled_loops.attention_rows takes these operands (arrays or views of their shapes):
    numba installed and on, float32 / float64 throughout, one batch shape, at most 4 axes, a mask
    that broadcasts to the scores, and work up to SMALL_ATTENTION (past it the products' BLAS and
    numpy's vectorized exp are faster)."""
    dtype = q.dtype
    if (q.ndim != k.ndim or q.ndim != v.ndim or not 2 <= q.ndim <= 4 or dtype not in (np.float32, np.float64)
            or k.dtype != dtype or v.dtype != dtype or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            or k.shape[-1] == 0):  # no keys: numpy's product of empty axes gives zeros
        return False
    scores_shape = (*q.shape[:-1], k.shape[-1])
    if mask is not None and (mask.dtype != dtype or mask.ndim > q.ndim or any(
            m not in (1, s) for m, s in zip(mask.shape[::-1], scores_shape[::-1], strict=False))):
        return False
    return math.prod(scores_shape) * (q.shape[-1] + v.shape[-1]) <= SMALL_ATTENTION and compiled.enabled()


def _prepare(ex) -> None:
    """At resize: whether the compiled loop runs, and the views it needs (leading axes of 1 up to
    4-D, the output in the product's axis order), so that a run only takes views."""
    attrs = ex.attrs
    specs = [spec for spec in ex.step.input_specs if spec is not None]
    q, k, v, *mask = [np.broadcast_to(np.empty((), spec.dtype), spec.shape) for spec in specs]  # no memory
    q, k = operand(q, attrs["perm_q"], attrs["trans_q"]), operand(k, attrs["perm_k"], attrs["trans_k"])
    v, mask = operand(v, attrs["perm_v"], attrs["trans_v"]), (mask or [None])[0]
    if not _fits_compiled(q, k, v, mask):
        ex.state["compiled"] = None
        return
    inverse = tuple(int(axis) for axis in np.argsort(attrs["perm_y"])) if attrs["perm_y"] else None
    ex.state["compiled"] = (compiled.loops().attention_rows, (None,) * (4 - q.ndim),
                            None if mask is None else (None,) * (4 - mask.ndim), inverse,
                            np.empty((0, 0, 0, 0), q.dtype), np.empty(k.shape[-1]))


def _describe(ex) -> str:
    return "numpy" if ex.state.get("compiled") is None else "compiled loop"


@numpy_kernel("Attention", writes_outputs=True, prepare=_prepare, describe=_describe)
def attention(ex, inputs, outputs):
    if "compiled" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    attrs = ex.attrs
    q, k, v, mask = (list(inputs) + [None])[:4]
    q, k = operand(q, attrs["perm_q"], attrs["trans_q"]), operand(k, attrs["perm_k"], attrs["trans_k"])
    v = operand(v, attrs["perm_v"], attrs["trans_v"])
    out = outputs[0]
    if ex.state["compiled"] is not None:
        attention_rows, lead, mask_lead, inverse, no_mask, scores = ex.state["compiled"]
        # Written through a view of the output in the product's axis order: no copy afterwards.
        product = out if inverse is None else out.transpose(inverse)
        attention_rows(q[lead], k[lead], v[lead], no_mask if mask is None else mask[mask_lead],
                       attrs["alpha"], attrs["beta"], scores, product[lead])
        return
    scores = np.matmul(q, k)
    if attrs["alpha"] != 1.0:
        scores *= scores.dtype.type(attrs["alpha"])
    if mask is not None:
        scores += mask if attrs["beta"] == 1.0 else mask * mask.dtype.type(attrs["beta"])
    with np.errstate(over="ignore", under="ignore"):
        probs = apply_softmax("softmax", scores, -1, out=scores)  # in place: scores is this call's own
    y = np.matmul(probs, v)
    np.copyto(out, np.transpose(y, attrs["perm_y"]) if attrs["perm_y"] else y, casting="unsafe")
