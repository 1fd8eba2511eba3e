"""Pool family on the GPU: Pool (max / avg / lp over sliding windows, a row segment of up to 64
output pixels per invocation), GlobalPool (one invocation per (n, c) plane) and MaxUnpool (a
zeroing dispatch, then a scatter that reports indices outside the output through the backend's
status buffer). One dispatch per op otherwise; window geometry (pads, auto_pad, ceil_mode, output
sizes) comes from engine/ops/pool.pool_geometry.

On 4-D float feature maps Pool and GlobalPool prefer NC4HW4 (pool_nc4hw4.wgsl: a slice's row
segment per invocation, a vec4 of 4 channels per pixel; global_pool_nc4hw4.wgsl: one invocation
per (n, slice), or on real GPUs a workgroup per slice (global_pool_nc4hw4_workgroup.wgsl,
dispatch_global_pool), writing the (N, C, 1, 1) output NC4HW4 too). 1-D and 3-D pools stay linear, and
so does max pooling with indices (max_pool_indices.wgsl, a row segment of up to 16 outputs per
invocation, indices as i32).
"""
from __future__ import annotations

import math

from ...engine.ops.pool import pool_geometry, wants_indices
from ..base import Step
from .backend import LOOP_BUDGET, GpuExecution, gpu_kernel
from .conv import SEGMENT, as_3d, ceil_div, infer_context, window_reason
from .elementwise import feature_map_text

COMBINE = {"max": "max(a, v)", "avg": "a + v"}
NC4HW4_SEGMENT = 16  # output pixels per invocation of pool_nc4hw4.wgsl, fewer for big windows
INDEX_SEGMENT = 16  # output pixels per invocation of max_pool_indices.wgsl, fewer for big windows
INT32_LIMIT = 2 ** 31


def pool_text(step: Step) -> dict[str, str]:
    """COMBINE / FINISH expressions of a Pool kind: Lp is exact for p 1 and 2 (abs, square and
    sqrt), pow otherwise."""
    kind = step.attrs["kind"]
    if kind != "lp":
        return {"COMBINE": COMBINE[kind], "FINISH": "a"}
    p = step.attrs["p"]
    if p == 1:
        return {"COMBINE": "a + abs(v)", "FINISH": "a"}
    if p == 2:
        return {"COMBINE": "a + v * v", "FINISH": "sqrt(a)"}
    return {"COMBINE": "a + lp_pow(v)", "FINISH": "lp_root(a)"}


