"""GPU kernels for data movement that geometry lowering leaves to kernels (Gather with run-time
indices) and for Cast."""
from __future__ import annotations

import math

from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type

# (from, to) WGSL element types -> conversion of v. float -> int truncates toward zero, as ONNX.
CAST_EXPR = {
    ("f32", "i32"): "i32(v)", ("i32", "f32"): "f32(v)", ("u32", "f32"): "f32(v)", ("u32", "i32"): "i32(v)",
    ("f32", "u32"): "select(0u, 1u, v != 0.0)", ("i32", "u32"): "select(0u, 1u, v != 0)",
}


@gpu_kernel("Gather")
class GatherGpu(GpuExecution):
    def prepare(self) -> None:
        step = self.step
        shape = step.input_specs[0].shape
        axis = step.attrs["axis"] % len(shape)
        inner = math.prod(shape[axis + 1:])
        count = step.input_specs[1].size
        out = step.output_specs[0]
        if inner == 0 or count == 0:
            return
        self.dispatch("movement/gather.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]],
                      [out.size, inner, count, shape[axis]], -(-out.size // 4))


@gpu_kernel("Cast")
class CastGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return None

    def prepare(self) -> None:
        step = self.step
        ti, to = wgsl_type(step.input_specs[0].dtype), wgsl_type(step.output_specs[0].dtype)
        expr = "v" if ti == to else CAST_EXPR[(ti, to)]
        n = step.output_specs[0].size
        self.dispatch("elementwise/cast.wgsl", [step.inputs[0], step.outputs[0]], [n], -(-n // 4),
                      text={"TI": ti, "TO": to, "EXPR": expr})
