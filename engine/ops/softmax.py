"""Softmax family: "Softmax" with kind softmax / logsoftmax / hardmax.

ONNX opsets before 13 coerce the input to 2-D at `axis` and normalise over everything from
`axis` to the last dim; the converter marks those nodes with legacy_flatten=1 (opset 13+ normalises
over the one axis).
"""
from __future__ import annotations

from typing import ClassVar

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# kind -> FLOPs per element (max, subtract, exp, sum, divide or log)
SOFTMAX_KINDS: dict[str, int] = {"softmax": 5, "logsoftmax": 5, "hardmax": 2}


@register_op
class Softmax(OpDef):
    op_type = "Softmax"
    family = "softmax"
    kinds = tuple(SOFTMAX_KINDS)
    attrs: ClassVar[dict[str, Attr]] = {"kind": Attr("string"), "axis": Attr("int", -1),
                                        "legacy_flatten": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        if ctx.dtype(0) not in ("float16", "float32", "float64"):
            raise ctx.fail(f"{ctx.attrs['kind']} needs a float input, got {ctx.dtype(0)}")
        if shape:
            ctx.axis(ctx.attrs["axis"], len(shape))
        return [TensorSpec(shape, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return outputs[0].size * SOFTMAX_KINDS[ctx.attrs["kind"]]
