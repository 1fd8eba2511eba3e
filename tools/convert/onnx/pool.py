"""ONNX MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool -> wgnn Pool / GlobalPool.

storage_order only affects MaxPool's Indices output, which wgnn does not produce.
"""
from __future__ import annotations

from .table import onnx_op

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
WINDOW_ATTRS = ("kernel_shape", "strides", "dilations", "pads", "auto_pad", "ceil_mode")


def _window_attrs(ctx, node, kind: str) -> dict:
    if "kernel_shape" not in node.attrs:
        raise ctx.fail("kernel_shape is required")
    attrs = {key: node.attrs[key] for key in WINDOW_ATTRS if key in node.attrs}
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {auto_pad!r} is not one of {list(AUTO_PADS)}")
    attrs["auto_pad"] = auto_pad
    if auto_pad != "NOTSET":
        attrs.pop("pads", None)
    attrs["kind"] = kind
    return attrs


@onnx_op("MaxPool")
def max_pool(ctx, node):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise ctx.fail("the Indices output of MaxPool is not supported")
    ctx.emit("Pool", node.inputs[:1], node.outputs[:1], _window_attrs(ctx, node, "max"))


@onnx_op("AveragePool")
def average_pool(ctx, node):
    attrs = _window_attrs(ctx, node, "avg")
    attrs["count_include_pad"] = int(node.attrs.get("count_include_pad", 0))
    ctx.emit("Pool", node.inputs[:1], node.outputs[:1], attrs)


@onnx_op("GlobalAveragePool")
def global_average_pool(ctx, node):
    ctx.emit("GlobalPool", node.inputs[:1], node.outputs[:1], {"kind": "avg"})


@onnx_op("GlobalMaxPool")
def global_max_pool(ctx, node):
    ctx.emit("GlobalPool", node.inputs[:1], node.outputs[:1], {"kind": "max"})
