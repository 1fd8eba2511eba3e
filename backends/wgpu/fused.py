"""FusedElementwise on the GPU: one dispatch runs the whole program.

The WGSL is generated from the op's steps: one function per step (the Unary / Binary kernels'
own expressions, with the step's alpha and beta as constants), a `program` function chaining them,
and the input declarations. The program is fixed per model, so its text may key the pipeline;
shapes and broadcast strides travel in params, so a resize compiles nothing new.

Linear (fused/fused.wgsl): the output's axes are merged where every input walks them as one
(merge_axes), at most 6 remain; each invocation computes 4 elements. NC4HW4 (fused_nc4hw4.wgsl),
when the output is a 4-D float feature map and some input is one with the same channels: those
inputs are read through NC4HW4 accessors, the others (constants, per-channel vectors, other
broadcasts) linearly, per lane. Cast inputs (int64 and int32 as i32, bool as u32 on the GPU) are
read linearly and converted with f32().
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.ops.fused import decode_program
from ..base import Step
from . import elementwise
from .backend import GPU_DTYPES, GpuExecution, gpu_kernel, wgsl_type
from .elementwise import binary_expression, feature_map_text
from .matmul import broadcast_strides, merge_axes

MAX_INPUTS = 8  # params: 8 + 6 strides per input in the linear kernel (64 slots)
MAX_RANK = 6  # merged axes of the linear kernel


def step_expression(family: str, kind: str) -> str | None:
    """The WGSL expression of a float32 step, in v / alpha / beta (Unary) or x / y (Binary)."""
    return elementwise.UNARY_EXPR.get(kind) if family == "Unary" else binary_expression(kind, "float32")


def f32_literal(value: float) -> str:
    """An exact f32 constant. Infinities and NaN go through fused_bits(): WGSL rejects non-finite
    constant expressions, and a user function's result is no constant expression."""
    bits = int(np.float32(value).view(np.uint32))
    return f"bitcast<f32>({bits:#x}u)" if math.isfinite(value) else f"fused_bits({bits:#x}u)"


def program_text(step: Step) -> str:
    """WGSL functions step0.. and program(v0, v1, ...) computing the op's steps on one element."""
    steps = decode_program(step.attrs, len(step.inputs))
    lines = ["fn fused_bits(b: u32) -> f32 {", "    return bitcast<f32>(b);", "}"]
    calls = []
    for s, st in enumerate(steps):
        expression = step_expression(st.family, st.kind)
        if st.family == "Unary":
            lines += [f"fn step{s}(v: f32) -> f32 {{", f"    let alpha = {f32_literal(st.alpha)};",
                      f"    let beta = {f32_literal(st.beta)};", f"    return {expression};", "}"]
        else:
            lines += [f"fn step{s}(x: f32, y: f32) -> f32 {{", f"    return {expression};", "}"]
        args = ", ".join(f"v{i}" if i < len(step.inputs) else f"t{i - len(step.inputs)}" for i in st.operands)
        calls.append(f"    let t{s} = step{s}({args});")
    arguments = ", ".join(f"v{j}: f32" for j in range(len(step.inputs)))
    lines += [f"fn program({arguments}) -> f32 {{", *calls, f"    return t{len(steps) - 1};", "}"]
    return "\n".join(lines)


def input_declaration(step: Step, j: int, *, vec4: bool = False) -> str:
    """Input j as a linear array of its GPU element type (of vec4s of it with vec4)."""
    element = wgsl_type(step.input_specs[j].dtype)
    element = f"vec4<{element}>" if vec4 else element
    return f"@group(0) @binding({j}) var<storage, read_write> x{j}: array<{element}>;"


def as_float(step: Step, j: int, load: str) -> str:
    """`load` of input j as f32: converted when the input is cast (integer or bool)."""
    return f"f32({load})" if j in (step.attrs.get("cast_inputs") or ()) else load


def vec4_load(step: Step, j: int, contiguous: bool) -> str:
    """Input j's four elements of the group at its offset o<j> as a vec4<f32>: one vec4 load where
    it is contiguous along the innermost axis, else its one element splat."""
    if contiguous:
        load = f"x{j}[o{j} / 4]"
        return f"vec4<f32>({load})" if j in (step.attrs.get("cast_inputs") or ()) else load
    return f"vec4<f32>({as_float(step, j, f'x{j}[o{j}]')})"


def vec4_pattern(strides: list[list[int]]) -> list[bool] | None:
    """Per input, whether fused_vec4.wgsl reads it as vec4s (contiguous along the innermost merged
    axis) or one element splat (broadcast along it); None where an input is neither."""
    pattern = [own[-1] == 1 if own and own[-1] in (0, 1) else None for own in strides]
    return None if any(read is None for read in pattern) else pattern


def vec4_applies(dims: list[int], strides: list[list[int]]) -> bool:
    """Whether fused_vec4.wgsl runs this shape: an innermost merged axis of whole vec4s, and the
    vec4-read inputs' offsets all multiples of 4."""
    pattern = vec4_pattern(strides)
    return (pattern is not None and bool(dims) and dims[-1] % 4 == 0
            and all(stride % 4 == 0 for own, read in zip(strides, pattern, strict=True) if read for stride in own[:-1]))


def merged_axes(step: Step) -> tuple[list[int], list[list[int]]]:
    out = step.output_specs[0].shape
    return merge_axes(list(out), [broadcast_strides(out, spec.shape) for spec in step.input_specs])


