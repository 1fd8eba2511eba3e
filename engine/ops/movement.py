"""Data movement that keeps every element (Reshape, Flatten, Squeeze, Unsqueeze, Transpose) or
repeats elements (Expand, Tile, DepthToSpace, SpaceToDepth). All lower to Raster regions.

Shape-like inputs (a Reshape target, Squeeze axes, Tile repeats ...) are value inputs: they must be
known at resize (constants or shape computations folded by the session).
"""
from __future__ import annotations

import numpy as np

from ..geometry import RasterPlan, Region, contiguous_strides, copy_region
from .base import Attr, InferContext, OpDef, TensorSpec, broadcast_shapes, register_op


def int_values(ctx: InferContext, i: int, what: str, *, required: bool = True) -> list[int] | None:
    """The 1-D (or scalar) integer value of input i as a list of Python ints."""
    value = ctx.value(i, required=required)
    if value is None:
        return None
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise ctx.fail(f"{what} must be integers, got {array.dtype.name}")
    if array.ndim > 1:
        raise ctx.fail(f"{what} must be a 1-D tensor, got shape {list(array.shape)}")
    return [int(v) for v in array.reshape(-1).tolist()]


def normalize_axes(ctx: InferContext, axes: list[int], rank: int, what: str = "axes") -> list[int]:
    """Axes in [0, rank), negative ones counted from the end; repeats are an error."""
    result = [ctx.axis(a, rank) for a in axes]
    if len(set(result)) != len(result):
        raise ctx.fail(f"{what} {axes} repeat an axis")
    return result


class Movement(OpDef):
    """Base of data-movement ops: no arithmetic, lowered to regions."""

    family = "raster"
    is_geometry = True

    def flops(self, ctx, outputs) -> int:
        return 0


class _SameData(Movement):
    """Ops whose output holds the input's elements in the same order: one contiguous copy."""

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        return [RasterPlan([copy_region(outputs[0].shape)])]


@register_op
class Reshape(_SameData):
    """Reshape(data, shape): 0 copies the input dim (unless allowzero), -1 is inferred."""

    op_type = "Reshape"
    attrs = {"allowzero": Attr("int", 0)}
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape_in = ctx.shape(0)
        target = int_values(ctx, 1, "the target shape")
        allowzero = bool(ctx.attrs["allowzero"])
        dims = []
        for i, d in enumerate(target):
            if d == 0 and not allowzero:
                if i >= len(shape_in):
                    raise ctx.fail(f"target shape {target}: 0 at position {i} copies a dim the input lacks")
                d = shape_in[i]
            elif d < -1:
                raise ctx.fail(f"target shape {target} has an invalid dim {d}")
            dims.append(d)
        total = int(np.prod(shape_in, dtype=np.int64))
        if dims.count(-1) > 1:
            raise ctx.fail(f"target shape {target} has more than one -1")
        if -1 in dims:
            if allowzero and 0 in dims:
                raise ctx.fail(f"target shape {target} mixes -1 with 0 while allowzero=1")
            known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
            if known == 0 or total % known:
                raise ctx.fail(f"cannot infer the -1 of target shape {target} for {total} elements")
            dims[dims.index(-1)] = total // known
        if int(np.prod(dims, dtype=np.int64)) != total:
            raise ctx.fail(f"cannot reshape {list(shape_in)} ({total} elements) to {dims}")
        return [TensorSpec(tuple(dims), ctx.dtype(0))]


