"""Convert: a change of memory layout (linear NCHW <-> NC4HW4) that a backend's layout pass
inserts between a producer and a consumer that want different layouts. Never in model files;
the tensor's logical shape and values do not change."""
from __future__ import annotations

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

LAYOUTS = ("linear", "nc4hw4")


@register_op
class Convert(OpDef):
    op_type = "Convert"
    family = "layout"
    attrs = {"layout": Attr("string")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.attrs["layout"] not in LAYOUTS:
            raise ctx.fail(f"unknown layout {ctx.attrs['layout']!r}; layouts are {list(LAYOUTS)}")
        return [TensorSpec(ctx.shape(0), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 0
