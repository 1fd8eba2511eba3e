"""ONNX element-wise ops -> wgnn Unary / Binary / Where."""
from __future__ import annotations

import math

import numpy as np

from .table import CONVERTERS, onnx_op

UNARY = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Neg": "neg", "Reciprocal": "reciprocal", "Abs": "abs", "Floor": "floor",
    "Ceil": "ceil", "Not": "not", "HardSwish": "hard_swish", "Softplus": "softplus",
    "Sign": "sign", "Round": "round", "IsNaN": "isnan", "Softsign": "softsign", "Mish": "mish",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "BitwiseNot": "bitwise_not",
}
# ONNX op -> (kind, (ONNX attribute, default) passed as alpha, the same as beta or None).
PARAMETRIC_UNARY = {
    "LeakyRelu": ("leaky_relu", ("alpha", 0.01), None),
    "HardSigmoid": ("hard_sigmoid", ("alpha", 0.2), ("beta", 0.5)),
    "Elu": ("elu", ("alpha", 1.0), None),
    "Celu": ("celu", ("alpha", 1.0), None),
    "Selu": ("selu", ("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875)),
    "ThresholdedRelu": ("thresholded_relu", ("alpha", 1.0), None),
    "Shrink": ("shrink", ("lambd", 0.5), ("bias", 0.0)),
    "IsInf": ("isinf", ("detect_negative", 1), ("detect_positive", 1)),
}
BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "equal",
    "Less": "less", "Greater": "greater", "GreaterOrEqual": "greater_equal",
    "LessOrEqual": "less_equal", "And": "and", "Or": "or", "Xor": "xor", "PRelu": "prelu",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
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


def _parametric_unary(kind: str, alpha: tuple[str, float], beta: tuple[str, float] | None):
    def convert(ctx, node):
        attrs = {"kind": kind, "alpha": float(node.attrs.get(*alpha))}
        if beta is not None:
            attrs["beta"] = float(node.attrs.get(*beta))
        ctx.emit("Unary", node.inputs[:1], node.outputs, attrs)
    return convert


def _chain(ctx, kind: str, inputs: list[str], output: str) -> None:
    """inputs[0] kind inputs[1] kind ... into output: Binary broadcasting, pairwise, is the ONNX
    variadic ops' multidirectional broadcasting."""
    if len(inputs) == 1:
        ctx.emit("Unary", inputs, [output], {"kind": "identity"})
        return
    acc = inputs[0]
    for i, name in enumerate(inputs[1:], 1):
        out = output if i == len(inputs) - 1 else ctx.fresh(kind)
        ctx.emit("Binary", [acc, name], [out], {"kind": kind})
        acc = out


def _variadic(kind: str):
    def convert(ctx, node):
        _chain(ctx, kind, [name for name in node.inputs if name], node.outputs[0])
    return convert


CONVERTERS.update({op: _unary(kind) for op, kind in UNARY.items()})
CONVERTERS.update({op: _parametric_unary(*spec) for op, spec in PARAMETRIC_UNARY.items()})
CONVERTERS.update({op: _binary(kind) for op, kind in BINARY.items()})
CONVERTERS.update({op: _variadic(kind) for op, kind in VARIADIC.items()})


def known_dtype(ctx, name: str) -> str | None:
    """The element type of a tensor the ONNX graph declares (input, initializer, value_info), else None."""
    graph = ctx.graph
    if name in graph.initializers:
        return graph.initializers[name].dtype.name
    infos = [*graph.inputs, *graph.value_info.values()]
    return next((info.dtype for info in infos if info.name == name and info.dtype), None)


@onnx_op("Mean")
def mean(ctx, node):
    """Sum, then divide by the input count (in the inputs' type: from the graph's declarations, or
    cast at run time like the first input where the graph does not declare it)."""
    inputs = [name for name in node.inputs if name]
    if len(inputs) == 1:
        ctx.emit("Unary", inputs, node.outputs, {"kind": "identity"})
        return
    total = ctx.fresh("sum")
    _chain(ctx, "add", inputs, total)
    dtype = known_dtype(ctx, inputs[0])
    if dtype is not None:
        count = ctx.add_constant(np.array(len(inputs), dtype), "count")
    else:
        count = ctx.fresh("count")
        ctx.emit("Cast", [ctx.add_constant(np.array(len(inputs), np.float32), "count"), inputs[0]], [count], {"to": ""})
    ctx.emit("Binary", [total, count], node.outputs, {"kind": "div"})


@onnx_op("BitShift")
def bit_shift(ctx, node):
    direction = node.attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(f"direction must be LEFT or RIGHT, got {direction!r}")
    ctx.emit("Binary", node.inputs[:2], node.outputs, {"kind": "shift_left" if direction == "LEFT" else "shift_right"})


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
