"""Unary, Binary and Where on the GPU. Adding a kind is one WGSL expression in a table here."""
from __future__ import annotations

import math

import numpy as np

from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type

MAX_RANK = 6
# NaN as a bit pattern: WGSL lets compilers assume floats are never NaN (x != x may fold to false).
NAN_TEST = "(bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u"

# WGSL expression of v (the element), alpha and beta, for float tensors. Shared with the fused
# activations of conv.py and matmul.py: only WGSL built-ins and prelude.wgsl functions here.
UNARY_EXPR = {
    "identity": "v", "relu": "max(v, 0.0)", "leaky_relu": "select(v * alpha, v, v >= 0.0)",
    "sigmoid": "1.0 / (1.0 + exp(-v))", "hard_sigmoid": "clamp(v * alpha + beta, 0.0, 1.0)",
    "hard_swish": "v * clamp(v / 6.0 + 0.5, 0.0, 1.0)", "tanh": "wg_tanh(v)", "erf": "wg_erf(v)",
    "gelu": "0.5 * v * (1.0 + wg_erf(v * 0.7071067811865476))",
    "gelu_tanh": "0.5 * v * (1.0 + wg_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))",
    "exp": "exp(v)", "log": "log(v)", "sqrt": "sqrt(v)", "neg": "-v", "reciprocal": "1.0 / v",
    "abs": "abs(v)", "floor": "floor(v)", "ceil": "ceil(v)", "clip": "min(max(v, alpha), beta)",
    "softplus": "max(v, 0.0) + wg_log1p(exp(-abs(v)))",
    "sign": f"select(sign(v), v, {NAN_TEST})",
    "round": "round(v)",  # half to even in WGSL (naga writes roundEven for GLSL)
    "softsign": "v / (1.0 + abs(v))",
    # select, not max/min: GPU max/min drop NaN operands, ONNX propagates them. Celu's
    # max(0, v) + min(0, alpha * expm1(v / alpha)) is one branch or the other for either sign of alpha.
    "elu": "select(alpha * (exp(v) - 1.0), v, v > 0.0)",
    "selu": "beta * select(alpha * (exp(v) - 1.0), v, v > 0.0)",
    "celu": "select(alpha * (exp(v / alpha) - 1.0), v, v > 0.0)",
    "mish": "v * wg_tanh(max(v, 0.0) + wg_log1p(exp(-abs(v))))",
    "thresholded_relu": "select(0.0, v, v > alpha)",
    "shrink": "select(select(0.0, v - beta, v > alpha), v + beta, v < -alpha)",
    "sin": "sin(v)", "cos": "cos(v)", "tan": "tan(v)", "atan": "atan(v)",
    # Mesa's asin/acos are polynomial fits ~4e-4 off; atan2 is ~3e-6 off. (1 - v)(1 + v), not 1 - v * v,
    # keeps the precision near |v| = 1.
    "asin": "atan2(v, sqrt((1.0 - v) * (1.0 + v)))", "acos": "atan2(sqrt((1.0 - v) * (1.0 + v)), v)",
    "sinh": "sinh(v)", "cosh": "cosh(v)", "asinh": "asinh(v)", "acosh": "acosh(v)", "atanh": "atanh(v)",
}
# Kinds that also run on integer (i32) tensors; shared with matmul.py's integer epilogue.
INT_UNARY_EXPR = {"identity": "v", "neg": "-v", "abs": "abs(v)", "relu": "max(v, 0)",
                  "clip": "min(max(v, alpha), beta)", "sign": "select(select(0, -1, v < 0), 1, v > 0)",
                  "bitwise_not": "~v"}
# Integer kinds of the Unary kernel only: alpha is floor(lambd), so v > alpha is v > lambd on integers.
INT_ONLY_UNARY_EXPR = {"shrink": "select(select(0, v - beta, v > alpha), v + beta, v < -alpha)"}
UINT_UNARY_EXPR = {"identity": "v", "abs": "v", "sign": "select(0u, 1u, v > 0u)", "bitwise_not": "~v",
                   "clip": "min(max(v, alpha), beta)"}
