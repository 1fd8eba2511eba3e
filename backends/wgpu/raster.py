"""Raster on the GPU: one dispatch per (merged) region, plus a fill for uncovered elements."""
from __future__ import annotations

import numpy as np

from ..base import Step
from .backend import GpuExecution, gpu_kernel

MAX_RANK = 6


def fill_bits(value: float, dtype: str) -> int:
    """The 32-bit word the GPU stores for value in a tensor of dtype."""
    if dtype == "float32":
        return int(np.float32(value).view(np.int32))
    return int(np.int32(int(value)))


@gpu_kernel("Raster")
class RasterGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        deepest = max((len(r.size) for r in step.plan.regions), default=0)
        return f"region rank {deepest} > {MAX_RANK}" if deepest > MAX_RANK else None

    def prepare(self) -> None:
        step = self.step
        out_name, out = step.outputs[0], step.output_specs[0]
        if step.plan.fill is not None:
            self.dispatch("raster/fill.wgsl", [out_name], [out.size, fill_bits(step.plan.fill, out.dtype)],
                          -(-out.size // 4))
        for region in step.plan.regions:
            pad = MAX_RANK - len(region.size)
            size = [1] * pad + list(region.size)
            src = [0] * pad + list(region.src_strides)
            dst = [0] * pad + list(region.dst_strides)
            params = [region.count, region.src_offset, region.dst_offset, 0, 0, 0, 0, 0]
            params += size + [0, 0] + src + [0, 0] + dst
            self.dispatch("raster/region.wgsl", [step.inputs[region.src], out_name], params, -(-region.count // 4))
