"""Quant family: "QuantizeLinear" (float -> int8/uint8/int16/uint16), "DequantizeLinear" (back to
float) and "FakeQuantize" (both in one float -> float op, the form the converter gives QDQ pairs so
they run on the GPU, which stores no 8/16-bit tensors).

Scales and zero points (ONNX semantics):
- per tensor: a scale of one element (any rank up to 1);
- per axis: a 1-D scale of x.shape[axis] elements;
- blocked (block_size > 0): a scale of x's rank whose `axis` dim is ceil(x.shape[axis] / block_size)
  and whose other dims are x's; element i along `axis` uses block i // block_size.
A zero point, when present, has the scale's shape. Quantization rounds half to even and saturates
to the integer type's range: q = clamp(round(x / scale) + zero_point, qmin, qmax).
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES
from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# Integer types a tensor is quantized to, with their ranges (float8 and int4 are not supported).
QUANT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
}
DEFAULT_QUANT_DTYPE = "uint8"  # ONNX: without a zero point or output_dtype, QuantizeLinear gives uint8
QUANTIZE_INPUTS = FLOAT_DTYPES | {"int32"}  # ONNX QuantizeLinear-10/13 also quantize int32
DEQUANTIZE_INPUTS = frozenset(QUANT_RANGES) | {"int32"}  # int32: biases of QDQ models


def check_quant_params(ctx: InferContext, zero_point_dtypes=None) -> None:
    """Scale (input 1) and zero point (input 2, optional) against x (input 0): per tensor, per axis
    or blocked, as the `axis` and `block_size` attributes say."""
    x, scale = ctx.shape(0), ctx.shape(1)
    if ctx.dtype(1) not in FLOAT_DTYPES:
        raise ctx.fail(f"scale must be float, got {ctx.dtype(1)}")
    if ctx.has(2):
        zero = tuple(ctx.shape(2))
        # One element is per tensor whatever its rank up to 1 (exporters mix () and (1,)).
        if zero != tuple(scale) and not (_per_tensor(zero) and _per_tensor(scale)):
            raise ctx.fail(f"zero point shape {zero} differs from the scale's {tuple(scale)}")
        if zero_point_dtypes is not None and ctx.dtype(2) not in zero_point_dtypes:
            raise ctx.fail(f"zero point type {ctx.dtype(2)} is not one of {sorted(zero_point_dtypes)}")
    block = ctx.attrs["block_size"]
    if block < 0:
        raise ctx.fail(f"block_size must be >= 0, got {block}")
    if _per_tensor(scale):
        return  # the axis does not matter
    axis = ctx.axis(ctx.attrs["axis"], len(x))
    if block == 0:
        if tuple(scale) != (x[axis],):
            raise ctx.fail(f"a per-axis scale must have shape ({x[axis]},) (axis {axis} of x), got {tuple(scale)}")
        return
    blocks = -(-x[axis] // block)
    expected = tuple(blocks if d == axis else n for d, n in enumerate(x))
    if tuple(scale) != expected:
        raise ctx.fail(f"a blocked scale (block_size {block} on axis {axis}) must have shape {expected}, "
                       f"got {tuple(scale)}")


def _per_tensor(shape) -> bool:
    return len(shape) <= 1 and all(d == 1 for d in shape)


@register_op
class QuantizeLinear(OpDef):
    """y = saturate(round_half_even(x / scale) + zero_point). The output type is the zero point's,
    else `dtype` ("" = uint8). `precision` ("" = numpy's promotion of x and scale) is the float
    type the division runs in (ONNX QuantizeLinear-23)."""

    op_type = "QuantizeLinear"
    family = "quant"
    attrs = {"axis": Attr("int", 1), "block_size": Attr("int", 0), "dtype": Attr("string", ""),
             "precision": Attr("string", "")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.dtype(0) not in QUANTIZE_INPUTS:
            raise ctx.fail(f"x must be float or int32, got {ctx.dtype(0)}")
        check_quant_params(ctx, QUANT_RANGES)
        dtype = ctx.attrs["dtype"]
        if dtype and dtype not in QUANT_RANGES:
            raise ctx.fail(f"cannot quantize to {dtype!r}; wgnn quantizes to {sorted(QUANT_RANGES)}")
        if ctx.has(2):
            if dtype and dtype != ctx.dtype(2):
                raise ctx.fail(f"output type {dtype} differs from the zero point's type {ctx.dtype(2)}")
            dtype = ctx.dtype(2)
        precision = ctx.attrs["precision"]
        if precision and precision not in FLOAT_DTYPES:
            raise ctx.fail(f"precision must be a float type, got {precision!r}")
        return [TensorSpec(ctx.shape(0), dtype or DEFAULT_QUANT_DTYPE)]

    def flops(self, ctx, outputs) -> int:
        return 3 * outputs[0].size


@register_op
class DequantizeLinear(OpDef):
    """y = (x - zero_point) * scale, in the scale's float type (or `dtype`, ONNX DequantizeLinear-23's
    output_dtype)."""

    op_type = "DequantizeLinear"
    family = "quant"
    attrs = {"axis": Attr("int", 1), "block_size": Attr("int", 0), "dtype": Attr("string", "")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.dtype(0) not in DEQUANTIZE_INPUTS:
            raise ctx.fail(f"x must be one of {sorted(DEQUANTIZE_INPUTS)}, got {ctx.dtype(0)}")
        check_quant_params(ctx)
        if ctx.has(2) and ctx.dtype(2) != ctx.dtype(0):
            raise ctx.fail(f"zero point type {ctx.dtype(2)} differs from x's type {ctx.dtype(0)}")
        dtype = ctx.attrs["dtype"] or ctx.dtype(1)
        if dtype not in FLOAT_DTYPES:
            raise ctx.fail(f"output type must be float, got {dtype!r}")
        return [TensorSpec(ctx.shape(0), dtype)]

    def flops(self, ctx, outputs) -> int:
        return 2 * outputs[0].size


@register_op
class FakeQuantize(OpDef):
    """Quantize to `dtype`'s range, then dequantize: y = (clamp(round_half_even(x / scale) + zp, qmin,
    qmax) - zp) * scale, in the scale's float type. The zero point (optional, default 0) is a float
    tensor holding the integer values, so every tensor of the op is a float the GPU stores."""

    op_type = "FakeQuantize"
    family = "quant"
    attrs = {"axis": Attr("int", 1), "block_size": Attr("int", 0), "dtype": Attr("string")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.dtype(0) not in QUANTIZE_INPUTS:
            raise ctx.fail(f"x must be float or int32, got {ctx.dtype(0)}")
        check_quant_params(ctx, FLOAT_DTYPES)
        if ctx.attrs["dtype"] not in QUANT_RANGES:
            raise ctx.fail(f"cannot quantize to {ctx.attrs['dtype']!r}; wgnn quantizes to {sorted(QUANT_RANGES)}")
        return [TensorSpec(ctx.shape(0), ctx.dtype(1))]

    def flops(self, ctx, outputs) -> int:
        return 5 * outputs[0].size
