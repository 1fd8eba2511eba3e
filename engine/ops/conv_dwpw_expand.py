"""ConvDwPwExpand: a ConvDwPw (depthwise conv, 1x1 project conv, residual) followed by the next
MobileNet block's 1x1 expand conv, as one op.

    block = ConvDwPw(x, w_dw, b_dw, w_pw, b_pw, residual)     (engine/ops/conv_dwpw.py)
    y = ex_act(w_ex * block + b_ex)

Inputs: ConvDwPw's six (x, w_dw, b_dw, w_pw, b_pw, residual), then w_ex (C_ex, C_out, 1...) and
b_ex (C_ex) or "". Attributes: ConvDwPw's, plus the expand stage's fused activation `ex_activation`.
Outputs: y, and block when the op's second output is named (another node reads the block output:
the next block's residual). The converter makes it (tools/convert/fusion_dwpw_expand.py) so the GPU
runs one dispatch where it ran two: at small images a dispatch's fixed cost dominates.
"""
from __future__ import annotations

from .base import InferContext, OpDef, TensorSpec, register_op
from .conv import ACTIVATION_ATTRS, WINDOW_ATTRS, stage_activation_attrs
from .conv_dwpw import ConvDwPw
from .unary import UNARY_KINDS

W_EX, B_EX = 6, 7


def keeps_block(node) -> bool:
    """Whether the op also outputs the ConvDwPw result (its second output is named)."""
    return len(node.outputs) > 1 and bool(node.outputs[1])


@register_op
class ConvDwPwExpand(OpDef):
    op_type = "ConvDwPwExpand"
    family = "conv"
    attrs = {
        **WINDOW_ATTRS,
        **stage_activation_attrs("dw"),
        **ACTIVATION_ATTRS,
        **stage_activation_attrs("ex"),
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        (block,) = ConvDwPw.infer(self, ctx)
        if not ctx.has(W_EX):
            raise ctx.fail("the expand weight (input 6) is required")
        we = ctx.shape(W_EX)
        rank = len(block.shape)
        if len(we) != rank or we[1] != block.shape[1] or any(k != 1 for k in we[2:]):
            raise ctx.fail(f"expand weight must be (C_ex, {block.shape[1]}, {', '.join(['1'] * (rank - 2))}), "
                           f"got {list(we)}")
        if ctx.dtype(W_EX) != block.dtype:
            raise ctx.fail(f"expand weight type {ctx.dtype(W_EX)} differs from input type {block.dtype}")
        if ctx.has(B_EX) and (tuple(ctx.shape(B_EX)) != (we[0],) or ctx.dtype(B_EX) != block.dtype):
            raise ctx.fail(f"expand bias must be {block.dtype} of shape ({we[0]},), got {ctx.dtype(B_EX)} "
                           f"{list(ctx.shape(B_EX))}")
        kind = ctx.attrs["ex_activation"]
        if kind and kind not in UNARY_KINDS:
            raise ctx.fail(f"unknown expand activation {kind!r}; expected one of {sorted(UNARY_KINDS)}")
        y = TensorSpec((block.shape[0], we[0], *block.shape[2:]), block.dtype)
        return [y, block] if keeps_block(ctx.node) else [y]

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        y = outputs[0]
        block = ConvDwPw.infer(self, ctx)[0]
        return ConvDwPw.flops(self, ctx, [block]) + 2 * y.size * block.shape[1]
