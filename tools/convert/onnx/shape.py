"""ONNX shape ops, casts and constants -> wgnn Shape, Size, ConstantOfShape, Range, Cast and
initializers (an ONNX Constant node becomes an initializer, not a node)."""
from __future__ import annotations

import numpy as np

from ....engine.dtypes import ONNX_DTYPES
from .table import onnx_op, same_op

for _op in ("Shape", "Size", "ConstantOfShape", "Range"):
    same_op(_op, _op)


def _onnx_dtype(ctx, to) -> str:
    """wgnn dtype name of an ONNX type code (Cast-1 spells it as a name such as "FLOAT")."""
    if isinstance(to, str):
        from onnx import TensorProto

        try:
            to = TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ctx.fail(f"unknown ONNX type name {to!r}") from None
    if to not in ONNX_DTYPES:
        raise ctx.fail(f"cannot cast to ONNX type {to}; wgnn supports {sorted(ONNX_DTYPES.values())}")
    return ONNX_DTYPES[to]


@onnx_op("Cast")
def cast(ctx, node):
    # saturate (opset 19) only affects float8 targets, which wgnn does not have.
    if "to" not in node.attrs:
        raise ctx.fail("the `to` attribute is required")
    ctx.emit("Cast", node.inputs[:1], node.outputs, {"to": _onnx_dtype(ctx, node.attrs["to"])})


@onnx_op("CastLike")
def cast_like(ctx, node):
    ctx.emit("Cast", node.inputs[:2], node.outputs)


_CONSTANT_FORMS = {
    "value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64,
}


@onnx_op("Constant")
def constant(ctx, node):
    if "value" in node.attrs:
        value = np.asarray(node.attrs["value"])
    else:
        forms = [key for key in _CONSTANT_FORMS if key in node.attrs]
        if not forms:
            given = sorted(node.attrs) or ["none"]
            raise ctx.fail(f"unsupported Constant form {given}: wgnn supports value, value_float(s) and "
                           "value_int(s) (no strings or sparse tensors)")
        value = np.asarray(node.attrs[forms[0]], dtype=_CONSTANT_FORMS[forms[0]])
    ctx.graph.initializers[node.outputs[0]] = np.asarray(value, order="C")  # keeps 0-d tensors 0-d