BOOL_UNARY_EXPR = {"not": "1u - v", "identity": "v"}
# Float tests with a bool (u32 0/1) result; IsInf's alpha/beta flag negative/positive infinity.
PREDICATE_EXPR = {
    "isnan": f"select(0u, 1u, {NAN_TEST})",
    "isinf": "select(0u, 1u, (bitcast<u32>(v) == 0xff800000u && alpha != 0.0) "
             "|| (bitcast<u32>(v) == 0x7f800000u && beta != 0.0))",
}

BINARY_EXPR = {
    "add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "max": "max(x, y)", "min": "min(x, y)",
    "pow": "wg_pow(x, y)", "prelu": "select(x, x * y, x < {{ZERO}})",
    "equal": "select(0u, 1u, x == y)", "less": "select(0u, 1u, x < y)", "greater": "select(0u, 1u, x > y)",
    "greater_equal": "select(0u, 1u, x >= y)", "less_equal": "select(0u, 1u, x <= y)",
    "and": "x & y", "or": "x | y", "xor": "x ^ y",
    "bitwise_and": "x & y", "bitwise_or": "x | y", "bitwise_xor": "x ^ y",
}
FLOAT_ONLY_BINARY = {"pow"}
# Kinds whose expression depends on the element class (element() below). Shifts by amounts outside
# [0, 32) are undefined in WGSL/GLSL: select the defined result (engine/ops/binary.py) instead.
# GLSL's >> on negative ints sign-extends, as WGSL's. int64 runs narrowed to i32: right shifts by
# 32..63 give the sign fill, right for values in the int32 range; left shifts are refused.
TYPED_BINARY_EXPR = {
    # Float remainders exactly (helpers in binary.wgsl / binary_nc4hw4.wgsl), as numpy's.
    "mod": {"f32": "wg_mod_exact(x, y)", "i32": "wg_mod_i32(x, y)", "u32": "x % y"},
    "fmod": {"f32": "wg_fmod_exact(x, y)", "i32": "wg_rem_i32(x, y)", "u32": "x % y"},
    "shift_left": {"i32": "select(0, bitcast<i32>(bitcast<u32>(x) << u32(y)), y >= 0 && y < 32)",
                   "u32": "select(0u, x << y, y < 32u)"},
    "shift_right": {"i32": "x >> u32(select(y, 31, y < 0 || y > 31))", "u32": "select(0u, x >> y, y < 32u)"},
}
# Element classes of tensors on the GPU (backend.GPU_DTYPES stores them in 32-bit words): int64 is
# narrowed to i32; uint32 runs as u32 where the backend stores it; bool is u32 0/1.
ELEMENTS = {"float32": "f32", "int32": "i32", "int64": "i32", "uint32": "u32", "bool": "bool"}
WGSL_TYPES = {"f32": "f32", "i32": "i32", "u32": "u32", "bool": "u32"}


def element(dtype: str) -> str | None:
    return ELEMENTS.get(dtype)


def broadcast_params(out_shape, *shapes) -> list[int]:
    """Params layout shared by broadcasting kernels: output shape at slot 8, then 8 slots of
    strides per operand (rank 6, right-aligned, stride 0 on broadcast dims). Axes every operand
    walks as one are merged first (fewer axes to divide by: zoo bert's broadcast embedding Add at
    2 x 64 tokens took 190 against 203 us)."""
    from .matmul import broadcast_strides, merge_axes

    dims, strides = merge_axes(list(out_shape), [broadcast_strides(tuple(out_shape), s) for s in shapes])
    pad = MAX_RANK - len(dims)
    params = [0] * 8 + [1] * pad + dims + [0, 0]
    for own in strides:
        params += [0] * pad + own + [0, 0]
    return params


def feature_map_text(execution, names: dict[str, tuple[str, int, int, bool]], *, half: bool = False) -> dict[str, str]:
    """DECL_<VAR> texts for NC4HW4 tensors: var -> (tensor, binding, params slot, written), and
    FLOAT, the arithmetic type: with `half` f16, the accessors then reading and writing vec4<f16>."""
    from .layout import arithmetic_text, nc4hw4_text

    backend = execution.backend
    text = {f"DECL_{var.upper()}": nc4hw4_text(var, binding, slot, backend.placement(tensor), write=write, half=half)
            for var, (tensor, binding, slot, write) in names.items()}
    return {**text, **arithmetic_text(half)}


