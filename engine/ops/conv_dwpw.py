"""ConvDwPw: a depthwise conv followed by a 1x1 (pointwise) conv, as one op.

    y = act(pw(dw_act(dw(x) + b_dw)) + b_pw + residual)

Inputs: x (N, C, spatial...), w_dw (C, 1, k...), b_dw (C) or "", w_pw (C_out, C, 1...), b_pw
(C_out) or "", residual (the output's shape) or "". The depthwise stage takes Conv's window
attributes (strides, dilations, pads, auto_pad: same names and forms as the IR Conv op) and its
fused activation `dw_activation`; the pointwise stage (stride 1, no padding) takes `activation`.

The converter makes it from a depthwise Conv whose only reader is a 1x1 Conv
(tools/convert/fusion_dwpw.py): on the GPU the pair then runs as one dispatch that never writes the
depthwise output, the widest tensor of a MobileNet block.
"""
from __future__ import annotations

import math

from .base import InferContext, OpDef, TensorSpec, register_op
from .conv import (
    ACTIVATION_ATTRS,
    WINDOW_ATTRS,
    check_activation,
    resolve_pads,
    spatial_list,
    stage_activation_attrs,
    window_count,
)
from .unary import UNARY_KINDS

X, W_DW, B_DW, W_PW, B_PW, RESIDUAL = range(6)


def dw_geometry(ctx: InferContext) -> tuple[list[int], list[int], list[int], list[int]]:
    """(strides, dilations, pads_begin, pads_end) of the depthwise stage for the concrete input."""
    x, w = ctx.shape(X), ctx.shape(W_DW)
    rank = len(x) - 2
    strides = spatial_list(ctx, "strides", rank, 1)
    dilations = spatial_list(ctx, "dilations", rank, 1)
    begin, end = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
    return strides, dilations, begin, end


@register_op
class ConvDwPw(OpDef):
    op_type = "ConvDwPw"
    family = "conv"
    attrs = {
        **WINDOW_ATTRS,
        **stage_activation_attrs("dw"),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x, wd, wp = ctx.shape(X), ctx.shape(W_DW), ctx.shape(W_PW)
        if len(x) < 3:
            raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
        channels, rank = x[1], len(x) - 2
        if len(wd) != len(x) or wd[0] != channels or wd[1] != 1:
            raise ctx.fail(f"depthwise weight must be ({channels}, 1, kernel...) of rank {len(x)}, got {list(wd)}")
        if len(wp) != len(x) or wp[1] != channels or any(k != 1 for k in wp[2:]):
            raise ctx.fail(f"pointwise weight must be (C_out, {channels}, {', '.join(['1'] * rank)}), got {list(wp)}")
        dtype = ctx.dtype(X)
        for i, what in ((W_DW, "depthwise weight"), (W_PW, "pointwise weight")):
            if ctx.dtype(i) != dtype:
                raise ctx.fail(f"{what} type {ctx.dtype(i)} differs from input type {dtype}")
        for i, size, what in ((B_DW, channels, "depthwise bias"), (B_PW, wp[0], "pointwise bias")):
            if ctx.has(i) and (tuple(ctx.shape(i)) != (size,) or ctx.dtype(i) != dtype):
                raise ctx.fail(f"{what} must be {dtype} of shape ({size},), got {ctx.dtype(i)} {list(ctx.shape(i))}")
        check_activation(ctx)
        kind = ctx.attrs["dw_activation"]
        if kind and kind not in UNARY_KINDS:
            raise ctx.fail(f"unknown depthwise activation {kind!r}; expected one of {sorted(UNARY_KINDS)}")
        strides, dilations, begin, end = dw_geometry(ctx)
        out = [window_count(*axis) for axis in zip(x[2:], wd[2:], strides, dilations, begin, end, strict=True)]
        if any(n <= 0 for n in out) and math.prod(x) > 0:
            raise ctx.fail(f"the depthwise kernel {list(wd[2:])} (dilations {dilations}) does not fit the padded input")
        shape = (x[0], wp[0], *out)
        if ctx.has(RESIDUAL) and (tuple(ctx.shape(RESIDUAL)) != shape or ctx.dtype(RESIDUAL) != dtype):
            raise ctx.fail(f"residual must be {dtype} of the output's shape {list(shape)}, got "
                           f"{ctx.dtype(RESIDUAL)} {list(ctx.shape(RESIDUAL))}")
        return [TensorSpec(shape, dtype)]

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        y = outputs[0]
        pixels = y.shape[0] * math.prod(y.shape[2:])
        channels = ctx.shape(X)[1]
        depthwise = 2 * pixels * channels * math.prod(ctx.shape(W_DW)[2:])
        return depthwise + 2 * y.size * channels + (y.size if ctx.has(RESIDUAL) else 0)
