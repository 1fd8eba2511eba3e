"""MatMul family on numpy: numpy.matmul (BLAS), then alpha, bias, the output permutation perm_y,
the fused residual and the fused activation; split_y parts are views of the product.

alpha, the bias and the residual are applied in place on matmul's fresh result (shape inference
guarantees the bias broadcasts onto Y without enlarging it and the residual has Y's shape), which
saves a temporary per step on small models."""
from __future__ import annotations

import numpy as np

from .elementwise import apply_unary
from .kernel import numpy_kernel


@numpy_kernel("MatMul")
def matmul(ex, a, b, c=None, r=None):
    attrs = ex.attrs
    if attrs.get("perm_a"):  # views: numpy.matmul takes strided operands
        a = np.transpose(a, attrs["perm_a"])
    if attrs.get("perm_b"):
        b = np.transpose(b, attrs["perm_b"])
    if attrs["trans_a"] and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if attrs["trans_b"] and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    y = np.asarray(np.matmul(a, b))  # 1-D @ 1-D gives a numpy scalar
    if not y.flags.writeable or y.base is not None:
        y = y.copy()
    if attrs["alpha"] != 1.0:
        y *= y.dtype.type(attrs["alpha"])
    if c is not None:
        if attrs["beta"] == 1.0:
            y += c
        else:
            y += c * c.dtype.type(attrs["beta"])
    if attrs.get("perm_y"):  # one copy, as the Transpose folded in made
        y = np.ascontiguousarray(np.transpose(y, attrs["perm_y"]))
    if r is not None:  # of Y's shape (shape inference checks it), before the activation
        y += r
    if attrs["activation"]:
        with np.errstate(all="ignore"):
            y = apply_unary(attrs["activation"], y, attrs["activation_alpha"], attrs["activation_beta"])
    split = attrs.get("split_y", 1)
    if split > 1:  # views (run() copies them into the outputs); slicing, as np.split costs ~8 us
        width = y.shape[-1] // split
        return tuple(y[..., i * width:(i + 1) * width] for i in range(split))
    return y
