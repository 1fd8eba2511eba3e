"""GPU kernels for data movement that geometry lowering leaves to kernels (Gather with run-time
indices) and for Cast. Gather reports run-time indices out of range through the backend's status
buffer, raising the numpy backend's InputError."""
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
        # Indices known at resize were checked by the shape function; run-time ones by the kernel.
        # Rows of whole vec4s move a vec4 at a time (embedding lookups: on lavapipe each load and
        # store is a loop over the SIMD lanes, whatever its width).
        lanes = 4 if inner % 4 == 0 else 1
        self.dispatch("movement/gather.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]],
                      [out.size // lanes, inner // lanes, count, shape[axis]], -(-out.size // lanes // 4),
                      text={"ELEMENT": "vec4<u32>" if lanes == 4 else "u32"}, status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        shape = self.step.input_specs[0].shape
        axis = self.step.attrs["axis"] % len(shape)
        return (f'{self.step.label}: indices must lie in [{-shape[axis]}, {shape[axis]}) for axis {axis}, '
                f'got {value} in "{self.step.inputs[1]}"')


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
