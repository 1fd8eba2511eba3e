"""Grid family: sampling an image at given positions (GridSample), the positions of an affine
warp (AffineGrid), and the inverse of im2col (Col2Im: sums sliding blocks back into an image).

IR forms: GridSample's mode is "linear" / "nearest" / "cubic" (opset 20 names; the converter maps
opset 16's bilinear / bicubic); AffineGrid's size and Col2Im's image_shape / block_shape are value
inputs (known at resize).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from .base import Attr, InferContext, OpDef, TensorSpec, register_op
from .movement import int_values

GRID_MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


@register_op
class GridSample(OpDef):
    """GridSample(X (N, C, d1..dr), grid (N, D1..Dr, r)) -> (N, C, D1..Dr). grid[..., 0] is the
    normalized position along the last (width) dim, grid[..., r-1] along d1."""

    op_type = "GridSample"
    family = "grid"
    attrs: ClassVar[dict[str, Attr]] = {"mode": Attr("string", "linear"), "padding_mode": Attr("string", "zeros"),
                                        "align_corners": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x, grid = ctx.shape(0), ctx.shape(1)
        if ctx.attrs["mode"] not in GRID_MODES:
            raise ctx.fail(f"mode {ctx.attrs['mode']!r} is not one of {list(GRID_MODES)}")
        if ctx.attrs["padding_mode"] not in PADDING_MODES:
            raise ctx.fail(f"padding_mode {ctx.attrs['padding_mode']!r} is not one of {list(PADDING_MODES)}")
        spatial = len(x) - 2
        if spatial < 1:
            raise ctx.fail(f"X must have rank >= 3 (N, C, spatial dims), got rank {len(x)}")
        if len(grid) != spatial + 2 or grid[0] != x[0] or grid[-1] != spatial:
            raise ctx.fail(f"grid must have shape ({x[0]}, {spatial} output dims..., {spatial}), got {list(grid)}")
        if ctx.dtype(1) != ctx.dtype(0) and ctx.dtype(1) not in ("float32", "float64", "float16"):
            raise ctx.fail(f"grid must be a float tensor, got {ctx.dtype(1)}")
        return [TensorSpec((x[0], x[1], *grid[1:-1]), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        spatial = len(ctx.shape(0)) - 2
        return outputs[0].size * 2 * TAPS[ctx.attrs["mode"]] ** spatial


@register_op
class AffineGrid(OpDef):
    """AffineGrid(theta (N, 2, 3) or (N, 3, 4), size [N, C, H, W] or [N, C, D, H, W]) ->
    grid (N, H, W, 2) or (N, D, H, W, 3): theta applied to the normalized output positions."""

    op_type = "AffineGrid"
    family = "grid"
    attrs: ClassVar[dict[str, Attr]] = {"align_corners": Attr("int", 0)}
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        theta = ctx.shape(0)
        size = int_values(ctx, 1, "size")
        if len(size) not in (4, 5):
            raise ctx.fail(f"size must be [N, C, H, W] or [N, C, D, H, W], got {size}")
        spatial = len(size) - 2
        if theta != (size[0], spatial, spatial + 1):
            raise ctx.fail(f"theta must have shape ({size[0]}, {spatial}, {spatial + 1}) for size {size}, "
                           f"got {list(theta)}")
        if any(d < 0 for d in size):
            raise ctx.fail(f"size {size} has a negative dim")
        return [TensorSpec((size[0], *size[2:], spatial), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return outputs[0].size * 2 * (outputs[0].shape[-1] + 1)


def col2im_geometry(ctx: InferContext) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """(image, block, dilations, pads (begins then ends), strides, blocks per dim) of a Col2Im."""
    image = int_values(ctx, 1, "image_shape")
    block = int_values(ctx, 2, "block_shape")
    r = len(image)
    if r == 0 or len(block) != r:
        raise ctx.fail(f"image_shape {image} and block_shape {block} must have the same, non-zero length")
    dilations = ctx.attrs["dilations"] or [1] * r
    pads = ctx.attrs["pads"] or [0] * (2 * r)
    strides = ctx.attrs["strides"] or [1] * r
    if len(dilations) != r or len(strides) != r or len(pads) != 2 * r:
        raise ctx.fail(f"dilations {dilations}, strides {strides} and pads {pads} do not fit {r} spatial dims")
    if min(block) < 1 or min(dilations) < 1 or min(strides) < 1 or min(pads) < 0 or min(image) < 1:
        raise ctx.fail(f"image {image}, block {block}, dilations {dilations}, strides {strides} and pads "
                       f"{pads} must be positive (pads non-negative)")
    counts = [(image[i] + pads[i] + pads[i + r] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(r)]
    if min(counts) < 1:
        raise ctx.fail(f"no block of {block} (dilations {dilations}) fits image {image} with pads {pads}")
    return image, block, dilations, pads, strides, counts


@register_op
class Col2Im(OpDef):
    """Col2Im(input (N, C * prod(block), L), image_shape, block_shape) -> (N, C, *image_shape):
    each column of a block's values is added back at its place (overlapping blocks sum)."""

    op_type = "Col2Im"
    family = "grid"
    attrs: ClassVar[dict[str, Attr]] = {"dilations": Attr("ints", []), "pads": Attr("ints", []),
                                        "strides": Attr("ints", [])}
    value_inputs = (1, 2)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        image, block, *_, counts = col2im_geometry(ctx)
        if len(x) != 3:
            raise ctx.fail(f"input must have shape (N, C * block size, blocks), got {list(x)}")
        taps = int(np.prod(block))
        if x[1] % taps:
            raise ctx.fail(f"input dim 1 ({x[1]}) is not a multiple of the block size {taps}")
        if x[2] != int(np.prod(counts)):
            raise ctx.fail(f"input has {x[2]} blocks, image {image} with these attributes holds {counts}")
        return [TensorSpec((x[0], x[1] // taps, *image), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return int(np.prod(ctx.shape(0), dtype=np.int64))
