"""ONNX element-wise ops -> wgnn Unary / Binary / Where."""
from __future__ import annotations

import math

from .table import CONVERTERS, onnx_op

UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Neg": "neg", "Reciprocal": "reciprocal", "Abs": "abs", "Floor": "floor",
    "Ceil": "ceil", "Not": "not", "HardSwish": "hard_swish", "Softplus": "softplus",
}
BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal",
    "Less": "less", "Greater": "greater", "GreaterOrEqual": "greater_equal",
    "LessOrEqual": "less_equal", "And": "and", "Or": "or", "Xor": "xor", "PRelu": "prelu",
}
VARIADIC = {"Max": "max", "Min": "min", "Sum": "add"}


def _unary(kind: str):
    def convert(ctx, node):
        ctx.emit("Unary", node.inputs[:1], node.outputs, {"kind": kind})
    return convert


def _binary(kind: str):
    def convert(ctx, node):
        ctx.emit("Binary", node.inputs[:2], node.outputs, {"kind": kind})
    return convert


def _variadic(kind: str):
    def convert(ctx, node):
        inputs = [name for name in node.inputs if name]
        if len(inputs) == 1:
            ctx.emit("Unary", inputs, node.outputs, {"kind": "identity"})
            return
        acc = inputs[0]
        for i, name in enumerate(inputs[1:], 1):
            out = node.outputs[0] if i == len(inputs) - 1 else ctx.fresh(kind)
            ctx.emit("Binary", [acc, name], [out], {"kind": kind})
            acc = out
    return convert


CONVERTERS.update({op: _unary(kind) for op, kind in UNARY.items()})
CONVERTERS.update({op: _binary(kind) for op, kind in BINARY.items()})
CONVERTERS.update({op: _variadic(kind) for op, kind in VARIADIC.items()})


@onnx_op("LeakyRelu")
def leaky_relu(ctx, node):
    ctx.emit("Unary", node.inputs, node.outputs, {"kind": "leaky_relu", "alpha": node.attrs.get("alpha", 0.01)})


@onnx_op("HardSigmoid")
def hard_sigmoid(ctx, node):
    ctx.emit("Unary", node.inputs, node.outputs, {"kind": "hard_sigmoid", "alpha": node.attrs.get("alpha", 0.2),
                                                  "beta": node.attrs.get("beta", 0.5)})


@onnx_op("Gelu")
def gelu(ctx, node):
    kind = "gelu_tanh" if node.attrs.get("approximate", "none") == "tanh" else "gelu"
    ctx.emit("Unary", node.inputs, node.outputs, {"kind": kind})


@onnx_op("Clip")
def clip(ctx, node):
    """Clip-6 has min/max attributes; Clip-11+ has optional inputs, constant or not."""
    if ctx.opset < 11:
        bounds = [node.attrs.get("min", -math.inf), node.attrs.get("max", math.inf)]
        ctx.emit("Unary", node.inputs[:1], node.outputs, {"kind": "clip", "alpha": bounds[0], "beta": bounds[1]})
        return
    names = [node.input(1), node.input(2)]
    values = [ctx.constant(n) for n in names]
    if all(n == "" or v is not None for n, v in zip(names, values)):
        low = float(values[0]) if names[0] else -math.inf
        high = float(values[1]) if names[1] else math.inf
        ctx.emit("Unary", node.inputs[:1], node.outputs, {"kind": "clip", "alpha": low, "beta": high})
        return
    # Bounds computed at run time: max then min with broadcasting.
    acc = node.inputs[0]
    steps = [(kind, name) for kind, name in (("max", names[0]), ("min", names[1])) if name]
    for i, (kind, name) in enumerate(steps):
        out = node.outputs[0] if i == len(steps) - 1 else ctx.fresh("clip")
        ctx.emit("Binary", [acc, name], [out], {"kind": kind})
        acc = out


@onnx_op("Where")
def where(ctx, node):
    ctx.emit("Where", node.inputs, node.outputs)


@onnx_op("Mod")
def mod(ctx, node):
    kind = "fmod" if node.attrs.get("fmod", 0) else "mod"
    ctx.emit("Binary", node.inputs, node.outputs, {"kind": kind})
