"""MatMul family on numpy: numpy.matmul (BLAS), then alpha, bias and the fused activation."""
from __future__ import annotations

import numpy as np

from .elementwise import apply_unary
from .kernel import numpy_kernel


@numpy_kernel("MatMul")
def matmul(ex, a, b, c=None):
    attrs = ex.attrs
    if attrs["trans_a"] and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if attrs["trans_b"] and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    y = np.matmul(a, b)
    if not isinstance(y, np.ndarray):  # 1-D @ 1-D gives a numpy scalar
        y = np.asarray(y)
    if attrs["alpha"] != 1.0:
        y = y * y.dtype.type(attrs["alpha"])
    if c is not None:
        y = y + (c if attrs["beta"] == 1.0 else c * c.dtype.type(attrs["beta"]))
    if attrs["activation"]:
        with np.errstate(all="ignore"):
            y = apply_unary(attrs["activation"], y, attrs["activation_alpha"], attrs["activation_beta"])
    return y
