"""GlobalPoolMatMul: a classifier head, global pooling and the matrix product reading it, as one op.

    y = act(alpha * pool(x).reshape(N, C) @ op(B) + beta * bias)

Inputs: x (N, C, spatial...) float; B, 2-D constant-shaped weights ((C, K), or (K, C) with
trans_b); bias "" or a tensor that broadcasts onto (N, K) without an N axis: shape (), (1,), (K,),
(1, 1) or (1, K). Attributes: `kind` (avg or max, as GlobalPool's), trans_b, alpha, beta and the
fused activation (activation, activation_alpha, activation_beta), as MatMul's.

Output: y (N, K). The converter makes it from GlobalPool -> Flatten / Reshape to (N, C) -> MatMul
(tools/convert/fusion_pool_matmul.py).
"""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, get_op, register_op
from .conv import ACTIVATION_ATTRS
from .pool import FLOAT_TYPES

X, B, BIAS = range(3)
MATMUL_ATTRS = ("trans_b", "alpha", "beta", *ACTIVATION_ATTRS)


def pooled_spec(ctx: InferContext) -> TensorSpec:
    """The pool stage's output (N, C, 1, ...), shape errors worded by GlobalPool's function."""
    if any(ctx.node.inputs[3:]):
        raise ctx.fail("takes 3 inputs (x, B, bias): a residual is not part of the fused op")
    pool = InferContext(ctx.node, {"kind": ctx.attrs["kind"]}, list(ctx.inputs[:1]), list(ctx.values[:1]))
    return get_op("GlobalPool").infer(pool)[0]


def matmul_context(ctx: InferContext, pooled: TensorSpec) -> InferContext:
    """The MatMul stage's context: A = the pooled (N, C), then B and the bias."""
    attrs = {"trans_a": 0, **{key: ctx.attrs[key] for key in MATMUL_ATTRS}}
    a = TensorSpec(pooled.shape[:2], pooled.dtype)
    inputs = [a, *(list(ctx.inputs[1:3]) + [None])[:2]]
    values = [None, *(list(ctx.values[1:3]) + [None, None])[:2]]
    return InferContext(ctx.node, attrs, inputs, values)


@register_op
class GlobalPoolMatMul(OpDef):
    op_type = "GlobalPoolMatMul"
    family = "pool"
    kinds = ("avg", "max")
    attrs = {
        "kind": Attr("string"),
        "trans_b": Attr("int", 0),
        "alpha": Attr("float", 1.0),
        "beta": Attr("float", 1.0),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        pooled = pooled_spec(ctx)
        if pooled.dtype not in FLOAT_TYPES:
            raise ctx.fail(f"needs a float input, got {pooled.dtype}")
        if len(ctx.shape(B)) != 2:
            raise ctx.fail(f"weights B must be 2-D, got shape {list(ctx.shape(B))}")
        if ctx.has(BIAS):
            bias = tuple(ctx.shape(BIAS))
            if len(bias) > 2 or (len(bias) == 2 and bias[0] != 1):
                raise ctx.fail(f"bias of shape {list(bias)} must not depend on N: (), (1,), (K,), (1, 1) or (1, K)")
        return get_op("MatMul").infer(matmul_context(ctx, pooled))

    def flops(self, ctx: InferContext, outputs: list[TensorSpec]) -> int:
        n, k = outputs[0].shape
        return math.prod(ctx.shape(X)) + 2 * n * k * ctx.shape(X)[1]
