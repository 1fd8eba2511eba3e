"""Pad(data, pads, constant_value?, axes?) with modes constant, reflect, edge and wrap.

Negative pads crop (first, as onnxruntime does; the modes then pad the cropped tensor). Lowering:
each axis maps output positions to source positions (-1 = fill); that map splits into a few
arithmetic runs (stride 1 for the kept part, -1 for reflections, 0 for edges), and the cartesian
product of the runs over the axes gives the regions. Constant mode is one region plus a fill.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..geometry import RasterPlan, Region, contiguous_strides
from .base import Attr, InferContext, TensorSpec, register_op
from .movement import Movement, int_values, normalize_axes

MODES = ("constant", "reflect", "edge", "wrap")


def axis_pads(ctx: InferContext) -> list[tuple[int, int]]:
    """(begin, end) pads for every axis of the input."""
    rank = len(ctx.shape(0))
    pads = int_values(ctx, 1, "pads")
    axes = normalize_axes(ctx, int_values(ctx, 3, "axes"), rank) if ctx.has(3) else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"pads {pads} must hold 2 values per padded axis ({len(axes)} axes)")
    result = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        result[axis] = (pads[i], pads[len(axes) + i])
    return result


def source_map(ctx: InferContext, dim: int, begin: int, end: int, mode: str) -> np.ndarray:
    """Source index of every output position along one axis; -1 where the fill value goes."""
    low, high = max(-begin, 0), dim - max(-end, 0)
    if high < low:
        raise ctx.fail(f"pads ({begin}, {end}) crop more than the axis size {dim}")
    core = np.arange(low, high, dtype=np.int64)
    before, after = max(begin, 0), max(end, 0)
    if mode == "constant":
        return np.concatenate([np.full(before, -1, np.int64), core, np.full(after, -1, np.int64)])
    if not (before or after):
        return core
    if core.size == 0:
        raise ctx.fail(f"{mode} padding needs a non-empty axis, got size {dim} with pads ({begin}, {end})")
    # numpy's pad modes are ONNX's (onnx.reference uses np.pad), applied to the index vector.
    return np.pad(core, (before, after), mode=mode)


def arithmetic_runs(index: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Split a source-index map into maximal runs (out_start, length, src_start, src_step),
    skipping -1 entries. Loops once per run, not per element."""
    runs = []
    position, n = 0, len(index)
    while position < n:
        rest = index[position:]
        if rest[0] < 0:
            valid = np.flatnonzero(rest >= 0)
            position = n if valid.size == 0 else position + int(valid[0])
            continue
        step = int(rest[1] - rest[0]) if n - position > 1 and rest[1] >= 0 else 1
        expected = rest[0] + step * np.arange(len(rest), dtype=np.int64)
        broken = np.flatnonzero((rest != expected) | (rest < 0))
        length = len(rest) if broken.size == 0 else int(broken[0])
        runs.append((position, length, int(rest[0]), step))
        position += length
    return runs


@register_op
class Pad(Movement):
    op_type = "Pad"
    attrs = {"mode": Attr("string", "constant")}
    value_inputs = (1, 2, 3)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.attrs["mode"] not in MODES:
            raise ctx.fail(f"mode must be one of {list(MODES)}, got {ctx.attrs['mode']!r}")
        out = []
        for dim, (begin, end) in zip(ctx.shape(0), axis_pads(ctx), strict=True):
            if max(-begin, 0) + max(-end, 0) > dim:
                raise ctx.fail(f"pads ({begin}, {end}) crop more than the axis size {dim}")
            out.append(dim + begin + end)
        return [TensorSpec(tuple(out), ctx.dtype(0))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan] | None:
        mode = ctx.attrs["mode"]
        shape, out = ctx.shape(0), outputs[0].shape
        fill = None
        if mode == "constant":
            value = ctx.value(2, required=False) if ctx.has(2) else np.zeros(1)
            if value is None:
                return None  # fill value computed at run time: the numpy kernel pads
            value = np.asarray(value).reshape(-1)
            fill = np.asarray(value[0] if value.size else 0).astype(outputs[0].dtype).item()
        per_axis = [arithmetic_runs(source_map(ctx, d, b, e, mode))
                    for d, (b, e) in zip(shape, axis_pads(ctx), strict=True)]
        src_strides, dst_strides = contiguous_strides(shape), contiguous_strides(out)
        regions = []
        for pieces in itertools.product(*per_axis):
            regions.append(Region(
                0, tuple(p[1] for p in pieces),
                sum(p[2] * s for p, s in zip(pieces, src_strides, strict=True)),
                tuple(p[3] * s for p, s in zip(pieces, src_strides, strict=True)),
                sum(p[0] * s for p, s in zip(pieces, dst_strides, strict=True)), dst_strides))
        return [RasterPlan(regions, fill)]
