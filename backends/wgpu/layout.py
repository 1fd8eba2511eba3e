"""NC4HW4 on the GPU: placements, the layout pass, storage accessors and the Convert kernels.

A 4-D float tensor is either linear (NCHW, array<f32>) or NC4HW4: channel c in slice c / 4, lane
c % 4, padding lanes zero, stored as an array<vec4<f32>> buffer ((n * C4 + c4) * H + y) * W + x or
as an rgba32float 2-D array texture (x = W, y = H, layer = n * C4 + c4). Kernels written against
load_NAME(n, c4, y, x) / store_NAME(n, c4, y, x, v) run on either storage: nc4hw4_text() generates
those accessors (and their bindings) for the storage each tensor has, on vec4<f32> or, for kernels
computing in 16 bits (precision "fp16-arith", see arithmetic()), on vec4<f16>.
"""
from __future__ import annotations

import logging
import math
import weakref
from dataclasses import dataclass

import numpy as np

from ...engine.graph import Node
from ...engine.ops.base import OPS, TensorSpec
from ..base import Step
from .backend import GpuExecution, gpu_kernel

log = logging.getLogger("wgnn.wgpu")

LINEAR, NC4HW4 = "linear", "nc4hw4"
BUFFER, TEXTURE = "buffer", "texture"
ACCESSOR_SLOTS = 5  # params slots per NC4HW4 tensor: N, C4, H, W, C


@dataclass(frozen=True)
class Placement:
    layout: str = LINEAR
    storage: str = BUFFER
    half: bool = False  # NC4HW4 stored as 16-bit floats (precision "fp16" / "fp16-arith")

    @property
    def texture_format(self) -> str:
        return "rgba16float" if self.half else "rgba32float"


LINEAR_BUFFER = Placement()


def is_feature_map(spec: TensorSpec | None) -> bool:
    """Tensors that may take the NC4HW4 layout: 4-D float32."""
    return spec is not None and len(spec.shape) == 4 and spec.dtype == "float32"


