"""Softmax, LogSoftmax and Hardmax on the GPU (kernels_wgsl/softmax/): one invocation per row on CPU
adapters (softmax_vec4.wgsl for contiguous rows of whole vec4s, else softmax.wgsl), a workgroup per
row on real GPUs and where a row is too long for one invocation on llvmpipe (softmax_workgroup.wgsl;
reduce.workgroup_per_row)."""
from __future__ import annotations

import math

from ..base import Step
from .backend import LOOP_BUDGET, WORKGROUP, GpuExecution, gpu_kernel
from .reduce import loop_iterations, workgroup_iterations, workgroup_per_row

KIND_IDS = {"softmax": 0, "logsoftmax": 1, "hardmax": 2}


def row_layout(shape: tuple[int, ...], axis: int, legacy_flatten: bool) -> tuple[int, int, int]:
    """(rows, row length, inner size): the input as (outer, length, inner), normalised over the middle.
    legacy_flatten (opset < 13) normalises over every dim from axis on, a contiguous row."""
    if not shape:
        return 1, 1, 1
    axis %= len(shape)
    outer = math.prod(shape[:axis])
    if legacy_flatten:
        return outer, math.prod(shape[axis:]), 1
    inner = math.prod(shape[axis + 1:])
    return outer * inner, shape[axis], inner


@gpu_kernel("Softmax")
class SoftmaxGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x, kind = step.input_specs[0], step.attrs["kind"]
        if x.dtype != "float32":
            return f"{kind} on {x.dtype}"
        _, length, _ = row_layout(x.shape, step.attrs["axis"], bool(step.attrs["legacy_flatten"]))
        if workgroup_iterations(length, 3, 2) > LOOP_BUDGET:
            return f"rows of {length} elements need a multi-pass kernel (a workgroup per row)"
        return None

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0]
        if x.size == 0:
            return
        rows, length, inner = row_layout(x.shape, step.attrs["axis"], bool(step.attrs["legacy_flatten"]))
        kind = step.attrs["kind"]
        tensors, params, text = [step.inputs[0], step.outputs[0]], [rows, length, inner], {"KIND": str(KIND_IDS[kind])}
        if workgroup_per_row(self, loop_iterations(1, length, 2 if kind == "hardmax" else 3), length):
            self.dispatch("softmax/softmax_workgroup.wgsl", tensors, params, rows * WORKGROUP, text=text)
        elif inner == 1 and length % 4 == 0:
            self.dispatch("softmax/softmax_vec4.wgsl", tensors, params, rows, text=text)
        else:
            self.dispatch("softmax/softmax.wgsl", tensors, params, rows, text=text)
