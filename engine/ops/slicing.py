"""Data movement that selects or joins parts of tensors: Concat, Slice, Split, Gather.

Each part is one region over the tensor viewed as (outer, axis, inner); Gather with indices known at
resize is one region per index (the session merges runs of consecutive indices), otherwise its
numpy kernel runs.
"""
from __future__ import annotations

import numpy as np

from ..geometry import RasterPlan, Region, contiguous_strides
from .base import Attr, InferContext, TensorSpec, register_op
from .movement import Movement, int_values, normalize_axes

# Gather lowers to one region per index up to this many indices; beyond, a vectorised kernel is
# cheaper than a long list of regions.
GATHER_REGION_LIMIT = 64


def _split3(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, axis dim, inner) of a shape around axis."""
    return (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _band(src: int, outer: int, count: int, inner: int, src_dim: int, src_start: int,
          dst_dim: int, dst_start: int) -> Region:
    """Copy `count` consecutive positions along the axis of a tensor viewed as (outer, dim, inner)."""
    return Region(src, (outer, count * inner), src_start * inner, (src_dim * inner, 1),
                  dst_start * inner, (dst_dim * inner, 1))


@register_op
class Concat(Movement):
    """Concat(*inputs) along axis; empty inputs contribute nothing. One region per input."""

    op_type = "Concat"
    attrs = {"axis": Attr("int")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        present = [i for i in range(len(ctx.inputs)) if ctx.has(i)]
        if not present:
            raise ctx.fail("Concat needs at least one input")
        first = ctx.shape(present[0])
        if not first:
            raise ctx.fail("Concat inputs must have rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(first))
        total = 0
        for i in present:
            shape = ctx.shape(i)
            mismatch = len(shape) != len(first) or any(
                a != b for k, (a, b) in enumerate(zip(shape, first, strict=True)) if k != axis)
            if mismatch:
                raise ctx.fail(f"input {i} of shape {list(shape)} does not match {list(first)} "
                               f"outside axis {axis}")
            if ctx.dtype(i) != ctx.dtype(present[0]):
                raise ctx.fail(f"inputs differ in type: {ctx.dtype(present[0])} and {ctx.dtype(i)}")
            total += shape[axis]
        out = list(first)
        out[axis] = total
        return [TensorSpec(tuple(out), ctx.dtype(present[0]))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        out = outputs[0].shape
        axis = ctx.axis(ctx.attrs["axis"], len(out))
        outer, dim, inner = _split3(out, axis)
        regions, offset = [], 0
        for i in range(len(ctx.inputs)):
            if ctx.has(i):
                count = ctx.shape(i)[axis]
                regions.append(_band(i, outer, count, inner, count, 0, dim, offset))
                offset += count
        return [RasterPlan(regions)]


@register_op
class Slice(Movement):
    """Slice(data, starts, ends, axes?, steps?): numpy slicing, out-of-range bounds clamped,
    negative steps walk backwards. One region with step-multiplied strides."""

    op_type = "Slice"
    value_inputs = (1, 2, 3, 4)

    def _ranges(self, ctx: InferContext) -> list[range]:
        shape = ctx.shape(0)
        starts = int_values(ctx, 1, "starts")
        ends = int_values(ctx, 2, "ends")
        axes = int_values(ctx, 3, "axes") if ctx.has(3) else list(range(len(starts)))
        steps = int_values(ctx, 4, "steps") if ctx.has(4) else [1] * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
        if 0 in steps:
            raise ctx.fail(f"steps {steps} contain 0")
        ranges = [range(d) for d in shape]
        for axis, start, end, step in zip(normalize_axes(ctx, axes, len(shape)), starts, ends, steps, strict=True):
            # Python's slice clamping is ONNX's: [0, d] for positive steps, [-1, d-1] for negative.
            ranges[axis] = range(*slice(start, end, step).indices(shape[axis]))
        return ranges

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        return [TensorSpec(tuple(len(r) for r in self._ranges(ctx)), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        ranges = self._ranges(ctx)
        strides = contiguous_strides(ctx.shape(0))
        out = outputs[0].shape
        offset = sum(r.start * s for r, s in zip(ranges, strides, strict=True) if len(r))
        region = Region(0, out, offset, tuple(r.step * s for r, s in zip(ranges, strides, strict=True)),
                        0, contiguous_strides(out))
        return [RasterPlan([region])]


@register_op
class Split(Movement):
    """Split(data, split?) along axis into len(outputs) parts: the given sizes, or chunks of
    ceil(dim / outputs) with a smaller last one. One plan per output."""

    op_type = "Split"
    attrs = {"axis": Attr("int", 0)}
    value_inputs = (1,)

    def _sizes(self, ctx: InferContext) -> tuple[int, list[int]]:
        shape = ctx.shape(0)
        if not shape:
            raise ctx.fail("Split needs an input of rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        parts = len(ctx.node.outputs)
        dim = shape[axis]
        if ctx.has(1):
            sizes = int_values(ctx, 1, "split")
            if len(sizes) != parts or sum(sizes) != dim or any(s < 0 for s in sizes):
                raise ctx.fail(f"split {sizes} must be {parts} non-negative sizes adding up to {dim}")
            return axis, sizes
        chunk = -(-dim // parts)
        sizes = [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]
        if sizes[-1] < 0:
            raise ctx.fail(f"cannot split {dim} into {parts} chunks of {chunk}")
        return axis, sizes

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        axis, sizes = self._sizes(ctx)
        shape = ctx.shape(0)
        return [TensorSpec((*shape[:axis], s, *shape[axis + 1:]), ctx.dtype(0)) for s in sizes]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        axis, sizes = self._sizes(ctx)
        outer, dim, inner = _split3(ctx.shape(0), axis)
        plans, offset = [], 0
        for size in sizes:
            plans.append(RasterPlan([_band(0, outer, size, inner, dim, offset, size, 0)]))
            offset += size
        return plans


def normalize_indices(indices: np.ndarray, dim: int) -> np.ndarray | None:
    """Indices with negative ones counted from the end; None if any is out of [-dim, dim)."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and (indices.min() < -dim or indices.max() >= dim):
        return None
    return np.where(indices < 0, indices + dim, indices)


@register_op
class Gather(Movement):
    """Gather(data, indices) along axis: data.shape[:axis] + indices.shape + data.shape[axis+1:]."""

    op_type = "Gather"
    attrs = {"axis": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, indices_shape = ctx.shape(0), ctx.shape(1)
        if not shape:
            raise ctx.fail("Gather needs data of rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        if ctx.dtype(1) not in ("int32", "int64"):
            raise ctx.fail(f"indices must be int32 or int64, got {ctx.dtype(1)}")
        known = ctx.value(1, required=False)
        if known is not None and normalize_indices(known, shape[axis]) is None:
            raise ctx.fail(f"indices {np.asarray(known).reshape(-1).tolist()[:8]} are out of range "
                           f"for axis {axis} of size {shape[axis]}")
        return [TensorSpec(shape[:axis] + tuple(indices_shape) + shape[axis + 1:], ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan] | None:
        known = ctx.value(1, required=False)
        if known is None or np.size(known) > GATHER_REGION_LIMIT:
            return None  # run-time indices (or many of them): the numpy kernel runs
        shape = ctx.shape(0)
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        outer, dim, inner = _split3(shape, axis)
        indices = normalize_indices(known, dim).reshape(-1).tolist()
        count = len(indices)
        return [RasterPlan([_band(0, outer, 1, inner, dim, index, count, k)
                            for k, index in enumerate(indices)])]
