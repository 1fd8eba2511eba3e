"""Norm family (inference): "BatchNorm" (running statistics), "LayerNorm" (over the trailing
axes from `axis`, optional Mean / InvStdDev outputs), "InstanceNorm" (per sample and channel over
the spatial axes), "GroupNorm" (per sample and group of channels), "RMSNorm" (root mean square
over the trailing axes), "LpNorm" (L1 / L2 norm along one axis), "LRN" (local response
normalization across neighbouring channels).

normalization across neighbouring channels) and "MeanVarianceNorm" (over any set of axes)."""
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


def _check_stash(ctx: InferContext) -> str:
    stash = ctx.attrs["stash_dtype"]
    if stash not in FLOAT_TYPES:
        raise ctx.fail(f"stash type {stash!r} is not one of {list(FLOAT_TYPES)}")
    return stash


def _check_trailing_params(ctx: InferContext, normalized: tuple, indices) -> None:
    """Scale and bias broadcast onto the normalized (trailing) axes, never onto the outer ones."""
    for i in indices:
        if not ctx.has(i):
            continue
        shape = tuple(ctx.shape(i))
        if len(shape) > len(normalized) or any(
                s not in (1, n) for s, n in zip(reversed(shape), reversed(normalized), strict=False)):
            raise ctx.fail(f"parameter {i} of shape {shape} does not broadcast to the normalized axes {normalized}")
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


SKIP = 3  # LayerNorm's optional input added to X before the statistics


@register_op
class LayerNorm(OpDef):
    """LayerNormalization of X over its axes from `axis`, or of X + Skip where the optional input 3
    is set (the converter folds a transformer's embedding sum into it): Skip has X's type and
    whole normalized rows, and broadcasts onto X over the leading axes only."""

    op_type = "LayerNorm"
    family = "norm"
    attrs = {"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_dtype": Attr("string", "float32")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        axis = ctx.axis(ctx.attrs["axis"], len(x))
        stash = _check_stash(ctx)
        normalized = tuple(x[axis:])
        _check_trailing_params(ctx, normalized, (1, 2))
        if ctx.has(SKIP):
            skip = tuple(ctx.shape(SKIP))
            leading = skip[:len(skip) - len(normalized)]
            if (ctx.dtype(SKIP) != ctx.dtype(0) or len(skip) > len(x) or skip[len(leading):] != normalized
                    or any(s not in (1, n) for s, n in zip(reversed(leading), reversed(x[:axis]), strict=False))):
                raise ctx.fail(f"skip of shape {skip} ({ctx.dtype(SKIP)}) must be X's type with whole rows "
                               f"{normalized}, broadcasting onto X {tuple(x)} over the leading axes only")
        stats = tuple(x[:axis]) + (1,) * len(normalized)
        return [TensorSpec(x, ctx.dtype(0)), TensorSpec(stats, stash), TensorSpec(stats, stash)]

    def flops(self, ctx, outputs) -> int:
        return 6 * outputs[0].size


@register_op
class RMSNorm(OpDef):
    """y = x / sqrt(mean(x^2 over the axes from `axis`) + epsilon) * scale (ONNX RMSNormalization-23)."""

    op_type = "RMSNorm"
    family = "norm"
    attrs = {"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_dtype": Attr("string", "float32")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        axis = ctx.axis(ctx.attrs["axis"], len(x))
        _check_stash(ctx)
        _check_trailing_params(ctx, tuple(x[axis:]), (1,))
        return [TensorSpec(x, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 4 * outputs[0].size


@register_op
class GroupNorm(OpDef):
    """Normalization over each group of C / num_groups consecutive channels (and every spatial
    element) of a sample, then y * scale + bias. Scale and bias are per channel (C,), or with
    per_group=1 per group (num_groups,) as in ONNX GroupNormalization-18."""

    op_type = "GroupNorm"
    family = "norm"
    attrs = {"num_groups": Attr("int"), "epsilon": Attr("float", 1e-5), "per_group": Attr("int", 0),
             "stash_dtype": Attr("string", "float32")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        _check_stash(ctx)
        x = ctx.shape(0)
        if len(x) < 2:
            raise ctx.fail(f"input must be (N, C, ...), got rank {len(x)}")
        groups = ctx.attrs["num_groups"]
        if groups < 1 or x[1] % groups:
            raise ctx.fail(f"num_groups {groups} must be positive and divide the {x[1]} channels")
        expected = (groups,) if ctx.attrs["per_group"] else (x[1],)
        for i in (1, 2):
            if tuple(ctx.shape(i)) != expected:
                raise ctx.fail(f"parameter {i} has shape {tuple(ctx.shape(i))}; expected {expected}")
            if ctx.dtype(i) not in FLOAT_TYPES:
                raise ctx.fail(f"parameter {i} must be float, got {ctx.dtype(i)}")
        return [TensorSpec(x, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 6 * outputs[0].size


@register_op
class LpNorm(OpDef):
    """y = x / ||x||_p along `axis` (p 1 or 2); a zero norm gives 0 (as onnx.reference and
    onnxruntime)."""

    op_type = "LpNorm"
    family = "norm"
    attrs = {"axis": Attr("int", -1), "p": Attr("int", 2)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        ctx.axis(ctx.attrs["axis"], len(x))
        if not x:
            raise ctx.fail("input must have at least one axis")
        if ctx.attrs["p"] not in (1, 2):
            raise ctx.fail(f"p must be 1 or 2, got {ctx.attrs['p']}")
        return [TensorSpec(x, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 3 * outputs[0].size


@register_op
class LRN(OpDef):
    """Local response normalization across channels (axis 1):
    y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)//2, c + size//2]) ^ beta."""

    op_type = "LRN"
    family = "norm"
    attrs = {"size": Attr("int"), "alpha": Attr("float", 1e-4), "beta": Attr("float", 0.75),
             "bias": Attr("float", 1.0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        if len(x) < 2:
            raise ctx.fail(f"input must be (N, C, ...), got rank {len(x)}")
        if ctx.attrs["size"] < 1:
            raise ctx.fail(f"size must be positive, got {ctx.attrs['size']}")
        return [TensorSpec(x, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return (ctx.attrs["size"] * 2 + 4) * outputs[0].size


@register_op
class MeanVarianceNorm(OpDef):
    """y = (x - mean) / (sqrt(variance) + epsilon), statistics over `axes` (any subset, not only
    trailing ones: ONNX MeanVarianceNormalization defaults to [0, 2, 3]). Epsilon is added to the
    standard deviation, as in the ONNX function body."""

    op_type = "MeanVarianceNorm"
    family = "norm"
    attrs = {"axes": Attr("ints", [0, 2, 3]), "epsilon": Attr("float", 1e-9)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        _check_float(ctx)
        x = ctx.shape(0)
        axes = [ctx.axis(a, len(x)) for a in ctx.attrs["axes"]]
        if not axes or len(set(axes)) != len(axes):
            raise ctx.fail(f"axes {ctx.attrs['axes']} must be distinct and not empty")
        return [TensorSpec(x, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 6 * outputs[0].size
