"""Norm family (inference): "BatchNorm" (running statistics), "LayerNorm" (over the trailing
axes from `axis`, optional Mean / InvStdDev outputs), "InstanceNorm" (per sample and channel over
the spatial axes)."""
from __future__ import annotations

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

FLOAT_TYPES = ("float16", "float32", "float64")


def _check_float(ctx: InferContext) -> None:
    if ctx.dtype(0) not in FLOAT_TYPES:
        raise ctx.fail(f"normalization needs a float input, got {ctx.dtype(0)}")


def _check_channel_params(ctx: InferContext, indices) -> None:
    x = ctx.shape(0)
    if len(x) < 2:
        raise ctx.fail(f"input must be (N, C, ...), got rank {len(x)}")
    for i in indices:
        shape = tuple(ctx.shape(i))
        # (C,) per channel; (C, D1, ...) is the per-activation form of BatchNormalization-7 spatial=0.
        if shape != (x[1],) and shape != tuple(x[1:]):
            raise ctx.fail(f"parameter {i} has shape {shape}; expected ({x[1]},)")
        if ctx.dtype(i) not in FLOAT_TYPES:
            raise ctx.fail(f"parameter {i} must be float, got {ctx.dtype(i)}")


@register_op
class BatchNorm(OpDef):
    op_type = "BatchNorm"
    family = "norm"
    attrs = {"epsilon": Attr("float", 1e-5)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        _check_channel_params(ctx, range(1, 5))
        return [TensorSpec(ctx.shape(0), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 2 * outputs[0].size


@register_op
class InstanceNorm(OpDef):
    op_type = "InstanceNorm"
    family = "norm"
    attrs = {"epsilon": Attr("float", 1e-5)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        _check_channel_params(ctx, (1, 2))
        if len(ctx.shape(1)) != 1:
            raise ctx.fail(f"scale must have shape ({ctx.shape(0)[1]},), got {ctx.shape(1)}")
        return [TensorSpec(ctx.shape(0), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 6 * outputs[0].size


@register_op
class LayerNorm(OpDef):
    op_type = "LayerNorm"
    family = "norm"
    attrs = {"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_dtype": Attr("string", "float32")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        axis = ctx.axis(ctx.attrs["axis"], len(x))
        stash = ctx.attrs["stash_dtype"]
        if stash not in FLOAT_TYPES:
            raise ctx.fail(f"stash type {stash!r} is not one of {list(FLOAT_TYPES)}")
        normalized = tuple(x[axis:])
        for i in (1, 2):
            if not ctx.has(i):
                continue
            shape = tuple(ctx.shape(i))
            # Scale and bias broadcast onto the normalized axes (never onto the outer ones).
            if len(shape) > len(normalized) or any(
                    s not in (1, n) for s, n in zip(reversed(shape), reversed(normalized), strict=False)):
                raise ctx.fail(f"parameter {i} of shape {shape} does not broadcast to the normalized axes {normalized}")
        stats = tuple(x[:axis]) + (1,) * len(normalized)
        return [TensorSpec(x, ctx.dtype(0)), TensorSpec(stats, stash), TensorSpec(stats, stash)]

    def flops(self, ctx, outputs) -> int:
        return 6 * outputs[0].size
