"""FakeQuantize on the GPU (kernels_wgsl/quant/). QuantizeLinear and DequantizeLinear have no GPU
kernel: their 8/16-bit tensors are not stored on the GPU (backend.GPU_DTYPES), so they run on numpy
by design; the converter's fold_qdq pass gives QDQ pairs this float-only op instead."""
from __future__ import annotations

import math

from ...engine.ops.quant import QUANT_RANGES
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .elementwise import feature_map_text


def param_layout(x_shape: tuple[int, ...], scale_shape: tuple[int, ...], axis: int,
                 block: int) -> tuple[int, int, int, list[int]]:
    """(inner size, axis length, block size, [outer, block, inner] strides into the parameters) of
    fake_quantize.wgsl for a per-tensor, per-axis or blocked scale."""
    if math.prod(scale_shape) == 1 and len(scale_shape) <= 1:
        return 1, 1, 1, [0, 0, 0]
    axis = axis + len(x_shape) if axis < 0 else axis
    inner, length = math.prod(x_shape[axis + 1:]), x_shape[axis]
    if block == 0:
        return inner, length, 1, [0, 1, 0]
    blocks = scale_shape[axis]
    return inner, length, block, [blocks * inner, inner, 1]


def _per_channel(step: Step) -> bool | None:
    """For NC4HW4: False per tensor, True per channel (axis 1), None for other forms."""
    x, scale = step.input_specs[0].shape, step.input_specs[1].shape
    if math.prod(scale) == 1 and len(scale) <= 1:
        return False
    if step.attrs["block_size"] == 0 and step.attrs["axis"] % len(x) == 1:
        return True
    return None


@gpu_kernel("FakeQuantize")
class FakeQuantizeGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        dtypes = {s.dtype for s in step.input_specs if s is not None} | {step.output_specs[0].dtype}
        if dtypes != {"float32"}:
            return f"FakeQuantize on {sorted(dtypes)}: the kernel is float32 only"
        return None

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        if is_feature_map(step.input_specs[0]) and _per_channel(step) is not None:
            return ("linear", "nc4hw4")
        return ("linear",)

    def _scalars(self) -> tuple[list[str], float, float, int]:
        """Bound parameter tensors (the scale again in place of an absent zero point), qmin, qmax
        and the has-zero-point flag."""
        step = self.step
        low, high = QUANT_RANGES[step.attrs["dtype"]]
        has_zero = len(step.inputs) > 2 and bool(step.inputs[2])
        tensors = [step.inputs[1], step.inputs[2] if has_zero else step.inputs[1]]
        return tensors, float(low), float(high), int(has_zero)

    def prepare(self) -> None:
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        step = self.step
        x, scale = step.input_specs[0], step.input_specs[1]
        params_in, low, high, has_zero = self._scalars()
        inner, length, block, strides = param_layout(x.shape, scale.shape, step.attrs["axis"],
                                                     step.attrs["block_size"])
        params = [x.size, inner, length, block, *strides, has_zero, low, high]
        self.dispatch("quant/fake_quantize.wgsl", [step.inputs[0], *params_in, step.outputs[0]], params,
                      -(-x.size // 4))

    def prepare_nc4hw4(self) -> None:
        from .layout import accessor_params, nc4hw4_dims

        step = self.step
        x, out = step.input_specs[0], step.output_specs[0]
        params_in, low, high, has_zero = self._scalars()
        blocks = math.prod(nc4hw4_dims(out.shape))
        params = [blocks, int(bool(_per_channel(step))), has_zero, low]
        params += accessor_params(x) + accessor_params(out) + [high]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False), "y": (step.outputs[0], 3, 9, True)})
        self.dispatch("quant/fake_quantize_nc4hw4.wgsl", [step.inputs[0], *params_in, step.outputs[0]], params,
                      blocks, text=text)
