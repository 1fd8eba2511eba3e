"""Geometry lowering: data-movement ops become Raster regions (MNN's "raster").

A region copies a strided box of elements from one source tensor into the destination:
for every index i in ndindex(size): dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides].
Offsets and strides count elements of the flat, contiguous tensors. Elements that no region
writes take the plan's fill value. Regions are simplified (size-1 dims dropped, contiguous dims
coalesced) and adjacent regions that continue each other are merged into one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ops.base import Attr, InferContext, OpDef, TensorSpec, register_op


@dataclass
class Region:
    src: int
    size: tuple[int, ...]
    src_offset: int
    src_strides: tuple[int, ...]
    dst_offset: int
    dst_strides: tuple[int, ...]

    @property
    def count(self) -> int:
        return int(np.prod(self.size, dtype=np.int64))


@dataclass
class RasterPlan:
    regions: list[Region] = field(default_factory=list)
    fill: float | None = None  # value of elements no region covers; None when regions cover all


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(dim), 1)
    return tuple(reversed(strides))


def copy_region(shape, src: int = 0, src_offset: int = 0, dst_offset: int = 0) -> Region:
    """A region copying a whole contiguous tensor of this shape."""
    strides = contiguous_strides(shape)
    return Region(src, tuple(shape), src_offset, strides, dst_offset, strides)


def simplify(region: Region) -> Region | None:
    """Drop size-1 dims and coalesce dims contiguous in both src and dst; None if empty."""
    if any(s == 0 for s in region.size):
        return None
    dims = [(s, a, b) for s, a, b in zip(region.size, region.src_strides, region.dst_strides) if s != 1]
    merged: list[tuple[int, int, int]] = []
    for size, src_stride, dst_stride in dims:
        if merged:
            outer_size, outer_src, outer_dst = merged[-1]
            if outer_src == src_stride * size and outer_dst == dst_stride * size:
                merged[-1] = (outer_size * size, src_stride, dst_stride)
                continue
        merged.append((size, src_stride, dst_stride))
    if not merged:
        merged = [(1, 1, 1)]
    return Region(region.src, tuple(m[0] for m in merged), region.src_offset,
                  tuple(m[1] for m in merged), region.dst_offset, tuple(m[2] for m in merged))


def merge_regions(regions: list[Region]) -> list[Region]:
    """Merge runs of regions that differ only by constant offset steps into one region with an
    extra outer dimension (e.g. Gather of consecutive rows, Concat of equal slices)."""
    result: list[Region] = []
    run: list[Region] = []

    def flush():
        if not run:
            return
        if len(run) == 1:
            result.append(run[0])
        else:
            first = run[0]
            merged = Region(first.src, (len(run),) + first.size, first.src_offset,
                            (run[1].src_offset - first.src_offset,) + first.src_strides,
                            first.dst_offset, (run[1].dst_offset - first.dst_offset,) + first.dst_strides)
            result.append(simplify(merged))
        run.clear()

    for region in regions:
        if run:
            first = run[0]
            same = (region.src == first.src and region.size == first.size
                    and region.src_strides == first.src_strides
                    and region.dst_strides == first.dst_strides)
            if same and len(run) == 1:
                run.append(region)
                continue
            if same:
                d_src = run[1].src_offset - first.src_offset
                d_dst = run[1].dst_offset - first.dst_offset
                if (region.src_offset - run[-1].src_offset == d_src
                        and region.dst_offset - run[-1].dst_offset == d_dst):
                    run.append(region)
                    continue
            flush()
        run.append(region)
    flush()
    return result


def finalize(plan: RasterPlan) -> RasterPlan:
    regions = [r for r in (simplify(r) for r in plan.regions) if r is not None]
    return RasterPlan(merge_regions(regions), plan.fill)


@register_op
class Raster(OpDef):
    """Created by geometry lowering at resize; never stored in model files."""

    op_type = "Raster"
    family = "raster"
    attrs: dict[str, Attr] = {}  # its RasterPlan travels on the session step, not as attributes

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        raise ctx.fail("Raster nodes are made by geometry lowering, not read from models")

    def flops(self, ctx, outputs) -> int:
        return 0
