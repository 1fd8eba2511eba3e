"""ConvMaxPool: a Conv and the max pooling that reads its output, as one op.

    conv = act(conv(x, w) + b),    y = maxpool(conv)

Inputs: x (N, C, spatial...), w (C_out, C / group, k...), b (C_out) or "" — Conv's first three
(no residual: it would have to come at the conv's resolution). The conv stage takes the IR Conv's
attributes (strides, dilations, pads, auto_pad, group, activation with alpha / beta); the pool
stage takes `pool_kernel_shape`, `pool_strides` (default 1), `pool_pads` (begin..., end...;
default 0) and `pool_ceil_mode`, as the IR Pool's kernel_shape, strides, pads and ceil_mode with
dilation 1. Pool pads must be smaller than the pool kernel, so every window holds a conv output:
windows simply skip the positions outside the conv output (MaxPool pads with -inf).

Outputs: y, the pooled result, and optionally the conv result itself (a second output named when
other nodes read it too, e.g. a UNet's skip connection: it is still written, but the pool neither
takes a dispatch nor reads it back).

The converter makes it from a Conv whose output a max Pool reads (tools/convert/fusion_conv_pool.py).
"""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, get_op, register_op
from .conv import ACTIVATION_ATTRS, WINDOW_ATTRS, window_count

X, W, B = range(3)
CONV_ATTRS = ("strides", "dilations", "pads", "auto_pad", "group", *ACTIVATION_ATTRS)


def keeps_conv(node) -> bool:
    """Whether the op also outputs the conv result (its second output is named)."""
    return len(node.outputs) > 1 and bool(node.outputs[1])


def conv_context(ctx: InferContext) -> InferContext:
    """The conv stage's shape-function context: the IR Conv's attributes and inputs."""
    attrs = {key: ctx.attrs[key] for key in CONV_ATTRS}
    return InferContext(ctx.node, attrs, list(ctx.inputs[:3]), list(ctx.values[:3]))


def conv_spec(ctx: InferContext) -> TensorSpec:
    """The conv stage's output (shape errors worded by the IR Conv's shape function)."""
    if any(ctx.node.inputs[3:]):
        raise ctx.fail("takes 3 inputs (x, w, b): a residual is not part of the fused op")
    return get_op("Conv").infer(conv_context(ctx))[0]


def pool_window(ctx: InferContext, sizes) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(kernel, strides, pads_begin, pads_end, output sizes) of the pool stage over conv outputs
    of spatial `sizes`."""
    rank = len(sizes)
    kernel = list(ctx.attrs["pool_kernel_shape"])
    if len(kernel) != rank or any(k < 1 for k in kernel):
        raise ctx.fail(f"pool_kernel_shape {kernel} should have {rank} positive entries")
    strides = list(ctx.attrs["pool_strides"]) or [1] * rank
    if len(strides) != rank or any(s < 1 for s in strides):
        raise ctx.fail(f"pool_strides {strides} should have {rank} positive entries")
    pads = list(ctx.attrs["pool_pads"]) or [0] * (2 * rank)
    if len(pads) != 2 * rank or any(p < 0 for p in pads):
        raise ctx.fail(f"pool_pads {pads} should have {2 * rank} non-negative entries (begin and end per axis)")
    begin, end = pads[:rank], pads[rank:]
    if any(p >= k for k, p in zip(kernel * 2, begin + end, strict=True)):
        raise ctx.fail(f"pool_pads {pads} must be smaller than the pool kernel {kernel}")
    ceil_mode = bool(ctx.attrs["pool_ceil_mode"])
    out = [window_count(n, k, s, 1, b, e, ceil_mode)
           for n, k, s, b, e in zip(sizes, kernel, strides, begin, end, strict=True)]
    if any(n <= 0 for n in out):
        raise ctx.fail(f"the pool window {kernel} does not fit the padded conv output {list(sizes)}")
    return kernel, strides, begin, end, out


@register_op
class ConvMaxPool(OpDef):
    op_type = "ConvMaxPool"
    family = "conv"
    attrs = {
        **WINDOW_ATTRS,
        "group": Attr("int", 1),
        **ACTIVATION_ATTRS,
        "pool_kernel_shape": Attr("ints"),
        "pool_strides": Attr("ints", []),
        "pool_pads": Attr("ints", []),
        "pool_ceil_mode": Attr("int", 0),
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        conv = conv_spec(ctx)
        if conv.size == 0 and any(d == 0 for d in conv.shape[2:]):
            raise ctx.fail(f"cannot pool an empty conv output {list(conv.shape)}")
        *_, out = pool_window(ctx, conv.shape[2:])
        y = TensorSpec((conv.shape[0], conv.shape[1], *out), conv.dtype)
        return [y, conv] if keeps_conv(ctx.node) else [y]

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        conv = conv_spec(ctx)
        taps = math.prod(ctx.attrs["pool_kernel_shape"])
        return 2 * conv.size * math.prod(ctx.shape(W)[1:]) + outputs[0].size * taps
