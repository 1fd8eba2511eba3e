"""Reduce family: "Reduce" (ONNX ReduceSum, ReduceMean, ReduceMax, ... as kinds) and "ArgReduce"
(ArgMax / ArgMin).

Reduce attributes are canonical: `axes` is always an attribute (the converter reads the ONNX
`axes` attribute or constant `axes` input); empty axes reduce every axis unless
`noop_with_empty_axes` is 1, in which case only the element-wise part of the kind runs (ReduceL2
becomes abs, ReduceSumSquare becomes square, ReduceLogSum becomes log, as the ONNX spec says).
"""
from __future__ import annotations

from typing import ClassVar

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# kind -> FLOPs per input element (rough; log/exp count as several operations)
REDUCE_KINDS: dict[str, int] = {
    "sum": 1, "mean": 1, "max": 1, "min": 1, "prod": 1, "l1": 2, "l2": 2, "sum_square": 2,
    "log_sum": 1, "log_sum_exp": 6,
}


def reduced_axes(attrs: dict, rank: int) -> tuple[int, ...]:
    """The (non-negative, sorted) axes a Reduce node reduces for an input of this rank.
    Assumes the axes were validated by Reduce.infer."""
    axes = attrs["axes"]
    if not axes:
        return () if attrs["noop_with_empty_axes"] else tuple(range(rank))
    return tuple(sorted(a + rank if a < 0 else a for a in axes))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@register_op
class Reduce(OpDef):
    op_type = "Reduce"
    family = "reduce"
    kinds = tuple(REDUCE_KINDS)
    attrs: ClassVar[dict[str, Attr]] = {"kind": Attr("string"), "axes": Attr("ints", []), "keepdims": Attr("int", 1),
             "noop_with_empty_axes": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        rank = len(shape)
        normalized = [ctx.axis(a, rank) for a in ctx.attrs["axes"]]
        if len(set(normalized)) != len(normalized):
            raise ctx.fail(f"axes {ctx.attrs['axes']} name an axis twice")
        kind = ctx.attrs["kind"]
        if kind in ("log_sum", "log_sum_exp") and ctx.dtype(0) not in ("float16", "float32", "float64"):
            raise ctx.fail(f"reduce {kind} needs a float input, got {ctx.dtype(0)}")
        axes = reduced_axes(ctx.attrs, rank)
        return [TensorSpec(reduced_shape(shape, axes, bool(ctx.attrs["keepdims"])), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        size = 1
        for d in ctx.shape(0):
            size *= d
        return size * REDUCE_KINDS[ctx.attrs["kind"]]


@register_op
class ArgReduce(OpDef):
    """Index of the largest (kind "max") or smallest ("min") element along one axis, as int64.
    Ties give the first index, or the last with select_last_index=1."""

    op_type = "ArgReduce"
    family = "reduce"
    kinds = ("max", "min")
    attrs: ClassVar[dict[str, Attr]] = {"kind": Attr("string"), "axis": Attr("int", 0), "keepdims": Attr("int", 1),
             "select_last_index": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        if not shape:
            raise ctx.fail("arg max/min needs an input of rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        if shape[axis] == 0:
            raise ctx.fail(f"arg {ctx.attrs['kind']} over axis {axis} of length 0 has no answer")
        return [TensorSpec(reduced_shape(shape, (axis,), bool(ctx.attrs["keepdims"])), "int64")]

    def flops(self, ctx, outputs) -> int:
        size = 1
        for d in ctx.shape(0):
            size *= d
        return size