def accessor_inputs(step: Step) -> list[int]:
    """Inputs the NC4HW4 variant reads through accessors: feature maps computed at run time with
    the output's channels. Constants (per-channel vectors and the like) stay linear: converting
    them would cost a dispatch per run."""
    from .layout import is_feature_map

    out = step.output_specs[0]
    values = list(step.input_values or []) + [None] * len(step.inputs)
    return [i for i, spec in enumerate(step.input_specs)
            if is_feature_map(spec) and values[i] is None and spec.shape[1] == out.shape[1]]


@gpu_kernel("FusedElementwise")
class FusedElementwiseGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        cast = set(step.attrs.get("cast_inputs") or ())
        if any(spec.dtype != "float32" for i, spec in enumerate(step.input_specs) if i not in cast) or \
                step.output_specs[0].dtype != "float32":
            return "only float32 programs run on the GPU"
        uncastable = [step.input_specs[i].dtype for i in sorted(cast) if step.input_specs[i].dtype not in GPU_DTYPES]
        if uncastable:
            return f"inputs cast from {', '.join(uncastable)} have no GPU type"
        if len(step.inputs) > MAX_INPUTS:
            return f"more than {MAX_INPUTS} inputs"
        for st in decode_program(step.attrs, len(step.inputs)):
            if step_expression(st.family, st.kind) is None:
                return f"step {st.family}.{st.kind} has no GPU expression"
        if len(merged_axes(step)[0]) > MAX_RANK:
            return f"more than {MAX_RANK} axes after merging"
        return None

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        if is_feature_map(step.output_specs[0]) and accessor_inputs(step):
            return ("linear", "nc4hw4")
        return ("linear",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return tuple(accessor_inputs(step))

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return 4 * (MAX_RANK + 1)

    def prepare(self) -> None:
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        step = self.step
        out = step.output_specs[0]
        dims, strides = merged_axes(step)
        params = [out.size, len(dims), *dims, *[0] * (MAX_RANK - len(dims))]
        for own in strides:
            params += own + [0] * (MAX_RANK - len(own))
        count = len(step.inputs)
        offsets = {"OFFSETS": " ".join(f"var o{j} = 0;" for j in range(count)),
                   "ACCUMULATE": " ".join(f"o{j} += coord * p({8 + MAX_RANK * j}u + u32(d));" for j in range(count))}
        tail = [f"@group(0) @binding({count}) var<storage, read_write> result: array<{{}}>;",
                f"@group(0) @binding({count + 1}) var<uniform> params: Params;"]
        tensors = [*step.inputs, step.outputs[0]]
        kernels = {"fused/fused.wgsl": {
            "DECLS": "\n".join([input_declaration(step, j) for j in range(count)] + [tail[0].format("f32"), tail[1]]),
            "PROGRAM": program_text(step), **offsets,
            "LOADS": ", ".join(as_float(step, j, f"x{j}[o{j}]") for j in range(count))}}
        pattern = vec4_pattern(strides)
        if pattern is not None:
            decls = [input_declaration(step, j, vec4=pattern[j]) for j in range(count)]
            loads = [f"let l{j} = {vec4_load(step, j, pattern[j])};" for j in range(count)]
            lanes = [f"program({', '.join(f'l{j}.{c}' for j in range(count))})" for c in "xyzw"]
            kernels["fused/fused_vec4.wgsl"] = {
                "DECLS": "\n".join(decls + [tail[0].format("vec4<f32>"), tail[1]]), "PROGRAM": program_text(step),
                **offsets, "LOADS": "\n    ".join(loads), "LANES": ", ".join(lanes)}
        chosen = "fused/fused_vec4.wgsl" if vec4_applies(dims, strides) else "fused/fused.wgsl"
        for path, text in kernels.items():  # the other kernel too: a resize may switch and must compile nothing
            if path != chosen:
                self.compile(path, tensors, text=text)
        invocations = out.size // 4 if chosen == "fused/fused_vec4.wgsl" else -(-out.size // 4)
        self.dispatch(chosen, tensors, params, invocations, text=kernels[chosen])

    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        out = step.output_specs[0]
        blocks = math.prod(nc4hw4_dims(out.shape))
        count = len(step.inputs)
        accessors = set(accessor_inputs(step))
        params = [blocks, 0, 0, 0, *accessor_params(out)]
        decls, loads, args = {}, [], []
        for j, spec in enumerate(step.input_specs):
            slot = 9 + 5 * j
            if j in accessors:
                params += accessor_params(spec)
                decls[f"x{j}"] = (step.inputs[j], j, slot, False)
                loads.append(f"let q{j} = repeat_coord({slot}u, n, c4, yy, xx);\n"
                             f"    let a{j} = load_x{j}(q{j}.x, q{j}.y, q{j}.z, q{j}.w);")
                args.append(f"a{j}[lane]")
            else:
                params += broadcast_strides(out.shape, spec.shape) + [0]
                args.append(as_float(step, j, f"x{j}[linear_offset({slot}u, n, c, yy, xx)]"))
        declared = feature_map_text(self, {**decls, "y": (step.outputs[0], count, 4, True)})
        lines = [declared[f"DECL_{var.upper()}"] for var in decls]
        lines += [input_declaration(step, j) for j in range(count) if j not in accessors]
        lines += [declared["DECL_Y"], f"@group(0) @binding({count + 1}) var<uniform> params: Params;"]
        text = {"DECLS": "\n".join(lines), "PROGRAM": program_text(step), "LOADS": "\n    ".join(loads),
                "LANE_ARGS": ", ".join(args)}
        self.dispatch("fused/fused_nc4hw4.wgsl", [*step.inputs, step.outputs[0]], params, blocks, text=text)
