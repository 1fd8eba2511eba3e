"""ONNX Conv / ConvTranspose -> wgnn Conv / ConvTranspose.

kernel_shape is implied by the weight's shape in the IR; the converter checks that they agree
when the weight is a constant. auto_pad stays an attribute: it is resolved from the input shape
at resize.
"""
from __future__ import annotations

from .table import onnx_op

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _common_attrs(ctx, node, names) -> dict:
    attrs = {key: node.attrs[key] for key in names if key in node.attrs}
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {auto_pad!r} is not one of {list(AUTO_PADS)}")
    attrs["auto_pad"] = auto_pad
    if auto_pad != "NOTSET":
        attrs.pop("pads", None)  # ONNX: pads and auto_pad are exclusive; auto_pad wins
    weight = ctx.constant(node.input(1))
    kernel = node.attrs.get("kernel_shape")
    if weight is not None and kernel is not None and list(weight.shape[2:]) != list(kernel):
        raise ctx.fail(f"kernel_shape {kernel} disagrees with the weight's shape {list(weight.shape)}")
    return attrs


@onnx_op("Conv")
def conv(ctx, node):
    attrs = _common_attrs(ctx, node, ("strides", "dilations", "pads", "auto_pad", "group"))
    ctx.emit("Conv", node.inputs[:3], node.outputs[:1], attrs)


@onnx_op("ConvTranspose")
def conv_transpose(ctx, node):
    attrs = _common_attrs(ctx, node, ("strides", "dilations", "pads", "auto_pad", "group",
                                      "output_padding", "output_shape"))
    ctx.emit("ConvTranspose", node.inputs[:3], node.outputs[:1], attrs)
