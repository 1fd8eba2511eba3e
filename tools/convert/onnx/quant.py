"""ONNX QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21, 23) -> wgnn QuantizeLinear /
DequantizeLinear. Opset forms: 10 per tensor (axis 1 by default), 13 adds `axis`, 19 `saturate`
(float8 only) and float16 scales, 21 `block_size` and `output_dtype` (int16/uint16, int4), 23
`precision` (QuantizeLinear) and `output_dtype` (DequantizeLinear). The pass tools/convert/quant.py
then turns QuantizeLinear -> DequantizeLinear pairs into FakeQuantize."""
from __future__ import annotations

from ....engine.dtypes import FLOAT_DTYPES, ONNX_DTYPES, onnx_type_name
from ....engine.ops.quant import QUANT_RANGES
from .table import onnx_op


def _dtype_attr(ctx, node, name: str, allowed, what: str) -> str:
    """The wgnn dtype of an ONNX type attribute (0 or absent: ""), refused outside `allowed`."""
    code = int(node.attrs.get(name, 0))
    if code == 0:
        return ""
    dtype = ONNX_DTYPES.get(code)
    if dtype not in allowed:
        raise ctx.fail(f"{name} {onnx_type_name(code)} is not supported: wgnn {what} {sorted(allowed)} "
                       "(float8, float4 and int4/int2 quantization are not)")
    return dtype


def _common(ctx, node) -> dict:
    attrs = {"axis": int(node.attrs.get("axis", 1)), "block_size": int(node.attrs.get("block_size", 0))}
    if attrs["block_size"] < 0:
        raise ctx.fail(f"block_size must be >= 0, got {attrs['block_size']}")
    return attrs


@onnx_op("QuantizeLinear")
def quantize_linear(ctx, node):
    # saturate (opset 19+) only changes float8 outputs, which are refused here.
    attrs = _common(ctx, node)
    dtype = _dtype_attr(ctx, node, "output_dtype", QUANT_RANGES, "quantizes to")
    zero_point = ctx.constant(node.input(2))
    if zero_point is not None:
        if zero_point.dtype.name not in QUANT_RANGES:
            raise ctx.fail(f"zero point type {zero_point.dtype.name} is not supported: wgnn quantizes to "
                           f"{sorted(QUANT_RANGES)}")
        if dtype and dtype != zero_point.dtype.name:
            raise ctx.fail(f"output_dtype {dtype} differs from the zero point's type {zero_point.dtype.name}")
    if dtype:
        attrs["dtype"] = dtype
    precision = _dtype_attr(ctx, node, "precision", FLOAT_DTYPES, "divides in")
    if precision:
        attrs["precision"] = precision
    ctx.emit("QuantizeLinear", node.inputs[:3], node.outputs, attrs)


@onnx_op("DequantizeLinear")
def dequantize_linear(ctx, node):
    attrs = _common(ctx, node)
    dtype = _dtype_attr(ctx, node, "output_dtype", FLOAT_DTYPES, "dequantizes to")
    if dtype:
        attrs["dtype"] = dtype
    ctx.emit("DequantizeLinear", node.inputs[:3], node.outputs, attrs)
