"""ConvDwPw on the GPU: a depthwise 3x3 conv and the 1x1 conv reading it in one dispatch on NC4HW4
feature maps (kernels_wgsl/conv/dwpw_nc4hw4.wgsl), so the depthwise result, the widest tensor of
a MobileNet block, is neither written nor read back, and a dispatch (~50-76 us on lavapipe) is
saved.

Each invocation computes every output slice (C_out <= 32) of a block of 2 x 4 output pixels,
looping over the input slices: the slice's 8 depthwise results (bias, activation) in registers,
then their products with that slice's pointwise weights added into the output sums. Weights and
biases are repacked once (known at resize); on CPU adapters 32-bit weights that fit go to uniform
buffers, as for the other conv kernels (conv_paths.packed_weights: lavapipe loads uniform vec4s
about 3x faster). Precision fp16-arith (shader-f16): 16-bit depthwise arithmetic and pointwise
products, 32-bit pointwise sums, as the 3x3 depthwise and 1x1 GEMM kernels do.
"""
from __future__ import annotations

import numpy as np

from ...engine.ops.conv_dwpw import B_DW, B_PW, RESIDUAL, W_DW, W_PW, dw_geometry
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import ceil_div, infer_context, known, pack_channels, pack_depthwise_weights, window_reason
from .elementwise import UNARY_EXPR

KERNEL = "conv/dwpw_nc4hw4.wgsl"
BLOCK = (4, 2)  # output pixels (W, H) per invocation (fixed in the kernel's text)
MAX_SLICES = 8  # output slices per invocation (the kernel's sums)
STRIDES = {1: "dw1", 2: "dw2"}  # the kernel's depthwise function per stride


def pack_pointwise_weights(w: np.ndarray) -> np.ndarray:
    """(C_out, C, 1, 1) -> (C4, C_out4, 4, 4): per input slice k and output slice o the 4x4
    matrix's columns (input lane j), each a vec4 over o's 4 channels; padding is zero."""
    cout, c = w.shape[:2]
    o4, c4 = ceil_div(cout, 4), ceil_div(c, 4)
    padded = np.zeros((o4 * 4, c4 * 4), np.float32)
    padded[:cout, :c] = w.reshape(cout, c)
    return np.ascontiguousarray(padded.reshape(o4, 4, c4, 4).transpose(2, 0, 3, 1))


def has_input(step: Step, i: int) -> bool:
    return i < len(step.inputs) and bool(step.inputs[i])


def value_or_zeros(step: Step, i: int, size: int) -> np.ndarray:
    """Input i's value, or zeros of `size` where it is absent."""
    return step.input_values[i] if has_input(step, i) else np.zeros(size, np.float32)


def activation_expression(step: Step, attr: str) -> tuple[str, str | None]:
    kind = step.attrs[attr]
    if not kind:
        return "v", None
    expr = UNARY_EXPR.get(kind)
    return (expr, None) if expr is not None else ("v", f"fused activation {kind} has no GPU expression")


@gpu_kernel("ConvDwPw")
class ConvDwPwGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        from .layout import is_feature_map

        reason = window_reason(step)
        if reason:
            return reason
        x, wd, wp = step.input_specs[0], step.input_specs[W_DW].shape, step.input_specs[W_PW].shape
        if not is_feature_map(x):
            return "only 2-D convolutions run on the GPU"
        if not all(known(step, i) for i in (W_DW, B_DW, W_PW, B_PW)):
            return "weights and biases must be known at resize (they are repacked)"
        if tuple(wd[2:]) != (3, 3):
            return f"depthwise kernel {list(wd[2:])}: the GPU kernel runs 3x3"
        strides, dilations, _, _ = dw_geometry(infer_context(step))
        if strides[0] != strides[1] or strides[0] not in STRIDES or dilations != [1, 1]:
            return f"strides {strides}, dilations {dilations}: the GPU kernel runs stride 1 or 2, dilation 1"
        if wp[0] > 4 * MAX_SLICES:
            return f"{wp[0]} output channels: the GPU kernel computes at most {4 * MAX_SLICES}"
        return activation_expression(step, "dw_activation")[1] or activation_expression(step, "activation")[1]

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return (0, RESIDUAL)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # The loop over input slices; the pixel loops have constant trip counts (unrolled).
        return ceil_div(step.input_specs[0].shape[1], 4) + 8

    def prepare(self) -> None:
        from .conv_paths import weights_binding
        from .elementwise import feature_map_text
        from .layout import accessor_params, arithmetic

        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        n, cout, oh, ow = y.shape
        c4s, o4s = ceil_div(x.shape[1], 4), ceil_div(cout, 4)
        strides, _, begin, _ = dw_geometry(infer_context(step))
        half = arithmetic(self.backend) == "f16"

        wd, wd_decl = weights_binding(self, "dw_weights", step.input_values[W_DW], pack_depthwise_weights, half=half,
                                      binding=1, var="wd")
        wp, wp_decl = weights_binding(self, "pw_weights", step.input_values[W_PW], pack_pointwise_weights, half=half,
                                      binding=2, var="wp")
        # Both stages' biases in one buffer, keyed by the depthwise weights (constants of the model,
        # like the biases, so the pair is packed once per session).
        channels = x.shape[1]
        biases = self.packed_constant("biases", step.input_values[W_DW], lambda _: np.concatenate(
            [pack_channels(value_or_zeros(step, B_DW, channels)), pack_channels(value_or_zeros(step, B_PW, cout))]))
        residual = step.inputs[RESIDUAL] if has_input(step, RESIDUAL) else step.inputs[0]
        r = step.input_specs[RESIDUAL] if has_input(step, RESIDUAL) else x
        blocks, rows = ceil_div(ow, BLOCK[0]), ceil_div(oh, BLOCK[1])
        count = n * rows * blocks
        attrs = step.attrs
        params = [count, blocks, strides[0], c4s, o4s, int(has_input(step, RESIDUAL)), *begin,
                  float(attrs["dw_activation_alpha"]), float(attrs["dw_activation_beta"]),
                  float(attrs["activation_alpha"]), float(attrs["activation_beta"]), rows, 0, 0, 0,
                  *accessor_params(x), *accessor_params(y), *accessor_params(r)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 4, 21, True),
                                       "r": (residual, 5, 26, False)}, half=half)
        text.update(ACC="f32", WD_DECL=wd_decl, WP_DECL=wp_decl, DW=STRIDES[strides[0]],
                    DW_ACT=activation_expression(step, "dw_activation")[0],
                    ACT=activation_expression(step, "activation")[0])
        self.dispatch(KERNEL, [step.inputs[0], wd, wp, biases, step.outputs[0], residual], params, count, text=text)
