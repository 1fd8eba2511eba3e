"""Grid family on the GPU (kernels_wgsl/grid/): GridSample on 2-D and 3-D images (one invocation
per output position and 4 channels), AffineGrid (one per output position) and Col2Im with up to 3
spatial dims (one per 4 output pixels, gathering the blocks that cover them)."""
from __future__ import annotations

import math

import numpy as np

from ...engine.ops.base import InferContext
from ...engine.ops.grid import TAPS, col2im_geometry
from ..base import Step
from .backend import GpuExecution, gpu_kernel

MODE_IDS = {"nearest": 0, "linear": 1, "cubic": 2}
PADDING_IDS = {"zeros": 0, "border": 1, "reflection": 2}
MAX_COL2IM_DIMS = 3


def _float32_only(step: Step) -> str | None:
    for spec in list(step.input_specs[:1]) + list(step.output_specs):
        if spec.dtype != "float32":
            return f"{step.op.op_type} of {spec.dtype}"
    return None


@gpu_kernel("GridSample")
class GridSampleGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if len(step.input_specs[0].shape) not in (4, 5):
            return f"{len(step.input_specs[0].shape) - 2}-D sampling (the GPU kernel samples 2-D and 3-D images)"
        if step.input_specs[1].dtype != "float32":
            return f"a {step.input_specs[1].dtype} grid"
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # The z loop's trip count is a parameter; the x and y loops' are constants.
        return 4 * TAPS[step.attrs["mode"]] * (1 + TAPS[step.attrs["mode"]])

    def prepare(self) -> None:
        step = self.step
        n, c, *spatial = step.input_specs[0].shape
        d, h, w = [1] * (3 - len(spatial)) + spatial
        positions = math.prod(step.output_specs[0].shape[2:])
        blocks = -(-c // 4)
        count = n * blocks * positions
        if count == 0:
            return
        mode = step.attrs["mode"]
        params = [count, c, d, h, w, positions, blocks, int(bool(step.attrs["align_corners"])),
                  PADDING_IDS[step.attrs["padding_mode"]], len(spatial)]
        text = {"TAPS": str(TAPS[mode]), "MODE": str(MODE_IDS[mode])}
        self.dispatch("grid/grid_sample.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]], params, count,
                      text=text)


@gpu_kernel("AffineGrid")
class AffineGridGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _float32_only(step)

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        rank = out.shape[-1]
        dims = [1] * (3 - rank) + list(out.shape[1:-1])
        positions = math.prod(dims)
        count = out.shape[0] * positions
        if count == 0:
            return
        params = [count, positions, rank, int(bool(step.attrs["align_corners"])), *dims]
        self.dispatch("grid/affine_grid.wgsl", [step.inputs[0], step.outputs[0]], params, count)


def _col2im_plan(step: Step) -> tuple[list[int], ...]:
    ctx = InferContext(step.node, step.attrs, step.input_specs, step.input_values)
    return col2im_geometry(ctx)


@gpu_kernel("Col2Im")
class Col2ImGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        image = step.input_values[1]
        if image is None or np.size(image) > MAX_COL2IM_DIMS:
            return f"more than {MAX_COL2IM_DIMS} spatial dims"
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        _, block, *_ = _col2im_plan(step)
        # 4 pixels per invocation, each walking the taps of every dim (nested loops).
        return 4 * sum(math.prod(block[:i + 1]) for i in range(len(block)))

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        if out.size == 0:
            return
        image, block, dilations, pads, strides, counts = _col2im_plan(step)
        r = len(image)

        def padded(values: list[int], fill: int) -> list[int]:  # unit dims in front
            return [fill] * (MAX_COL2IM_DIMS - r) + list(values)

        params = [out.size, out.shape[1], *padded(image, 1), *padded(block, 1), *padded(dilations, 1),
                  *padded(strides, 1), *padded(pads[:r], 0), *padded(counts, 1)]
        width = image[-1]
        self.dispatch("grid/col2im.wgsl", [step.inputs[0], step.outputs[0]], params,
                      out.size // width * -(-width // 4))
