"""Unary family: one op type "Unary" whose kind selects the function (ONNX Relu, Sigmoid, ...).

Parameters: alpha/beta (LeakyRelu alpha; HardSigmoid alpha, beta; Clip min, max).
"""
from __future__ import annotations

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# kind -> FLOPs per element (rough; transcendental functions count as several operations)
UNARY_KINDS: dict[str, int] = {
    "identity": 0, "relu": 1, "leaky_relu": 2, "sigmoid": 4, "hard_sigmoid": 3, "hard_swish": 4,
    "tanh": 4, "erf": 8, "gelu": 10, "gelu_tanh": 10, "exp": 4, "log": 4, "sqrt": 2, "neg": 1,
    "reciprocal": 1, "abs": 1, "floor": 1, "ceil": 1, "not": 1, "clip": 2, "softplus": 6,
}
# Kinds whose output is bool / keep the input dtype; everything else keeps the input dtype too.
BOOL_KINDS = frozenset({"not"})


@register_op
class Unary(OpDef):
    op_type = "Unary"
    family = "unary"
    kinds = tuple(UNARY_KINDS)
    attrs = {"kind": Attr("string"), "alpha": Attr("float", 0.0), "beta": Attr("float", 0.0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        return [TensorSpec(ctx.shape(0), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return outputs[0].size * UNARY_KINDS[ctx.attrs["kind"]]
