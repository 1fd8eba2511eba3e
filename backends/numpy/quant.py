"""Quant family on numpy: QuantizeLinear, DequantizeLinear and FakeQuantize (engine/ops/quant.py)."""
from __future__ import annotations

import numpy as np

from ...engine.ops.quant import QUANT_RANGES
from .kernel import numpy_kernel


def expand_param(value: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast onto x (per tensor, per axis or blocked)."""
    if value.size == 1 and value.ndim <= 1:
        return value.reshape(())
    axis = axis + len(shape) if axis < 0 else axis
    if block_size == 0:
        dims = [1] * len(shape)
        dims[axis] = value.size
        return value.reshape(dims)
    # Each block's parameter repeated over its block, the last (partial) block cut to x's length.
    repeated = np.repeat(value, block_size, axis=axis)
    index = [slice(None)] * len(shape)
    index[axis] = slice(0, shape[axis])
    return repeated[tuple(index)]


def quantize_values(v: np.ndarray, zero_point, dtype: str) -> np.ndarray:
    """round_half_even(v) + zero_point saturated to dtype's range, as float64 (exact for the
    16-bit types). Saturating in floats (as onnxruntime does) keeps values past int32 and
    infinities right; NaN gives the range's low end, as the reference's int conversion does."""
    low, high = QUANT_RANGES[dtype]
    q = np.rint(v).astype(np.float64)
    if zero_point is not None:
        q += zero_point
    return np.where(np.isnan(q), low, np.clip(q, low, high))


@numpy_kernel("QuantizeLinear")
def quantize_linear(ex, x, scale, zero_point=None):
    axis, block = ex.attrs["axis"], ex.attrs["block_size"]
    s = expand_param(scale, x.shape, axis, block)
    precision = ex.attrs["precision"]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # The division in x's and the scale's type (numpy promotion), as ONNX's reference computes it.
        v = x.astype(precision) / s.astype(precision) if precision else x / s
        z = None if zero_point is None else expand_param(zero_point, x.shape, axis, block)
        dtype = ex.step.output_specs[0].dtype
        return quantize_values(v, z, dtype).astype(dtype)


@numpy_kernel("DequantizeLinear")
def dequantize_linear(ex, x, scale, zero_point=None):
    axis, block = ex.attrs["axis"], ex.attrs["block_size"]
    dx = x.astype(np.float32)
    if zero_point is not None:
        # numpy's promotion as in the reference: exact in float32 for 8/16-bit types, float64 for int32.
        dx = dx - expand_param(zero_point, x.shape, axis, block)
    y = dx * expand_param(scale, x.shape, axis, block)
    return y.astype(ex.step.output_specs[0].dtype, copy=False)


@numpy_kernel("FakeQuantize")
def fake_quantize(ex, x, scale, zero_point=None):
    axis, block = ex.attrs["axis"], ex.attrs["block_size"]
    s = expand_param(scale, x.shape, axis, block)
    z = None if zero_point is None else expand_param(zero_point, x.shape, axis, block).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = quantize_values(x / s, z, ex.attrs["dtype"])
        if z is not None:
            q = q - z
        # QuantizeLinear then DequantizeLinear: the integer minus the zero point is exact in float32,
        # and the product with the scale rounds once, in float32 at least (DequantizeLinear's work type).
        work = np.promote_types(s.dtype, np.float32)
        y = q.astype(work) * s.astype(work)
    return y.astype(ex.step.output_specs[0].dtype, copy=False)
