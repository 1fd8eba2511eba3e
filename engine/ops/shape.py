"""Shape computations and type conversion: Shape, Size, ConstantOfShape, Range, Cast.

Shape and Size need only their input's shape, so the session evaluates them at resize; whatever
is computed from them (the dynamic-shape subgraphs of exported models) folds at resize too.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import DTYPE_CODES
from ..geometry import RasterPlan
from .base import Attr, InferContext, OpDef, TensorSpec, register_op
from .movement import int_values


def shape_slice(attrs: dict, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The dims Shape returns: shape[start:end], out-of-range bounds clamped."""
    return tuple(shape[attrs["start"]:attrs["end"]])


@register_op
class Shape(OpDef):
    """Shape(data) -> int64 dims[start:end] (Python slice semantics, clamped)."""

    op_type = "Shape"
    family = "shape"
    attrs = {"start": Attr("int", 0), "end": Attr("int", None)}
    shape_only = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        return [TensorSpec((len(shape_slice(ctx.attrs, ctx.shape(0))),), "int64")]

    def flops(self, ctx, outputs) -> int:
        return 0


@register_op
class Size(OpDef):
    """Size(data) -> int64 scalar: the number of elements."""

    op_type = "Size"
    family = "shape"
    shape_only = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        ctx.shape(0)
        return [TensorSpec((), "int64")]

    def flops(self, ctx, outputs) -> int:
        return 0


def _fill_value(ctx: InferContext) -> np.ndarray:
    value = ctx.attrs["value"]
    if value is None:
        return np.zeros(1, np.float32)
    if np.size(value) != 1:
        raise ctx.fail(f"value must hold one element, got shape {list(np.shape(value))}")
    return np.asarray(value).reshape(1)


@register_op
class ConstantOfShape(OpDef):
    """ConstantOfShape(shape): a tensor of that shape filled with `value` (default float32 0).
    Lowered to a Raster plan with no regions and a fill."""

    op_type = "ConstantOfShape"
    family = "raster"
    attrs = {"value": Attr("tensor", None)}
    value_inputs = (0,)
    is_geometry = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        dims = int_values(ctx, 0, "the shape")
        if any(d < 0 for d in dims):
            raise ctx.fail(f"shape {dims} has a negative dim")
        dtype = _fill_value(ctx).dtype.name
        if dtype not in DTYPE_CODES:
            raise ctx.fail(f"value has unsupported type {dtype}")
        return [TensorSpec(tuple(dims), dtype)]

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan]:
        return [RasterPlan([], _fill_value(ctx)[0].item())]

    def flops(self, ctx, outputs) -> int:
        return 0


def range_length(start, limit, delta) -> int:
    """ONNX Range: max(ceil((limit - start) / delta), 0) elements."""
    if np.issubdtype(np.asarray(start).dtype, np.integer):
        # Exact integer ceil division (float division loses precision for large int64 values).
        start, limit, delta = int(start), int(limit), int(delta)
        return max(-((start - limit) // delta), 0)
    # The difference in the input type, the division in double, as onnxruntime computes it.
    span = np.asarray(limit) - np.asarray(start)
    return max(int(np.ceil(float(span) / float(delta))), 0)


@register_op
class Range(OpDef):
    """Range(start, limit, delta): start + i * delta for i < ceil((limit - start) / delta)."""

    op_type = "Range"
    family = "shape"
    value_inputs = (0, 1, 2)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        values = [ctx.value(i) for i in range(3)]
        dtypes = {ctx.dtype(i) for i in range(3)}
        if len(dtypes) != 1:
            raise ctx.fail(f"start, limit and delta must share one type, got {sorted(dtypes)}")
        if any(np.size(v) != 1 for v in values):
            raise ctx.fail("start, limit and delta must be scalars")
        start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in values)
        if delta == 0:
            raise ctx.fail("delta must not be 0")
        return [TensorSpec((range_length(start, limit, delta),), ctx.dtype(0))]


@register_op
class Cast(OpDef):
    """Cast(x, like?) to dtype `to` (a wgnn dtype name); with to="" the type of input `like`
    (ONNX CastLike). Float to integer truncates toward zero; nonzero to bool is True."""

    op_type = "Cast"
    family = "cast"
    attrs = {"to": Attr("string", "")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        to = ctx.attrs["to"]
        if not to:
            if not ctx.has(1):
                raise ctx.fail("Cast needs a target type `to` or a second input to take the type of")
            to = ctx.dtype(1)
        if to not in DTYPE_CODES:
            raise ctx.fail(f"cannot cast to {to!r}; wgnn types are {sorted(DTYPE_CODES)}")
        return [TensorSpec(ctx.shape(0), to)]