def index_segment(kernel) -> tuple[int, int]:
    """(pixels per invocation, loop iterations per pixel) of max_pool_indices.wgsl, the segment
    shortened for big windows so the loops stay within half of llvmpipe's loop budget."""
    per_pixel = math.prod(kernel) + math.prod(kernel[:-1]) + 2
    return max(1, min(INDEX_SEGMENT, LOOP_BUDGET // 2 // per_pixel)), per_pixel


def prefers_nc4hw4(step: Step) -> tuple[str, ...]:
    from .layout import is_feature_map

    return ("nc4hw4", "linear") if is_feature_map(step.input_specs[0]) else ("linear",)


def nc4hw4_segment(kernel) -> tuple[int, int]:
    """(pixels per invocation, loop iterations per pixel) of pool_nc4hw4.wgsl: the segment keeps an
    invocation's loops within half of llvmpipe's loop budget."""
    per_pixel = kernel[0] * (kernel[1] + 1) + 1
    return max(1, min(NC4HW4_SEGMENT, LOOP_BUDGET // 2 // per_pixel)), per_pixel


@gpu_kernel("Pool")
class PoolGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        reason = window_reason(step)
        if reason is None and wants_indices(step.node) and step.input_specs[0].size >= INT32_LIMIT:
            return f"indices of an input of {step.input_specs[0].size} elements do not fit the GPU's int32"
        return reason

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        if wants_indices(step.node):
            segment, per_pixel = index_segment(step.attrs["kernel_shape"])
            return segment * per_pixel + 8
        if cls.layouts(step)[0] == "nc4hw4":
            segment, per_pixel = nc4hw4_segment(step.attrs["kernel_shape"])
            return segment * (per_pixel + 1) + 8
        taps = math.prod(step.attrs["kernel_shape"])
        return SEGMENT // 4 * (2 * taps + 8) + 16

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("linear",) if wants_indices(step.node) else prefers_nc4hw4(step)

    def prepare(self) -> None:
        step = self.step
        x, y = step.input_specs[0].shape, step.output_specs[0].shape
        kind = step.attrs["kind"]
        kernel, strides, dilations, begin, end, _ = pool_geometry(infer_context(step))
        sizes = x[2:]
        if wants_indices(step.node):
            self.prepare_indices(kernel, strides, dilations, begin)
            return
        # Average divisor: taps within [lo, hi) per axis (see kernels_wgsl/pool/pool.wgsl).
        if step.attrs["count_include_pad"]:
            lo, hi = [-b for b in begin], [n + e for n, e in zip(sizes, end, strict=True)]
        else:
            lo, hi = [0] * len(sizes), list(sizes)
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4(kernel, strides, dilations, begin, lo, hi)
            return
        segments = ceil_div(y[-1], SEGMENT)
        invocations = y[0] * y[1] * math.prod(y[2:-1]) * segments
        params = [invocations, 0, 0, 0, 0, 0, SEGMENT, segments,
                  *as_3d(sizes, 1), 0, *as_3d(y[2:], 1), 0, *as_3d(kernel, 1), 0,
                  *as_3d(strides, 1), 0, *as_3d(dilations, 1), 0, *as_3d(begin, 0),
                  float("-inf") if kind == "max" else 0.0, int(kind == "avg"), float(step.attrs["p"]), 0, 0,
                  *as_3d(lo, 0), 0, *as_3d(hi, 1)]
        self.dispatch("pool/pool.wgsl", [step.inputs[0], step.outputs[0]], params, invocations,
                      text=pool_text(step))

    def prepare_indices(self, kernel, strides, dilations, begin) -> None:
        step = self.step
        x, y = step.input_specs[0].shape, step.output_specs[0].shape
        segment, _ = index_segment(kernel)
        segments = ceil_div(y[-1], segment)
        invocations = y[0] * y[1] * math.prod(y[2:-1]) * segments
        params = [invocations, segments, segment, step.attrs["storage_order"],
                  *as_3d(x[2:], 1), 0, *as_3d(y[2:], 1), 0, *as_3d(kernel, 1), 0,
                  *as_3d(strides, 1), 0, *as_3d(dilations, 1), 0, *as_3d(begin, 0), float("-inf")]
        self.dispatch("pool/max_pool_indices.wgsl", [step.inputs[0], *step.outputs[:2]], params, invocations)

    def prepare_nc4hw4(self, kernel, strides, dilations, begin, lo, hi) -> None:
        from .layout import accessor_params

        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        kind = step.attrs["kind"]
        n, c, oh, ow = y.shape
        segment, _ = nc4hw4_segment(kernel)
        segments = ceil_div(ow, segment)
        invocations = n * ceil_div(c, 4) * oh * segments
        params = [invocations, segments, segment, *kernel, *strides, *dilations, *begin,
                  float("-inf") if kind == "max" else 0.0, int(kind == "avg"), lo[0], hi[0], lo[1], hi[1],
                  float(step.attrs["p"]), 0, 0, *accessor_params(x), *accessor_params(y)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 20, False), "y": (step.outputs[0], 1, 25, True)})
        text.update(pool_text(step))
        self.dispatch("pool/pool_nc4hw4.wgsl", [step.inputs[0], step.outputs[0]], params, invocations, text=text)


@gpu_kernel("GlobalPool")
class GlobalPoolGpu(GpuExecution):
    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        x = step.input_specs[0].shape
        if cls.layouts(step)[0] == "nc4hw4":
            return cls.nc4hw4_iterations(x)
        return math.prod(x[2:]) // 4 + 8

    @staticmethod
    def nc4hw4_iterations(shape) -> int:
        return shape[2] * (ceil_div(shape[3], 4) + 1) + 8  # rows, each 4 pixels per iteration

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        # Tall, narrow planes (rows of 1-3 pixels) loop more per pixel in NC4HW4: there the linear
        # kernel keeps them within llvmpipe's loop budget.
        if prefers_nc4hw4(step)[0] == "nc4hw4" and cls.nc4hw4_iterations(step.input_specs[0].shape) <= LOOP_BUDGET:
            return ("nc4hw4", "linear")
        return ("linear",)

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x = step.input_specs[0]
        return None if x.dtype == "float32" else f"dtype {x.dtype} not supported on the GPU by this kernel"

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        kind = step.attrs["kind"]
        if self.layout == "nc4hw4":
            from .layout import accessor_params

            blocks = x[0] * ceil_div(x[1], 4)
            params = [blocks, int(kind == "avg"), 0, 0, *accessor_params(step.input_specs[0]),
                      *accessor_params(step.output_specs[0])]
            text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False), "y": (step.outputs[0], 1, 9, True)})
            text["COMBINE"] = COMBINE[kind]
            dispatch_global_pool(self, [step.inputs[0], step.outputs[0]], params, blocks, text, x)
            return
        planes = x[0] * x[1]
        self.dispatch("pool/global_pool.wgsl", [step.inputs[0], step.outputs[0]],
                      [planes, math.prod(x[2:]), int(kind == "avg")], planes, text={"COMBINE": COMBINE[kind]})


