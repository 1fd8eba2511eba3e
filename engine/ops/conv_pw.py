"""ConvPw: a dense Conv (one group) followed by the 1x1 (pointwise) Conv that reads it, as one op.

    y = act(pw(conv_act(conv(x) + b)) + b_pw + residual)

Inputs: x (N, C_in, spatial...), w (C_mid, C_in, k...), b (C_mid) or "", w_pw (C_out, C_mid, 1...),
b_pw (C_out) or "", residual (the output's shape) or "". The first stage is the IR Conv with one
group: it takes Conv's window attributes (strides, dilations, pads, auto_pad: same names and forms)
and its fused activation `conv_activation`; the pointwise stage (stride 1, no padding) takes
`activation`.

The converter makes it from a Conv with few output channels whose only reader is a 1x1 Conv with
few output channels (tools/convert/fusion_conv_pw.py): a network's head (3x3 conv -> 1x1 conv to
classes). On the GPU the pair then runs as one dispatch that keeps the first conv's output in
registers: a dispatch and the write and read of that tensor saved.
"""
from __future__ import annotations

import math

from .base import InferContext, OpDef, TensorSpec, get_op, register_op
from .conv import ACTIVATION_ATTRS, WINDOW_ATTRS, check_activation, stage_activation_attrs
from .unary import UNARY_KINDS

X, W, B, W_PW, B_PW, RESIDUAL = range(6)


def conv_context(ctx: InferContext) -> InferContext:
    """The first stage's shape-function context: the IR Conv's attributes (one group) and inputs."""
    attrs = {key: ctx.attrs[key] for key in WINDOW_ATTRS}
    attrs.update(group=1, activation=ctx.attrs["conv_activation"],
                 activation_alpha=ctx.attrs["conv_activation_alpha"],
                 activation_beta=ctx.attrs["conv_activation_beta"])
    return InferContext(ctx.node, attrs, list(ctx.inputs[:3]), list(ctx.values[:3]))


def conv_spec(ctx: InferContext) -> TensorSpec:
    """The first stage's output (its shape errors worded by the IR Conv's shape function)."""
    kind = ctx.attrs["conv_activation"]
    if kind and kind not in UNARY_KINDS:
        raise ctx.fail(f"unknown conv activation {kind!r}; expected one of {sorted(UNARY_KINDS)}")
    return get_op("Conv").infer(conv_context(ctx))[0]


@register_op
class ConvPw(OpDef):
    op_type = "ConvPw"
    family = "conv"
    attrs = {
        **WINDOW_ATTRS,
        **stage_activation_attrs("conv"),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        middle = conv_spec(ctx)
        channels, rank = middle.shape[1], len(middle.shape) - 2
        wp = ctx.shape(W_PW)
        if len(wp) != rank + 2 or wp[1] != channels or any(k != 1 for k in wp[2:]):
            raise ctx.fail(f"pointwise weight must be (C_out, {channels}, {', '.join(['1'] * rank)}), got {list(wp)}")
        dtype = middle.dtype
        if ctx.dtype(W_PW) != dtype:
            raise ctx.fail(f"pointwise weight type {ctx.dtype(W_PW)} differs from input type {dtype}")
        if ctx.has(B_PW) and (tuple(ctx.shape(B_PW)) != (wp[0],) or ctx.dtype(B_PW) != dtype):
            raise ctx.fail(f"pointwise bias must be {dtype} of shape ({wp[0]},), got "
                           f"{ctx.dtype(B_PW)} {list(ctx.shape(B_PW))}")
        check_activation(ctx)
        shape = (middle.shape[0], wp[0], *middle.shape[2:])
        if ctx.has(RESIDUAL) and (tuple(ctx.shape(RESIDUAL)) != shape or ctx.dtype(RESIDUAL) != dtype):
            raise ctx.fail(f"residual must be {dtype} of the output's shape {list(shape)}, got "
                           f"{ctx.dtype(RESIDUAL)} {list(ctx.shape(RESIDUAL))}")
        return [TensorSpec(shape, dtype)]

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        y = outputs[0]
        pixels = y.shape[0] * math.prod(y.shape[2:])
        w = ctx.shape(W)
        conv = 2 * pixels * math.prod(w)
        return conv + 2 * y.size * w[0] + (y.size if ctx.has(RESIDUAL) else 0)
