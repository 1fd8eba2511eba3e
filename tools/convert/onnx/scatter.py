"""ONNX gather/scatter-family ops -> wgnn scatter ops (engine/ops/scatter.py). The IR keeps the
newest ONNX forms; Scatter (opset 9-10) is ScatterElements under its old name."""
from __future__ import annotations

from .shape import _onnx_dtype
from .table import onnx_op, same_op

for _op in ("GatherElements", "GatherND", "ScatterElements", "ScatterND", "OneHot", "Trilu", "CumSum",
            "ReverseSequence"):
    same_op(_op, _op)


@onnx_op("Scatter")
def scatter(ctx, node):
    ctx.emit("ScatterElements", node.inputs[:3], node.outputs, {"axis": node.attrs.get("axis", 0)})


@onnx_op("EyeLike")
def eye_like(ctx, node):
    attrs = {"k": node.attrs.get("k", 0)}
    if "dtype" in node.attrs:
        attrs["dtype"] = _onnx_dtype(ctx, node.attrs["dtype"])
    ctx.emit("EyeLike", node.inputs[:1], node.outputs, attrs)