def nc4hw4_dims(shape) -> tuple[int, int, int, int]:
    n, c, h, w = shape
    return n, -(-c // 4), h, w


def accessor_params(spec: TensorSpec) -> list[int]:
    n, c4, h, w = nc4hw4_dims(spec.shape)
    return [n, c4, h, w, spec.shape[1]]


def arithmetic(backend) -> str:
    """The arithmetic type ("f16" or "f32") of the kernels that have a 16-bit variant: "f16" where
    the session asked for precision "fp16-arith", stores feature maps in 16 bits and the adapter
    has shader-f16 (WGSL's f16 type needs it); elsewhere "fp16-arith" runs as "fp16"."""
    if getattr(backend.config, "precision", "fp32") != "fp16-arith" or not backend.half:
        return "f32"
    if "shader-f16" in backend.context.features:
        return "f16"
    if backend not in _TOLD_NO_F16:  # once per session's backend, not per kernel
        _TOLD_NO_F16.add(backend)
        log.info("precision fp16-arith: %s lacks shader-f16, so kernels compute in f32 on 16-bit storage "
                 "(as precision fp16)", backend.context.name)
    return "f32"


_TOLD_NO_F16: weakref.WeakSet = weakref.WeakSet()


def arithmetic_text(half: bool) -> dict[str, str]:
    """{{FLOAT}}, the arithmetic type of kernels that have a 16-bit variant (the name `wgnn shader`
    gives it too, from --precision)."""
    return {"FLOAT": "f16" if half else "f32"}


def nc4hw4_text(var: str, binding: int, slot: int, placement: Placement, *, write: bool, half: bool = False) -> str:
    """WGSL declaration of tensor `var` at `binding` with its accessor, load_var or store_var, on
    vec4<f32> or with `half` on vec4<f16> (the kernel's arithmetic type; needs shader-f16), whatever
    the storage's precision; its dims are read from params slots slot..slot+4 (accessor_params)."""
    n_c4, h, w, c = f"p({slot + 1}u)", f"p({slot + 2}u)", f"p({slot + 3}u)", f"p({slot + 4}u)"
    t = "f16" if half else "f32"
    head = f"fn store_{var}(n: i32, c4: i32, y: i32, x: i32, v: vec4<{t}>) {{\n" if write else \
        f"fn load_{var}(n: i32, c4: i32, y: i32, x: i32) -> vec4<{t}> {{\n"
    # Padding lanes are stored as zeros; the prelude's nc4hw4_mask is f32-only (the prelude must
    # compile without shader-f16).
    mask = (f"select(vec4<f16>(0.0), v, vec4<i32>(c4 * 4) + vec4<i32>(0, 1, 2, 3) < vec4<i32>({c}))" if half
            else f"nc4hw4_mask(v, c4, {c})")
    if placement.storage == TEXTURE:
        if write:
            fmt = placement.texture_format
            value = f"vec4<f32>({mask})" if half else mask
            return (f"@group(0) @binding({binding}) var {var}_t: texture_storage_2d_array<{fmt}, write>;\n"
                    f"{head}    textureStore({var}_t, vec2<i32>(x, y), n * {n_c4} + c4, {value});\n}}")
        load = f"textureLoad({var}_t, vec2<i32>(x, y), n * {n_c4} + c4, 0)"
        return (f"@group(0) @binding({binding}) var {var}_t: texture_2d_array<f32>;\n"
                f"{head}    return {f'vec4<f16>({load})' if half else load};\n}}")
    if placement.layout == LINEAR:
        if write:
            raise ValueError(f"{var}: NC4HW4 accessors write NC4HW4 tensors only")
        # A linear NCHW tensor read a slice at a time: lane k is channel 4 c4 + k, H x W apart;
        # lanes past the channels read as zeros (indices clamped, so never out of the buffer).
        lanes = ", ".join(f"{var}_lane(c4 * 4 + {k}, ((n * {c} + min(c4 * 4 + {k}, {c} - 1)) * {h} + y) * {w} + x)"
                          for k in range(4))
        return (f"@group(0) @binding({binding}) var<storage, read_write> {var}_b: array<f32>;\n"
                f"fn {var}_lane(channel: i32, i: i32) -> {t} {{\n"
                f"    return select({t}(0.0), {t}({var}_b[i]), channel < {c});\n}}\n"
                f"{head}    return vec4<{t}>({lanes});\n}}")
    index = f"((n * {n_c4} + c4) * {h} + y) * {w} + x"
    element = "vec4<f16>" if placement.half else "vec4<f32>"
    decl = f"@group(0) @binding({binding}) var<storage, read_write> {var}_b: array<{element}>;\n"
    if write:
        return decl + f"{head}    {var}_b[{index}] = {element}({mask});\n}}"
    return decl + f"{head}    return vec4<{t}>({var}_b[{index}]);\n}}"


def pack_nc4hw4(array: np.ndarray) -> np.ndarray:
    """NCHW float32 -> (N, C4, H, W, 4) with zero padding lanes."""
    n, c, h, w = array.shape
    c4 = -(-c // 4)
    padded = np.zeros((n, c4 * 4, h, w), np.float32)
    padded[:, :c] = array
    return np.ascontiguousarray(padded.reshape(n, c4, 4, h, w).transpose(0, 1, 3, 4, 2))


def unpack_nc4hw4(data: np.ndarray, shape) -> np.ndarray:
    n, c, h, w = shape
    c4 = -(-c // 4)
    blocks = data.reshape(n, c4, h, w, 4).transpose(0, 1, 4, 2, 3).reshape(n, c4 * 4, h, w)
    return np.ascontiguousarray(blocks[:, :c])


class LayoutPlanner:
    """The layout pass of one resize: walks the GPU steps in order, runs each in the layout its
    kernel prefers (or the one its inputs already have), and inserts Convert steps where a
    consumer needs another layout than the producer wrote. Graph inputs and constants are linear."""

    def __init__(self, backend, specs: dict[str, TensorSpec]):
        self.backend = backend
        self.specs = specs
        self.placements: dict[str, Placement] = {}
        self.converted: dict[tuple[str, str], str] = {}

    def storage_for(self, name: str, spec: TensorSpec) -> str:
        if self.backend.nc4hw4_storage != TEXTURE:
            return BUFFER
        reason = self.backend.texture_limit_reason(spec)
        if reason:
            log.info("%s stays in a buffer: %s", name, reason)
            return BUFFER
        return TEXTURE

    def placement(self, name: str) -> Placement:
        return self.placements.get(name, LINEAR_BUFFER)

    def run(self, segments) -> None:
        arithmetic(self.backend)  # says once per session where fp16-arith runs as fp16
        for segment in segments:
            steps = []
            for step, execution in segment.steps:
                layout = self.choose(step, execution)
                execution.layout = layout
                for i, name in enumerate(step.inputs):
                    if (layout == NC4HW4 and i in execution.linear_inputs(step) and (name, NC4HW4) not in self.converted
                            and self.placement(name).layout == LINEAR):
                        continue  # the kernel reads this linear tensor a slice at a time
                    if name and is_feature_map(step.input_specs[i]) and i in execution.layout_inputs(step):
                        step.inputs[i] = self.convert(name, layout, steps)
                    elif name and self.placement(name).layout != LINEAR:
                        step.inputs[i] = self.convert(name, LINEAR, steps)
                for name, spec in zip(step.outputs, step.output_specs):
                    if name and layout == NC4HW4 and is_feature_map(spec):
                        self.placements[name] = Placement(NC4HW4, self.storage_for(name, spec), self.backend.half)
                steps.append((step, execution))
            segment.steps = steps

    def choose(self, step: Step, execution) -> str:
        options = execution.layouts(step)
        if NC4HW4 not in options:
            return LINEAR
        maps_out = any(is_feature_map(s) for s in step.output_specs)
        # A step preferring NC4HW4 that reads a feature map keeps it so even when its outputs are
        # not images (GlobalPoolMatMul: [N, K] logits), rather than pay a conversion before it.
        maps_in = any(is_feature_map(step.input_specs[i]) for i in execution.layout_inputs(step)
                      if i < len(step.input_specs) and step.input_specs[i] is not None)
        if options[0] == NC4HW4 and (maps_out or maps_in):
            return NC4HW4
        if not maps_out:
            return LINEAR
        inputs = [n for i, n in enumerate(step.inputs) if n and i in execution.layout_inputs(step)]
        return NC4HW4 if any(self.placement(n).layout == NC4HW4 for n in inputs) else LINEAR

    def convert(self, name: str, layout: str, steps: list) -> str:
        if self.placement(name).layout == layout:
            return name
        key = (name, layout)
        if key not in self.converted:
            target = f"{name}@{layout}"
            spec = self.specs[name]
            node = Node("Convert", [name], [target], {"layout": layout}, name=target)
            step = Step(node, OPS["Convert"], {"layout": layout}, [name], [target], [spec], [spec],
                        [None], backend=self.backend.name)
            self.specs[target] = spec
            if layout == NC4HW4:
                self.placements[target] = Placement(NC4HW4, self.storage_for(target, spec), self.backend.half)
            execution = ConvertGpu(self.backend, step)
            execution.layout = layout
            steps.append((step, execution))
            self.converted[key] = target
        return self.converted[key]


@gpu_kernel("Convert")
class ConvertGpu(GpuExecution):
    """Linear NCHW <-> NC4HW4 (buffer or texture), one vec4 block per invocation."""

    def view_source(self) -> str | None:
        """The input, when both layouts order the same 32-bit floats alike: a 32-bit NC4HW4
        buffer of 1x1 images whose channels fill whole slices is [N][C] either way (e.g. a
        GlobalAveragePool's output on its way to a Gemm)."""
        step = self.step
        spec = step.input_specs[0]
        _, c4, h, w = nc4hw4_dims(spec.shape)
        if h * w != 1 or spec.dtype != "float32" or len(spec.shape) < 2 or spec.shape[1] != 4 * c4:
            return None
        packed = self.backend.placement(step.outputs[0] if step.attrs["layout"] == NC4HW4 else step.inputs[0])
        return step.inputs[0] if packed.storage == BUFFER and not packed.half else None

    def prepare(self) -> None:
        self.prepare_conversion()
        if self.is_view():
            self.dispatches.clear()  # a view: prepared all the same, so other shapes compile nothing

    def prepare_conversion(self) -> None:
        step = self.step
        spec = step.input_specs[0]
        n, c4, h, w = nc4hw4_dims(spec.shape)
        blocks = n * c4 * h * w
        params = [blocks, 0, 0, 0, *accessor_params(spec)]
        if step.attrs["layout"] == NC4HW4:
            text = {"DECL": nc4hw4_text("y", 1, 4, self.backend.placement(step.outputs[0]), write=True)}
            self.dispatch("layout/to_nc4hw4.wgsl", [step.inputs[0], step.outputs[0]], params, blocks, text=text)
        else:
            text = {"DECL": nc4hw4_text("x", 0, 4, self.backend.placement(step.inputs[0]), write=False)}
            self.dispatch("layout/to_linear.wgsl", [step.inputs[0], step.outputs[0]], params, blocks, text=text)


def texture_extent(spec: TensorSpec) -> tuple[int, int, int]:
    # wgpu's OpenGL backend guesses a texture's view kind from its extent (measured on llvmpipe
    # GL): 1 layer makes a plain 2-D texture and a square one with a multiple of 6 layers a cube
    # map; both then read back wrong through a 2d-array view. A spare layer avoids both guesses.
    n, c4, h, w = nc4hw4_dims(spec.shape)
    layers = max(n * c4, 2)
    if layers % 6 == 0:
        layers += 1
    return max(w, 1), max(h, 1), layers


def nc4hw4_bytes(spec: TensorSpec, half: bool = False) -> int:
    return math.prod(nc4hw4_dims(spec.shape)) * (8 if half else 16)
