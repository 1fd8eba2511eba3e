"""ONNX MaxPool / AveragePool / LpPool / GlobalAveragePool / GlobalMaxPool / MaxUnpool -> wgnn
Pool / GlobalPool / MaxUnpool.

storage_order only affects MaxPool's Indices output, so it is kept only where that is produced.
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
    attrs = _window_attrs(ctx, node, "max")
    outputs = node.outputs[:1]
    if len(node.outputs) > 1 and node.outputs[1]:
        outputs = node.outputs[:2]
        attrs["storage_order"] = int(node.attrs.get("storage_order", 0))
    ctx.emit("Pool", node.inputs[:1], outputs, attrs)


@onnx_op("LpPool")
def lp_pool(ctx, node):
    """p is a float attribute in LpPool-1, an int from LpPool-2 on; dilations and ceil_mode come
    with LpPool-18."""
    attrs = _window_attrs(ctx, node, "lp")
    attrs["p"] = float(node.attrs.get("p", 2))
    ctx.emit("Pool", node.inputs[:1], node.outputs[:1], attrs)


@onnx_op("MaxUnpool")
def max_unpool(ctx, node):
    if "kernel_shape" not in node.attrs:
        raise ctx.fail("kernel_shape is required")
    attrs = {key: [int(v) for v in node.attrs[key]] for key in ("kernel_shape", "strides", "pads")
             if key in node.attrs}
    ctx.emit("MaxUnpool", node.inputs[:3], node.outputs[:1], attrs)


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