# f16 arithmetic (precision "fp16-arith") for NC4HW4 Unary / Binary kinds whose expression uses
# only WGSL built-ins (the prelude's wg_* helpers and bitcasts are f32-only), except periodic
# functions: a 16-bit argument reduction keeps few correct digits once |v| reaches the hundreds.
F32_ONLY_KINDS = {"sin", "cos", "tan"}
# Largest finite f16: alpha / beta (Clip's FLT_MAX default bounds) are clamped to it, as WGSL lets
# an f32 -> f16 conversion past it give either infinity or this value.
F16_MAX = 65504.0


def half_expression(kind: str, expr: str) -> bool:
    return kind not in F32_ONLY_KINDS and "wg_" not in expr and "bitcast" not in expr


def half_arithmetic(execution, kind: str, expr: str) -> bool:
    from .layout import arithmetic

    return arithmetic(execution.backend) == "f16" and half_expression(kind, expr)


def int_scalar(value: float, low: int, high: int) -> int:
    """An integer kernel parameter saturated to [low, high]; infinite (Clip) bounds mean no bound."""
    if not math.isfinite(value):
        return high if value > 0 else low
    return int(np.clip(value, low, high))


def u32_bits(value: int) -> int:
    """A u32 parameter as the int32 slot holding its bits (read back with pu())."""
    return value - 2 ** 32 if value >= 2 ** 31 else value


@gpu_kernel("Unary")
class UnaryGpu(GpuExecution):
    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        feature_map = is_feature_map(step.input_specs[0]) and step.attrs["kind"] in UNARY_EXPR
        return ("linear", "nc4hw4") if feature_map else ("linear",)

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        dtype, kind = step.input_specs[0].dtype, step.attrs["kind"]
        if cls.expression(step) is None:
            return f"kind {kind} on {dtype} has no GPU kernel"
        if kind == "shrink" and element(dtype) == "i32" and not float(step.attrs["beta"]).is_integer():
            return "shrink of integers by a fractional bias runs on the CPU"
        return None

    @staticmethod
    def expression(step: Step) -> str | None:
        kind = step.attrs["kind"]
        tables = {"f32": (UNARY_EXPR, PREDICATE_EXPR), "i32": (INT_UNARY_EXPR, INT_ONLY_UNARY_EXPR),
                  "u32": (UINT_UNARY_EXPR,), "bool": (BOOL_UNARY_EXPR,)}
        for table in tables.get(element(step.input_specs[0].dtype), ()):
            if kind in table:
                return table[kind]
        return None

    def prepare(self) -> None:
        step = self.step
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        n = step.output_specs[0].size
        kind, el = step.attrs["kind"], element(step.input_specs[0].dtype)
        t = WGSL_TYPES[el]
        alpha, beta = float(step.attrs["alpha"]), float(step.attrs["beta"])
        text = {"T": t, "TO": WGSL_TYPES[element(step.output_specs[0].dtype)], "EXPR": self.expression(step)}
        if el == "f32":
            scalars, text["S"], text["READ"] = [alpha, beta], "f32", "pf"
        elif el == "i32":
            if kind == "shrink":  # v > lambd is v > floor(lambd) on integers; -alpha must not overflow
                alpha = math.floor(alpha) if math.isfinite(alpha) else alpha
            scalars = [int_scalar(v, -2 ** 31 + 1, 2 ** 31 - 1) for v in (alpha, beta)]
            text["S"], text["READ"] = "i32", "p"
        else:  # uint32 (Clip bounds saturated to its range) and bool (no parameters)
            scalars = [u32_bits(int_scalar(v, 0, 2 ** 32 - 1)) for v in (alpha, beta)]
            text["S"], text["READ"] = "u32", "pu"
        self.dispatch("elementwise/unary.wgsl", [step.inputs[0], step.outputs[0]], [n] + scalars, -(-n // 4), text=text)

    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        spec = step.output_specs[0]
        blocks = math.prod(nc4hw4_dims(spec.shape))
        expr = self.expression(step)
        half = half_arithmetic(self, step.attrs["kind"], expr)
        scalars = [float(step.attrs["alpha"]), float(step.attrs["beta"])]
        if half:
            scalars = [float(np.clip(v, -F16_MAX, F16_MAX)) for v in scalars]
        params = [blocks, *scalars, 0] + accessor_params(step.input_specs[0]) + accessor_params(spec)
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False), "y": (step.outputs[0], 1, 9, True)},
                                half=half)
        text["EXPR"] = expr
        self.dispatch("elementwise/unary_nc4hw4.wgsl", [step.inputs[0], step.outputs[0]], params, blocks, text=text)


