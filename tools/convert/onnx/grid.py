"""ONNX GridSample, AffineGrid and Col2Im -> wgnn grid ops."""
from __future__ import annotations

from .table import onnx_op, same_op

# GridSample-16 names its modes after the 2-D case; GridSample-20 generalised them to N-D.
GRID_MODE_NAMES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "nearest": "nearest",
                   "cubic": "cubic"}

same_op("AffineGrid", "AffineGrid")
same_op("Col2Im", "Col2Im")


@onnx_op("GridSample")
def grid_sample(ctx, node):
    mode = node.attrs.get("mode", "bilinear" if ctx.opset < 20 else "linear")
    if mode not in GRID_MODE_NAMES:
        raise ctx.fail(f"unknown mode {mode!r}; expected one of {sorted(GRID_MODE_NAMES)}")
    attrs = {"mode": GRID_MODE_NAMES[mode], "padding_mode": node.attrs.get("padding_mode", "zeros"),
             "align_corners": int(node.attrs.get("align_corners", 0))}
    ctx.emit("GridSample", node.inputs[:2], node.outputs[:1], attrs)
