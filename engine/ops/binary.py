"""Binary family: "Binary" with a kind (ONNX Add, Mul, Pow, Less, And, PRelu, BitwiseAnd, BitShift ...),
numpy broadcasting, and "Where" (select).

Shifts (ONNX BitShift): a shift by the bit width or more (or by a negative amount) gives 0, or on
signed types shifted right the sign fill (-1 for negative values), as onnx.reference does.
"""
from __future__ import annotations

from ..dtypes import INT_DTYPES
from ..geometry import RasterPlan, Region
from .base import Attr, InferContext, OpDef, TensorSpec, broadcast_shapes, register_op

ARITHMETIC_KINDS = ("add", "sub", "mul", "div", "pow", "max", "min", "prelu", "mod", "fmod")
COMPARE_KINDS = ("equal", "less", "greater", "greater_equal", "less_equal")
LOGIC_KINDS = ("and", "or", "xor")
BITWISE_KINDS = ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right")


@register_op
class Binary(OpDef):
    op_type = "Binary"
    family = "binary"
    kinds = ARITHMETIC_KINDS + COMPARE_KINDS + LOGIC_KINDS + BITWISE_KINDS
    attrs = {"kind": Attr("string")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        kind = ctx.attrs["kind"]
        if kind not in LOGIC_KINDS and kind != "pow" and ctx.dtype(0) != ctx.dtype(1):
            raise ctx.fail(f"{kind} needs equal input types, got {ctx.dtype(0)} and {ctx.dtype(1)}")
        if kind in BITWISE_KINDS and ctx.dtype(0) not in INT_DTYPES:
            raise ctx.fail(f"{kind} needs integer inputs, got {ctx.dtype(0)}")
        shape = broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1))
        dtype = "bool" if kind in COMPARE_KINDS + LOGIC_KINDS else ctx.dtype(0)
        return [TensorSpec(shape, dtype)]


@register_op
class Where(OpDef):
    op_type = "Where"
    family = "binary"
    is_geometry = True  # only with a condition known at resize, all true or all false (geometry)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.dtype(0) != "bool":
            raise ctx.fail(f"condition must be bool, got {ctx.dtype(0)}")
        if ctx.dtype(1) != ctx.dtype(2):
            raise ctx.fail(f"branches differ in type: {ctx.dtype(1)} and {ctx.dtype(2)}")
        return [TensorSpec(broadcast_shapes(ctx, ctx.shape(0), ctx.shape(1), ctx.shape(2)), ctx.dtype(1))]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan] | None:
        """A condition known at resize that picks one branch everywhere, of the output's shape:
        a copy of that branch, which backends may make a view (ONNX Attention's zeroing of fully
        masked rows, computed from shapes alone in a causal model, is all false). Else the
        select kernel runs."""
        condition = ctx.value(0, required=False)
        if condition is None or condition.size == 0 or (condition.any() and not condition.all()):
            return None
        chosen = 1 if condition.all() else 2
        if tuple(ctx.shape(chosen)) != tuple(outputs[0].shape):
            return None
        count = outputs[0].size
        return [RasterPlan([Region(chosen, (count,), 0, (1,), 0, (1,))])]