GLOBAL_POOL_KERNELS = ("pool/global_pool_nc4hw4.wgsl", "pool/global_pool_nc4hw4_workgroup.wgsl")


def dispatch_global_pool(ex: GpuExecution, tensors: list[str], params: list, blocks: int, text: dict[str, str],
                         shape) -> str:
    """Dispatch the global pooling of `blocks` NC4HW4 slices of planes of `shape` (N, C, H, W):
    an invocation per slice, or a workgroup per slice where reduce.workgroup_per_row gives rows of
    that plane a workgroup (real GPUs: on an H200 zoo resnet's head at 224, 16 slices of 28x28,
    took 73 us with one invocation each). The other kernel is compiled too (a resize compiles
    nothing). Returns the kernel dispatched."""
    from .backend import WORKGROUP
    from .reduce import workgroup_per_row

    plane = shape[2] * shape[3]
    by_workgroup = workgroup_per_row(ex, GlobalPoolGpu.nc4hw4_iterations(shape), plane)
    chosen, other = GLOBAL_POOL_KERNELS[::-1] if by_workgroup else GLOBAL_POOL_KERNELS
    ex.dispatch(chosen, tensors, params, blocks * WORKGROUP if by_workgroup else blocks, text=text)
    ex.compile(other, tensors, text=text)
    return chosen


@gpu_kernel("MaxUnpool")
class MaxUnpoolGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x, y = step.input_specs[0], step.output_specs[0]
        if x.dtype != "float32":
            return f"dtype {x.dtype} not supported on the GPU by this kernel (float32 only)"
        if y.size >= INT32_LIMIT:
            return f"an output of {y.size} elements cannot be indexed with the GPU's int32"
        return None

    def prepare(self) -> None:
        step = self.step
        x, y = step.input_specs[0].size, step.output_specs[0].size
        tensors = [step.inputs[0], step.inputs[1], step.outputs[0]]
        # Zero the output, then scatter: two dispatches that run in order. The scatter reports
        # indices outside the output (even known ones: no shape function checks them).
        self.dispatch("pool/max_unpool.wgsl", tensors, [0, y, y], ceil_div(y, 4), status="bind")
        self.dispatch("pool/max_unpool.wgsl", tensors, [1, x, y], ceil_div(x, 4), status="check")

    def status_error(self, check: int, value: int) -> str:
        shape = self.step.output_specs[0].shape
        return (f"{self.step.label}: index {value} is outside the output's {math.prod(shape)} elements "
                f'{list(shape)} in "{self.step.inputs[1]}"')
