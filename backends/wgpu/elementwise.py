"""Unary, Binary and Where on the GPU. Adding a kind is one WGSL expression in a table here."""
from __future__ import annotations

import math

import numpy as np

from ...engine.geometry import contiguous_strides
from ...engine.ops.binary import COMPARE_KINDS, LOGIC_KINDS
from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type

MAX_RANK = 6

# WGSL expression of v (the element), alpha and beta, for float tensors.
UNARY_EXPR = {
    "identity": "v", "relu": "max(v, 0.0)", "leaky_relu": "select(v * alpha, v, v >= 0.0)",
    "sigmoid": "1.0 / (1.0 + exp(-v))", "hard_sigmoid": "clamp(v * alpha + beta, 0.0, 1.0)",
    "hard_swish": "v * clamp(v / 6.0 + 0.5, 0.0, 1.0)", "tanh": "wg_tanh(v)", "erf": "wg_erf(v)",
    "gelu": "0.5 * v * (1.0 + wg_erf(v * 0.7071067811865476))",
    "gelu_tanh": "0.5 * v * (1.0 + wg_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))",
    "exp": "exp(v)", "log": "log(v)", "sqrt": "sqrt(v)", "neg": "-v", "reciprocal": "1.0 / v",
    "abs": "abs(v)", "floor": "floor(v)", "ceil": "ceil(v)", "clip": "min(max(v, alpha), beta)",
    "softplus": "max(v, 0.0) + wg_log1p(exp(-abs(v)))",
}
# Kinds that also run on integer (i32) and bool (u32) tensors.
INT_UNARY_EXPR = {"identity": "v", "neg": "-v", "abs": "abs(v)", "relu": "max(v, 0)",
                  "clip": "min(max(v, alpha), beta)"}
BOOL_UNARY_EXPR = {"not": "1u - v", "identity": "v"}

BINARY_EXPR = {
    "add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "max": "max(x, y)", "min": "min(x, y)",
    "pow": "wg_pow(x, y)", "prelu": "select(x, x * y, x < {{ZERO}})",
    "equal": "select(0u, 1u, x == y)", "less": "select(0u, 1u, x < y)", "greater": "select(0u, 1u, x > y)",
    "greater_equal": "select(0u, 1u, x >= y)", "less_equal": "select(0u, 1u, x <= y)",
    "and": "x & y", "or": "x | y", "xor": "x ^ y",
}
FLOAT_ONLY_BINARY = {"pow"}
# Kinds whose expression depends on the element type.
TYPED_BINARY_EXPR = {
    "mod": {"f32": "wg_mod_f32(x, y)", "i32": "wg_mod_i32(x, y)"},
    "fmod": {"f32": "x - y * trunc(x / y)", "i32": "wg_rem_i32(x, y)"},
}


def broadcast_params(out_shape, *shapes) -> list[int]:
    """Params layout shared by broadcasting kernels: output shape at slot 8, then 8 slots of
    strides per operand (rank 6, right-aligned, stride 0 on broadcast dims)."""
    out = (1,) * (MAX_RANK - len(out_shape)) + tuple(out_shape)
    params = [0] * 8 + list(out) + [0, 0]
    for shape in shapes:
        padded = (1,) * (MAX_RANK - len(shape)) + tuple(shape)
        strides = contiguous_strides(padded)
        params += [0 if d == 1 and o != 1 else s for d, o, s in zip(padded, out, strides)] + [0, 0]
    return params


def feature_map_text(execution, names: dict[str, tuple[str, int, int, bool]]) -> dict[str, str]:
    """DECL_<VAR> texts for NC4HW4 tensors: var -> (tensor, binding, params slot, written)."""
    from .layout import nc4hw4_text

    backend = execution.backend
    return {f"DECL_{var.upper()}": nc4hw4_text(var, binding, slot, backend.placement(tensor), write=write)
            for var, (tensor, binding, slot, write) in names.items()}


