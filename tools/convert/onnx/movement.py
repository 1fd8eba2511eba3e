"""ONNX data-movement ops -> wgnn movement ops. The IR keeps the newest ONNX form: shape-like
operands (axes, starts/ends, pads, split sizes) are inputs; older opsets' attributes become
constant inputs here."""
from __future__ import annotations

import numpy as np

from .table import onnx_op, same_op

for _op in ("Flatten", "Transpose", "Expand", "DepthToSpace", "SpaceToDepth", "Gather"):
    same_op(_op, _op)


def _int_constant(ctx, values, hint: str) -> str:
    return ctx.add_constant(np.asarray(values, dtype=np.int64), hint)


@onnx_op("Reshape")
def reshape(ctx, node):
    if ctx.opset < 5:  # Reshape-1: the target shape is an attribute
        if "shape" not in node.attrs:
            raise ctx.fail("Reshape-1 needs a `shape` attribute")
        ctx.emit("Reshape", [node.inputs[0], _int_constant(ctx, node.attrs["shape"], "shape")], node.outputs)
        return
    attrs = {"allowzero": node.attrs["allowzero"]} if "allowzero" in node.attrs else {}
    ctx.emit("Reshape", node.inputs[:2], node.outputs, attrs)


def _axes_operand(ctx, node, required: bool) -> str:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13 on."""
    if ctx.opset >= 13:
        return node.input(1)
    if "axes" in node.attrs:
        return _int_constant(ctx, node.attrs["axes"], "axes")
    if required:
        raise ctx.fail("the `axes` attribute is required")
    return ""


@onnx_op("Squeeze")
def squeeze(ctx, node):
    axes = _axes_operand(ctx, node, required=False)
    ctx.emit("Squeeze", [node.inputs[0]] + ([axes] if axes else []), node.outputs)


@onnx_op("Unsqueeze")
def unsqueeze(ctx, node):
    axes = _axes_operand(ctx, node, required=True)
    if not axes:
        raise ctx.fail("Unsqueeze needs axes")
    ctx.emit("Unsqueeze", [node.inputs[0], axes], node.outputs)


@onnx_op("Concat")
def concat(ctx, node):
    axis = node.attrs.get("axis", 1 if ctx.opset < 4 else None)  # Concat-1 defaulted to axis 1
    if axis is None:
        raise ctx.fail("the `axis` attribute is required")
    ctx.emit("Concat", node.inputs, node.outputs, {"axis": axis})


@onnx_op("Slice")
def slice_(ctx, node):
    if ctx.opset >= 10:
        ctx.emit("Slice", node.inputs, node.outputs)
        return
    # Slice-1: starts, ends and optional axes are attributes.
    for key in ("starts", "ends"):
        if key not in node.attrs:
            raise ctx.fail(f"Slice-1 needs the `{key}` attribute")
    inputs = [node.inputs[0], _int_constant(ctx, node.attrs["starts"], "starts"),
              _int_constant(ctx, node.attrs["ends"], "ends")]
    if "axes" in node.attrs:
        inputs.append(_int_constant(ctx, node.attrs["axes"], "axes"))
    ctx.emit("Slice", inputs, node.outputs)


@onnx_op("Split")
def split(ctx, node):
    """Split-2/11: `split` attribute; Split-13: `split` input; Split-18: or num_outputs."""
    if "num_outputs" in node.attrs and node.attrs["num_outputs"] != len(node.outputs):
        raise ctx.fail(f"num_outputs={node.attrs['num_outputs']} but the node has {len(node.outputs)} outputs")
    sizes = node.input(1)
    if "split" in node.attrs:
        sizes = _int_constant(ctx, node.attrs["split"], "split")
    attrs = {"axis": node.attrs.get("axis", 0)}
    ctx.emit("Split", [node.inputs[0]] + ([sizes] if sizes else []), node.outputs, attrs)


@onnx_op("Pad")
def pad(ctx, node):
    """Pad-1/2: `pads` (Pad-1: `paddings`) and `value` attributes; Pad-11+: inputs (axes from 18)."""
    mode = node.attrs.get("mode", "constant")
    if ctx.opset >= 11:
        ctx.emit("Pad", node.inputs, node.outputs, {"mode": mode})
        return
    pads = node.attrs.get("pads", node.attrs.get("paddings"))
    if pads is None:
        raise ctx.fail("the `pads` attribute is required")
    inputs = [node.inputs[0], _int_constant(ctx, pads, "pads")]
    if node.attrs.get("value", 0.0) != 0.0:
        inputs.append(ctx.add_constant(np.asarray(node.attrs["value"], np.float64), "value"))
    ctx.emit("Pad", inputs, node.outputs, {"mode": mode})


@onnx_op("Tile")
def tile(ctx, node):
    if ctx.opset < 6:
        raise ctx.fail("Tile-1 (tiles and axis inputs) is not supported; re-export with opset >= 6")
    ctx.emit("Tile", node.inputs[:2], node.outputs)


@onnx_op("Identity")
def identity(ctx, node):
    ctx.emit("Unary", node.inputs[:1], node.outputs, {"kind": "identity"})


@onnx_op("Dropout")
def dropout(ctx, node):
    """Inference only: the output is the input; the optional mask is all true (all ones before
    opset 10, where the mask has the input's type)."""
    mode_name = node.input(2) if ctx.opset >= 12 else ""
    if mode_name:
        mode = ctx.constant(mode_name)
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            raise ctx.fail("training_mode must be a constant false: wgnn runs inference only")
    x = node.inputs[0]
    ctx.emit("Unary", [x], node.outputs[:1], {"kind": "identity"})
    mask = node.outputs[1] if len(node.outputs) > 1 else ""
    if not mask:
        return
    shape = ctx.fresh("shape")
    ctx.emit("Shape", [x], [shape])
    if ctx.opset >= 10:
        ctx.emit("ConstantOfShape", [shape], [mask], {"value": np.array([True])})
        return
    ones = ctx.fresh("ones")
    ctx.emit("ConstantOfShape", [shape], [ones], {"value": np.array([1], np.float32)})
    ctx.emit("Cast", [ones, x], [mask])