def binary_expression(kind: str, dtype: str) -> str | None:
    """The WGSL expression of x, y for a Binary kind on an input type, None where there is none."""
    el = element(dtype)
    if kind in FLOAT_ONLY_BINARY and el != "f32":
        return None
    expr = BINARY_EXPR.get(kind) or TYPED_BINARY_EXPR.get(kind, {}).get(el)
    if expr is None or el is None:
        return None
    return expr.replace("{{ZERO}}", {"f32": "0.0", "i32": "0", "u32": "0u", "bool": "0u"}[el])


@gpu_kernel("Binary")
class BinaryGpu(GpuExecution):
    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        if not (is_feature_map(step.output_specs[0]) and all(is_feature_map(s) for s in step.input_specs)):
            return ("linear",)
        out_channels = step.output_specs[0].shape[1]
        # Channels broadcast lane-wise only from a single channel (splat).
        if any(s.shape[1] not in (1, out_channels) for s in step.input_specs):
            return ("linear",)
        return ("linear", "nc4hw4")

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return (0, 1)

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        kind, dtype = step.attrs["kind"], step.input_specs[0].dtype
        if kind in FLOAT_ONLY_BINARY and dtype != "float32":
            return f"{kind} on {dtype} runs on the CPU"
        if binary_expression(kind, dtype) is None:
            return f"kind {kind} on {dtype} has no GPU kernel"
        if dtype != step.input_specs[1].dtype:
            return "mixed input types"
        if kind == "shift_left" and dtype == "int64":
            return "shift_left on int64 runs on the CPU (the GPU's int32 would drop the high bits)"
        if len(step.output_specs[0].shape) > MAX_RANK:
            return f"rank > {MAX_RANK}"
        return None

    def prepare(self) -> None:
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        step = self.step
        kind = step.attrs["kind"]
        a, b = step.input_specs
        out = step.output_specs[0]
        params = broadcast_params(out.shape, a.shape, b.shape)
        params[0] = out.size
        params[1] = int(a.shape == b.shape == out.shape)
        text = {"TA": WGSL_TYPES[element(a.dtype)], "TO": WGSL_TYPES[element(out.dtype)],
                "EXPR": binary_expression(kind, a.dtype)}
        self.dispatch("elementwise/binary.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]], params,
                      -(-out.size // 4), text=text)

    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        kind = step.attrs["kind"]
        a, b = step.input_specs
        out = step.output_specs[0]
        blocks = math.prod(nc4hw4_dims(out.shape))
        params = [blocks, int(a.shape[1] == 1 < out.shape[1]), int(b.shape[1] == 1 < out.shape[1]), 0]
        params += accessor_params(a) + accessor_params(b) + accessor_params(out)
        expr = binary_expression(kind, "float32")
        text = feature_map_text(self, {"a": (step.inputs[0], 0, 4, False), "b": (step.inputs[1], 1, 9, False),
                                       "c": (step.outputs[0], 2, 14, True)}, half=half_arithmetic(self, kind, expr))
        text["EXPR"] = expr
        self.dispatch("elementwise/binary_nc4hw4.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]], params,
                      blocks, text=text)


@gpu_kernel("Where")
class WhereGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return f"rank > {MAX_RANK}" if len(step.output_specs[0].shape) > MAX_RANK else None

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        params = broadcast_params(out.shape, *(s.shape for s in step.input_specs))
        params[0] = out.size
        self.dispatch("elementwise/where.wgsl", list(step.inputs) + [step.outputs[0]], params,
                      -(-out.size // 4), text={"T": wgsl_type(out.dtype)})