@register_op
class Flatten(_SameData):
    """Flatten(data) -> 2-D (prod(shape[:axis]), prod(shape[axis:])); axis in [-rank, rank]."""

    op_type = "Flatten"
    attrs = {"axis": Attr("int", 1)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        axis = ctx.attrs["axis"]
        if not -len(shape) <= axis <= len(shape):
            raise ctx.fail(f"axis {axis} is out of range for rank {len(shape)}")
        axis = axis + len(shape) if axis < 0 else axis
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        return [TensorSpec((outer, int(np.prod(shape[axis:], dtype=np.int64))), ctx.dtype(0))]


@register_op
class Squeeze(_SameData):
    """Squeeze(data, axes?): drops the given size-1 axes, or every size-1 axis without axes."""

    op_type = "Squeeze"
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        axes = int_values(ctx, 1, "axes") if ctx.has(1) else None
        if axes is None:
            drop = {i for i, d in enumerate(shape) if d == 1}
        else:
            drop = set(normalize_axes(ctx, axes, len(shape)))
            bad = [a for a in sorted(drop) if shape[a] != 1]
            if bad:
                raise ctx.fail(f"cannot squeeze axes {bad}: their size is not 1")
        return [TensorSpec(tuple(d for i, d in enumerate(shape) if i not in drop), ctx.dtype(0))]


@register_op
class Unsqueeze(_SameData):
    """Unsqueeze(data, axes): inserts size-1 axes; axes count in the output's rank."""

    op_type = "Unsqueeze"
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        axes = int_values(ctx, 1, "axes")
        rank = len(shape) + len(axes)
        inserted = set(normalize_axes(ctx, axes, rank))
        rest = iter(shape)
        return [TensorSpec(tuple(1 if i in inserted else next(rest) for i in range(rank)), ctx.dtype(0))]


@register_op
class Transpose(Movement):
    """Transpose(data) with perm (default: reversed axes). One region with permuted strides."""

    op_type = "Transpose"
    attrs = {"perm": Attr("ints", [])}

    def _perm(self, ctx: InferContext) -> list[int]:
        rank = len(ctx.shape(0))
        perm = ctx.attrs["perm"] or list(range(rank))[::-1]
        if sorted(perm) != list(range(rank)):
            raise ctx.fail(f"perm {perm} is not a permutation of {rank} axes")
        return perm

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        return [TensorSpec(tuple(shape[p] for p in self._perm(ctx)), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        src = contiguous_strides(ctx.shape(0))
        out = outputs[0].shape
        region = Region(0, out, 0, tuple(src[p] for p in self._perm(ctx)), 0, contiguous_strides(out))
        return [RasterPlan([region])]


@register_op
class Expand(Movement):
    """Expand(data, shape): two-way numpy broadcast of data to shape (stride 0 on broadcast dims)."""

    op_type = "Expand"
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        target = int_values(ctx, 1, "the target shape")
        if any(d < 0 for d in target):
            raise ctx.fail(f"target shape {target} has a negative dim")
        return [TensorSpec(broadcast_shapes(ctx, ctx.shape(0), tuple(target)), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        out = outputs[0].shape
        shape = (1,) * (len(out) - len(ctx.shape(0))) + tuple(ctx.shape(0))
        strides = tuple(0 if d == 1 else s for d, s in zip(shape, contiguous_strides(shape), strict=True))
        return [RasterPlan([Region(0, out, 0, strides, 0, contiguous_strides(out))])]


@register_op
class Tile(Movement):
    """Tile(data, repeats): one region of rank 2r over the output viewed as (r0, d0, r1, d1, ...)."""

    op_type = "Tile"
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        repeats = int_values(ctx, 1, "repeats")
        if len(repeats) != len(shape):
            raise ctx.fail(f"repeats {repeats} must have one entry per input axis ({len(shape)})")
        if any(r < 0 for r in repeats):
            raise ctx.fail(f"repeats {repeats} must not be negative")
        return [TensorSpec(tuple(d * r for d, r in zip(shape, repeats, strict=True)), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        shape = ctx.shape(0)
        out = outputs[0].shape
        src = contiguous_strides(shape)
        dst = contiguous_strides(out)
        size, src_strides, dst_strides = [], [], []
        for d, o, s, t in zip(shape, out, src, dst, strict=True):
            repeats = o // d if d else 0
            size += [repeats, d]
            src_strides += [0, s]
            dst_strides += [d * t, t]
        return [RasterPlan([Region(0, tuple(size), 0, tuple(src_strides), 0, tuple(dst_strides))])]


def _nchw(ctx: InferContext) -> tuple[int, int, int, int]:
    shape = ctx.shape(0)
    if len(shape) != 4:
        raise ctx.fail(f"{ctx.node.op_type} needs a 4-D NCHW input, got rank {len(shape)}")
    if ctx.attrs["blocksize"] < 1:
        raise ctx.fail(f"blocksize must be positive, got {ctx.attrs['blocksize']}")
    return shape


def _permuted_region(view: tuple[int, ...], perm: tuple[int, ...]) -> Region:
    """Copy of a contiguous tensor seen as `view`, transposed by perm into a contiguous output."""
    strides = contiguous_strides(view)
    size = tuple(view[p] for p in perm)
    return Region(0, size, 0, tuple(strides[p] for p in perm), 0, contiguous_strides(size))


@register_op
class DepthToSpace(Movement):
    """(N, C, H, W) -> (N, C/b^2, H*b, W*b); DCR takes the block from the outer channel bits,
    CRD from the inner ones. One rank-6 region."""

    op_type = "DepthToSpace"
    attrs = {"blocksize": Attr("int"), "mode": Attr("string", "DCR")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        n, c, h, w = _nchw(ctx)
        b = ctx.attrs["blocksize"]
        if ctx.attrs["mode"] not in ("DCR", "CRD"):
            raise ctx.fail(f"mode must be DCR or CRD, got {ctx.attrs['mode']!r}")
        if c % (b * b):
            raise ctx.fail(f"channels {c} are not a multiple of blocksize^2 = {b * b}")
        return [TensorSpec((n, c // (b * b), h * b, w * b), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        n, c, h, w = ctx.shape(0)
        b = ctx.attrs["blocksize"]
        if ctx.attrs["mode"] == "DCR":
            region = _permuted_region((n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2))
        else:
            region = _permuted_region((n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))
        return [RasterPlan([region])]


@register_op
class SpaceToDepth(Movement):
    """(N, C, H, W) -> (N, C*b^2, H/b, W/b): block offsets outermost in the channels (mode DCR, the
    default) or innermost (CRD, the inverse of DepthToSpace's CRD)."""

    op_type = "SpaceToDepth"
    attrs = {"blocksize": Attr("int"), "mode": Attr("string", "DCR")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        n, c, h, w = _nchw(ctx)
        b = ctx.attrs["blocksize"]
        if h % b or w % b:
            raise ctx.fail(f"height {h} and width {w} must be multiples of blocksize {b}")
        return [TensorSpec((n, c * b * b, h // b, w // b), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        n, c, h, w = ctx.shape(0)
        b = ctx.attrs["blocksize"]
        if ctx.attrs["mode"] not in ("DCR", "CRD"):
            raise ctx.fail(f"mode must be DCR or CRD, got {ctx.attrs['mode']!r}")
        order = (0, 3, 5, 1, 2, 4) if ctx.attrs["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
        return [RasterPlan([_permuted_region((n, c, h // b, b, w // b, b), order)])]