@gpu_kernel("Unary")
class UnaryGpu(GpuExecution):
    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        return ("linear", "nc4hw4") if is_feature_map(step.input_specs[0]) else ("linear",)

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if cls.expression(step) is None:
            return f"kind {step.attrs['kind']} on {step.input_specs[0].dtype} has no GPU kernel"
        return None

    @staticmethod
    def expression(step: Step) -> str | None:
        dtype, kind = step.input_specs[0].dtype, step.attrs["kind"]
        table = UNARY_EXPR if dtype == "float32" else BOOL_UNARY_EXPR if dtype == "bool" else INT_UNARY_EXPR
        return table.get(kind)

    def prepare(self) -> None:
        step = self.step
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        n = step.output_specs[0].size
        t = wgsl_type(step.input_specs[0].dtype)
        alpha, beta = float(step.attrs["alpha"]), float(step.attrs["beta"])
        if t == "f32":
            scalars, text = [alpha, beta], {"T": t, "S": "f32", "READ": "pf", "EXPR": self.expression(step)}
        else:  # integer parameters (Clip bounds), saturated to int32; infinite means no bound
            scalars = [int(np.clip(v, -2 ** 31, 2 ** 31 - 1)) if math.isfinite(v)
                       else (2 ** 31 - 1 if v > 0 else -2 ** 31) for v in (alpha, beta)]
            text = {"T": t, "S": "i32", "READ": "p", "EXPR": self.expression(step)}
            if t == "u32":
                text["S"], scalars = "u32", [0, 0]
                text["READ"] = "pu"
        self.dispatch("elementwise/unary.wgsl", [step.inputs[0], step.outputs[0]], [n] + scalars, -(-n // 4), text=text)

    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        spec = step.output_specs[0]
        blocks = math.prod(nc4hw4_dims(spec.shape))
        params = [blocks, float(step.attrs["alpha"]), float(step.attrs["beta"]), 0]
        params += accessor_params(step.input_specs[0]) + accessor_params(spec)
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False), "y": (step.outputs[0], 1, 9, True)})
        text["EXPR"] = self.expression(step)
        self.dispatch("elementwise/unary_nc4hw4.wgsl", [step.inputs[0], step.outputs[0]], params, blocks, text=text)


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
        kind = step.attrs["kind"]
        if kind not in BINARY_EXPR and wgsl_type(step.input_specs[0].dtype) not in TYPED_BINARY_EXPR.get(kind, {}):
            return f"kind {kind} on {step.input_specs[0].dtype} has no GPU kernel"
        if kind in FLOAT_ONLY_BINARY and step.input_specs[0].dtype != "float32":
            return f"{kind} on {step.input_specs[0].dtype} runs on the CPU"
        if step.input_specs[0].dtype != step.input_specs[1].dtype:
            return "mixed input types"
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
        ta = wgsl_type(a.dtype)
        to = "u32" if kind in COMPARE_KINDS + LOGIC_KINDS else ta
        zero = {"f32": "0.0", "i32": "0", "u32": "0u"}[ta]
        expr = (BINARY_EXPR.get(kind) or TYPED_BINARY_EXPR[kind][ta]).replace("{{ZERO}}", zero)
        params = broadcast_params(out.shape, a.shape, b.shape)
        params[0] = out.size
        params[1] = int(a.shape == b.shape == out.shape)
        self.dispatch("elementwise/binary.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]], params,
                      -(-out.size // 4), text={"TA": ta, "TO": to, "EXPR": expr})


    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        kind = step.attrs["kind"]
        a, b = step.input_specs
        out = step.output_specs[0]
        blocks = math.prod(nc4hw4_dims(out.shape))
        params = [blocks, int(a.shape[1] == 1 < out.shape[1]), int(b.shape[1] == 1 < out.shape[1]), 0]
        params += accessor_params(a) + accessor_params(b) + accessor_params(out)
        text = feature_map_text(self, {"a": (step.inputs[0], 0, 4, False), "b": (step.inputs[1], 1, 9, False),
                                       "c": (step.outputs[0], 2, 14, True)})
        text["EXPR"] = (BINARY_EXPR.get(kind) or TYPED_BINARY_EXPR[kind]["f32"]).replace("{{ZERO}}", "0.0")
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
