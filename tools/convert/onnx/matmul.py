"""ONNX MatMul / Gemm -> wgnn MatMul."""
from __future__ import annotations

from .table import onnx_op


@onnx_op("MatMul")
def matmul(ctx, node):
    ctx.emit("MatMul", node.inputs[:2], node.outputs[:1])


@onnx_op("Gemm")
def gemm(ctx, node):
    """Y = alpha * A' @ B' + beta * C. Gemm-6's `broadcast` flag only allowed what the IR's bias
    broadcasting covers; C is optional from opset 11."""
    if not node.input(2) and ctx.opset < 11:
        raise ctx.fail(f"input C is required before opset 11 (model opset {ctx.opset})")
    attrs = {
        "trans_a": int(node.attrs.get("transA", 0)),
        "trans_b": int(node.attrs.get("transB", 0)),
        "alpha": float(node.attrs.get("alpha", 1.0)),
        "beta": float(node.attrs.get("beta", 1.0)),
    }
    inputs = [name for name in node.inputs[:3] if name]
    ctx.emit("MatMul", inputs, node.outputs[:1], attrs)
