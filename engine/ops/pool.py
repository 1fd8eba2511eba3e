"""Pool family: "Pool" (kind max / avg over sliding windows: kernel_shape, strides, pads,
dilations, ceil_mode, auto_pad, count_include_pad) and "GlobalPool" (kind avg / max over every
spatial axis, which are kept as size 1)."""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, register_op
from .conv import resolve_pads, spatial_list, window_count


def pool_geometry(ctx: InferContext):
    """(kernel, strides, dilations, pads_begin, pads_end, output sizes) for the concrete input."""
    x = ctx.shape(0)
    if len(x) < 3:
        raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
    rank = len(x) - 2
    kernel = list(ctx.attrs["kernel_shape"])
    if len(kernel) != rank or any(k < 1 for k in kernel):
        raise ctx.fail(f"kernel_shape {kernel} should have {rank} positive entries")
    strides = spatial_list(ctx, "strides", rank, 1)
    dilations = spatial_list(ctx, "dilations", rank, 1)
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ctx.fail(f"strides {strides} and dilations {dilations} must be positive")
    begin, end = resolve_pads(ctx, x[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attrs["ceil_mode"]) and ctx.attrs["auto_pad"] in ("NOTSET", "VALID")
    out = [window_count(n, k, s, d, b, e, ceil_mode)
           for n, k, s, d, b, e in zip(x[2:], kernel, strides, dilations, begin, end, strict=True)]
    if any(n <= 0 for n in out):
        raise ctx.fail(f"the window {kernel} (dilations {dilations}) does not fit the padded input")
    return kernel, strides, dilations, begin, end, out


@register_op
class Pool(OpDef):
    op_type = "Pool"
    family = "pool"
    kinds = ("max", "avg")
    attrs = {
        "kind": Attr("string"),
        "kernel_shape": Attr("ints"),
        "strides": Attr("ints", []),
        "dilations": Attr("ints", []),
        "pads": Attr("ints", []),
        "auto_pad": Attr("string", "NOTSET"),
        "ceil_mode": Attr("int", 0),
        "count_include_pad": Attr("int", 0),
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        if ctx.attrs["kind"] == "avg" and ctx.dtype(0) not in ("float16", "float32", "float64", "bfloat16"):
            raise ctx.fail(f"average pooling needs a float input, got {ctx.dtype(0)}")
        *_, out = pool_geometry(ctx)
        return [TensorSpec((x[0], x[1], *out), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return outputs[0].size * math.prod(ctx.attrs["kernel_shape"])


@register_op
class GlobalPool(OpDef):
    op_type = "GlobalPool"
    family = "pool"
    kinds = ("avg", "max")
    attrs = {"kind": Attr("string")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        if len(x) < 3:
            raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
        if any(d == 0 for d in x[2:]):
            raise ctx.fail("cannot pool over an empty spatial axis")
        return [TensorSpec((x[0], x[1], *([1] * (len(x) - 2))), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return math.prod(ctx.shape(0))
