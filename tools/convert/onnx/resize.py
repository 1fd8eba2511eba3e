"""ONNX Resize (opsets 10-19) and Upsample (7, 9) -> wgnn Resize with inputs X, roi, scales, sizes."""
from __future__ import annotations

import numpy as np

from .table import onnx_op

RESIZE_ATTRS = ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy")


def _legacy_attrs(ctx, node) -> dict:
    """Upsample and Resize-10: asymmetric coordinates, nearest rounding as those opsets did."""
    mode = node.attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise ctx.fail(f"mode {mode!r} is not supported in opset {ctx.opset} (nearest or linear)")
    return {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "simple"}


def _optional(ctx, name: str) -> str:
    """An optional input; a constant empty tensor means absent as much as an empty name does."""
    value = ctx.constant(name)
    return "" if value is not None and value.size == 0 else name


@onnx_op("Upsample")
def upsample(ctx, node):
    attrs = _legacy_attrs(ctx, node)
    if ctx.opset < 9:
        if "scales" not in node.attrs:
            raise ctx.fail("Upsample before opset 9 needs the scales attribute")
        scales = ctx.add_constant(np.asarray(node.attrs["scales"], np.float32), "scales")
    else:
        scales = node.input(1)
    ctx.emit("Resize", [node.inputs[0], "", scales, ""], node.outputs, attrs)


@onnx_op("Resize")
def resize(ctx, node):
    if ctx.opset < 11:
        ctx.emit("Resize", [node.inputs[0], "", node.input(1), ""], node.outputs, _legacy_attrs(ctx, node))
        return
    attrs = {k: v for k, v in node.attrs.items() if k in RESIZE_ATTRS}
    unknown = sorted(set(node.attrs) - set(RESIZE_ATTRS))
    if unknown:
        raise ctx.fail(f"unknown attribute(s) {unknown}")
    coordinate_mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    # roi only matters to tf_crop_and_resize; other modes ignore it.
    roi = _optional(ctx, node.input(1)) if coordinate_mode == "tf_crop_and_resize" else ""
    ctx.emit("Resize", [node.inputs[0], roi, _optional(ctx, node.input(2)), _optional(ctx, node.input(3))],
             node.outputs, attrs)
