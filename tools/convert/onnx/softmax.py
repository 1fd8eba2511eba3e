"""ONNX Softmax, LogSoftmax, Hardmax -> wgnn Softmax."""
from __future__ import annotations

from .table import onnx_op

KINDS = {"Softmax": "softmax", "LogSoftmax": "logsoftmax", "Hardmax": "hardmax"}


@onnx_op(*KINDS)
def softmax(ctx, node):
    # Before opset 13 the default axis is 1 and the op normalises over all dims from axis on.
    legacy = ctx.opset < 13
    axis = int(node.attrs.get("axis", 1 if legacy else -1))
    ctx.emit("Softmax", node.inputs[:1], node.outputs,
             {"kind": KINDS[node.op_type], "axis": axis, "legacy_flatten": int(legacy)})
