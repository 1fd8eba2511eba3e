"""Select family on the GPU: TopK, one invocation per output row (kernels_wgsl/select/topk.wgsl).

NonZero, Compress and NonMaxSuppression have data-dependent output shapes and run on the CPU by
design (Compress with a known condition is Raster regions); Einsum is lowered by the converter
to MatMul, Reduce and data movement, which have GPU kernels.
"""
from __future__ import annotations

import math

from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type

NAN_TEST = "(bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u"


def topk_layout(step: Step) -> tuple[int, int, int, int]:
    """(rows, row length, inner size, k) of a TopK step."""
    shape = step.input_specs[0].shape
    axis = step.attrs["axis"] % len(shape)
    k = step.output_specs[0].shape[axis]
    inner = math.prod(shape[axis + 1:])
    return math.prod(shape[:axis]) * inner, shape[axis], inner, k


@gpu_kernel("TopK")
class TopKGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        dtype = step.input_specs[0].dtype
        if dtype not in ("float32", "int32", "int64"):
            return f"TopK of {dtype}"
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # k passes over the row, 8 elements per iteration of the main loop.
        _, length, _, k = topk_layout(step)
        return k * (2 + length // 8 + length % 8)

    def prepare(self) -> None:
        step = self.step
        rows, length, inner, k = topk_layout(step)
        if rows == 0 or k == 0:
            return
        t = wgsl_type(step.input_specs[0].dtype)
        text = {"T": t, "IS_NAN": NAN_TEST if t == "f32" else "false"}
        params = [rows, length, inner, k, int(bool(step.attrs["largest"]))]
        self.dispatch("select/topk.wgsl", [step.inputs[0], step.outputs[0], step.outputs[1]], params, rows,
                      text=text)
