"""ONNX reductions -> wgnn Reduce (axes always an attribute) and ArgMax/ArgMin -> ArgReduce."""
from __future__ import annotations

from .table import CONVERTERS, onnx_op

# ONNX op -> (wgnn kind, first opset in which `axes` is an input instead of an attribute)
REDUCE = {
    "ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18),
    "ReduceMin": ("min", 18), "ReduceProd": ("prod", 18), "ReduceL1": ("l1", 18),
    "ReduceL2": ("l2", 18), "ReduceSumSquare": ("sum_square", 18), "ReduceLogSum": ("log_sum", 18),
    "ReduceLogSumExp": ("log_sum_exp", 18),
}


def _reduce(kind: str, axes_input_since: int):
    def convert(ctx, node):
        if ctx.opset >= axes_input_since:
            name = node.input(1)
            axes = [] if not name else [int(a) for a in ctx.require_constant(name, "axes").ravel()]
        else:
            axes = [int(a) for a in node.attrs.get("axes", [])]
        attrs = {"kind": kind, "axes": axes, "keepdims": int(node.attrs.get("keepdims", 1)),
                 "noop_with_empty_axes": int(node.attrs.get("noop_with_empty_axes", 0))}
        ctx.emit("Reduce", node.inputs[:1], node.outputs, attrs)
    return convert


CONVERTERS.update({op: _reduce(kind, since) for op, (kind, since) in REDUCE.items()})


@onnx_op("ArgMax", "ArgMin")
def arg_reduce(ctx, node):
    attrs = {"kind": "max" if node.op_type == "ArgMax" else "min", "axis": int(node.attrs.get("axis", 0)),
             "keepdims": int(node.attrs.get("keepdims", 1)),
             "select_last_index": int(node.attrs.get("select_last_index", 0))}
    ctx.emit("ArgReduce", node.inputs[:1], node.outputs, attrs)
