"""Pool family on the GPU: Pool (max / avg over sliding windows, a row segment of up to 64 output
pixels per invocation) and GlobalPool (one invocation per (n, c) plane). One dispatch per op; window
geometry (pads, auto_pad, ceil_mode, output sizes) comes from engine/ops/pool.pool_geometry.
"""
from __future__ import annotations

import math

from ...engine.ops.pool import pool_geometry
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import SEGMENT, as_3d, ceil_div, infer_context, window_reason

COMBINE = {"max": "max(a, v)", "avg": "a + v"}


@gpu_kernel("Pool")
class PoolGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return window_reason(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        taps = math.prod(step.attrs["kernel_shape"])
        return SEGMENT // 4 * (2 * taps + 8) + 16

    def prepare(self) -> None:
        step = self.step
        x, y = step.input_specs[0].shape, step.output_specs[0].shape
        kind = step.attrs["kind"]
        kernel, strides, dilations, begin, end, _ = pool_geometry(infer_context(step))
        sizes = x[2:]
        # Average divisor: taps within [lo, hi) per axis (see kernels_wgsl/pool/pool.wgsl).
        if step.attrs["count_include_pad"]:
            lo, hi = [-b for b in begin], [n + e for n, e in zip(sizes, end, strict=True)]
        else:
            lo, hi = [0] * len(sizes), list(sizes)
        segments = ceil_div(y[-1], SEGMENT)
        invocations = y[0] * y[1] * math.prod(y[2:-1]) * segments
        params = [invocations, 0, 0, 0, 0, 0, SEGMENT, segments,
                  *as_3d(sizes, 1), 0, *as_3d(y[2:], 1), 0, *as_3d(kernel, 1), 0,
                  *as_3d(strides, 1), 0, *as_3d(dilations, 1), 0, *as_3d(begin, 0),
                  float("-inf") if kind == "max" else 0.0, int(kind == "avg"), 0, 0, 0,
                  *as_3d(lo, 0), 0, *as_3d(hi, 1)]
        self.dispatch("pool/pool.wgsl", [step.inputs[0], step.outputs[0]], params, invocations,
                      text={"COMBINE": COMBINE[kind]})


@gpu_kernel("GlobalPool")
class GlobalPoolGpu(GpuExecution):
    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return math.prod(step.input_specs[0].shape[2:]) // 4 + 8

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x = step.input_specs[0]
        return None if x.dtype == "float32" else f"dtype {x.dtype} not supported on the GPU by this kernel"

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        kind = step.attrs["kind"]
        planes = x[0] * x[1]
        self.dispatch("pool/global_pool.wgsl", [step.inputs[0], step.outputs[0]],
                      [planes, math.prod(x[2:]), int(kind == "avg")], planes, text={"COMBINE": COMBINE[kind]})
