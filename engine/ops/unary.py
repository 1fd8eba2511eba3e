"""Unary family: one op type "Unary" whose kind selects the function (ONNX Relu, Sigmoid, ...).

Parameters alpha/beta, per kind: LeakyRelu alpha; HardSigmoid alpha, beta; Clip min, max; Elu and
Celu alpha; Selu alpha, gamma (as beta); ThresholdedRelu alpha; Shrink lambd (alpha), bias (beta);
IsInf detect_negative (alpha), detect_positive (beta) as 0/1 flags.
"""
from __future__ import annotations

from ..dtypes import FLOAT_DTYPES, INT_DTYPES
from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# kind -> FLOPs per element (rough; transcendental functions count as several operations).
# These kinds keep the input's element type, so they may also be fused activations (engine/ops/conv.py).
UNARY_KINDS: dict[str, int] = {
    "identity": 0, "relu": 1, "leaky_relu": 2, "sigmoid": 4, "hard_sigmoid": 3, "hard_swish": 4,
    "tanh": 4, "erf": 8, "gelu": 10, "gelu_tanh": 10, "exp": 4, "log": 4, "sqrt": 2, "neg": 1,
    "reciprocal": 1, "abs": 1, "floor": 1, "ceil": 1, "not": 1, "clip": 2, "softplus": 6,
    "sign": 1, "round": 1, "softsign": 3, "elu": 5, "selu": 6, "celu": 6, "mish": 12,
    "thresholded_relu": 1, "shrink": 3, "sin": 4, "cos": 4, "tan": 8, "asin": 8, "acos": 8, "atan": 8,
    "sinh": 6, "cosh": 6, "asinh": 8, "acosh": 8, "atanh": 8, "bitwise_not": 1,
}
# Kinds whose output is bool (tests on float inputs); never fused activations.
PREDICATE_KINDS: dict[str, int] = {"isnan": 1, "isinf": 2}
# Input element types the newer kinds accept (as in ONNX); the older kinds are not checked.
FLOAT_ONLY_KINDS = frozenset({
    "isnan", "isinf", "round", "softsign", "elu", "selu", "celu", "mish", "thresholded_relu",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
})
INT_ONLY_KINDS = frozenset({"bitwise_not"})
NUMERIC_KINDS = frozenset({"sign", "shrink"})  # any number type, not bool


@register_op
class Unary(OpDef):
    op_type = "Unary"
    family = "unary"
    kinds = tuple(UNARY_KINDS) + tuple(PREDICATE_KINDS)
    attrs = {"kind": Attr("string"), "alpha": Attr("float", 0.0), "beta": Attr("float", 0.0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        kind, dtype = ctx.attrs["kind"], ctx.dtype(0)
        if kind in FLOAT_ONLY_KINDS and dtype not in FLOAT_DTYPES:
            raise ctx.fail(f"{kind} needs a float input, got {dtype}")
        if kind in INT_ONLY_KINDS and dtype not in INT_DTYPES:
            raise ctx.fail(f"{kind} needs an integer input, got {dtype}")
        if kind in NUMERIC_KINDS and dtype == "bool":
            raise ctx.fail(f"{kind} needs a number input, got bool")
        return [TensorSpec(ctx.shape(0), "bool" if kind in PREDICATE_KINDS else dtype)]

    def flops(self, ctx, outputs) -> int:
        kind = ctx.attrs["kind"]
        return outputs[0].size * (UNARY_KINDS.get(kind) or PREDICATE_KINDS.get(kind, 0))
