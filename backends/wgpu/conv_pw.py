"""ConvPw on the GPU: a 2-D conv with at most 16 outputs and the 1x1 conv reading it in one dispatch
on NC4HW4 feature maps (kernels_wgsl/conv/conv_pw_nc4hw4.wgsl), so the conv result is neither
written nor read back and a dispatch (~35-50 us on lavapipe) is saved.

Each invocation computes every output slice (C_out <= 16) of PIXELS output pixels along W: the
conv's sums of all its (<= 4) slices for those pixels in registers, then bias and activation, then
their products with the pointwise weights, one output slice at a time. Weights and biases are
repacked once (known at resize); on CPU adapters 32-bit weights that fit go to uniform buffers, as
for the other conv kernels (conv_paths.weights_binding: lavapipe loads uniform vec4s about 3x
faster). Precision fp16-arith (shader-f16): 16-bit products, 32-bit sums, as conv4_nc4hw4.wgsl.
On real GPUs the pixels per invocation come from the cost model (choose_pixels: fewer pixels,
shorter chains for a small map's few invocations), and every count's pipeline is compiled.
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from ...engine.errors import WgnnError
from ...engine.ops.conv_pw import B_PW, RESIDUAL, W_PW, B, W, conv_context
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import ceil_div, infer_context, known, pack_channels, window_reason
from .conv_dwpw import activation_expression, has_input, value_or_zeros

KERNEL = "conv/conv_pw_nc4hw4.wgsl"
MAX_SLICES = 4  # conv and output slices per invocation (the kernel's sums)
# Output pixels along W per invocation (the kernel runs 1, 2, 4 or 8). Measured on lavapipe, GPU
# time with sliding loads, 8 / 4 pixels: unet's 16->8->2 at 224x224 10.2 / 13.9 ms, 32->16->8 at
# 112x112 8.0 / 11.5 ms, 64->16->16 at 56x56 3.5 / 8.2 ms and at 7x7 0.12 / 0.15 ms (1 pixel: 0.25;
# 2: 0.20): the weight loads a block of pixels shares cost more than the spills of 8 pixels' sums
# (8 pixels x 4 slices: 128 scalars, as in conv4_nc4hw4.wgsl).
PIXELS = 8


def pack_conv_weights(w: np.ndarray) -> np.ndarray:
    """(C_mid, C_in, kH, kW) -> (kH, kW, C_in4, C_mid4, 4, 4): per tap, input slice k and conv slice
    m the 4x4 matrix's columns (input lane j), each a vec4 over m's channels; padding is zero."""
    cmid, cin, kh, kw = w.shape
    m4, c4 = ceil_div(cmid, 4), ceil_div(cin, 4)
    padded = np.zeros((m4 * 4, c4 * 4, kh, kw), np.float32)
    padded[:cmid, :cin] = w
    return np.ascontiguousarray(padded.reshape(m4, 4, c4, 4, kh, kw).transpose(4, 5, 2, 0, 3, 1))


def pack_pointwise_weights(w: np.ndarray) -> np.ndarray:
    """(C_out, C_mid, 1, 1) -> (C_out4, C_mid4, 4, 4): per output slice o and conv slice m the 4x4
    matrix's columns (conv lane j), each a vec4 over o's channels; padding is zero."""
    cout, cmid = w.shape[:2]
    o4, m4 = ceil_div(cout, 4), ceil_div(cmid, 4)
    padded = np.zeros((o4 * 4, m4 * 4), np.float32)
    padded[:cout, :cmid] = w.reshape(cout, cmid)
    return np.ascontiguousarray(padded.reshape(o4, 4, m4, 4).transpose(0, 2, 3, 1))


def conv_geometry(step: Step) -> dict:
    """Resolved geometry of the conv stage: kernel, strides, dilations, pads (begin)."""
    from ...engine.ops.conv import resolve_pads, spatial_list

    ctx = conv_context(infer_context(step))
    x, w = step.input_specs[0].shape, step.input_specs[W].shape
    strides = spatial_list(ctx, "strides", 2, 1)
    dilations = spatial_list(ctx, "dilations", 2, 1)
    begin, _ = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
    return {"kernel": list(w[2:]), "strides": strides, "dilations": dilations, "begin": begin}


# Output pixels per invocation the kernel is compiled for on real GPUs (PIXELS on CPU adapters).
PIXEL_CHOICES = (8, 4, 2, 1)


def variant(geo: dict, pixels: int | None = None) -> tuple[int, bool]:
    """(output pixels per invocation, PIXELS where None; sliding loads) of the kernel for a conv
    stage's geometry: sliding where the W stride equals the W dilation (on lavapipe 8 pixels of 3x3
    stride 1 took 0.6-0.9x the time without; 5x5: 0.6x)."""
    pixels = PIXELS if pixels is None else pixels
    return pixels, pixels > 1 and geo["kernel"][1] > 1 and geo["strides"][1] == geo["dilations"][1]


def pixels_cost(step: Step, geo: dict, pixels: int):
    """conv_paths.KernelCost of the kernel at `pixels` output pixels per invocation: per tap and
    input slice the pixels' loads (sliding: each input column of a kernel row once) and the conv
    weights, MID x pixels 4x4 products; then the pointwise weights and products, the stores."""
    from .conv_paths import KernelCost

    n, cout, oh, ow = step.output_specs[0].shape
    kh, kw = geo["kernel"]
    slices = ceil_div(step.input_specs[0].shape[1], 4)
    mid, out = ceil_div(step.input_specs[W].shape[0], 4), ceil_div(cout, 4)
    _, slide = variant(geo, pixels)
    x_loads = kh * slices * (pixels + kw - 1) if slide else kh * kw * slices * pixels
    weights = kh * kw * slices * mid * 4 + mid * out * 4
    return KernelCost(n * oh * ceil_div(ow, pixels), x_loads + weights, out * pixels, weights * pixels)


PIXELS_ENV = "WGNN_CONVPW_PIXELS"
# The invocations this kernel's chains run at once on a real GPU, in place of the cost weights'
# concurrency: on an H200 (zoo unet) 1 pixel per invocation beat 8 at 256 and 1024 invocations
# (16x16: 99 against 112 us; 32x32: 17 against 50 us), but at 112x112 (12544 invocations) took
# 258 us against 8 pixels' 135, and 2 pixels at 224x224 (25088) 103 against 65.
CONCURRENCY = 2048


def choose_pixels(step: Step, geo: dict, weights) -> int:
    """PIXELS on CPU adapters (measured there); on real GPUs, whose cost model prices one
    invocation's chain per wave (conv_paths.GPU_WEIGHTS; waves of CONCURRENCY invocations here),
    the PIXEL_CHOICES count of least estimate (the more pixels on a tie): a small map's few
    invocations then run shorter chains, a big map's keep 8 pixels.
    WGNN_CONVPW_PIXELS=N forces N (A/B runs)."""
    from .conv_paths import estimate_us

    forced = os.environ.get(PIXELS_ENV, "").strip()
    if forced:
        if forced not in {str(p) for p in PIXEL_CHOICES}:
            choices = ", ".join(map(str, PIXEL_CHOICES))
            raise WgnnError(f"{PIXELS_ENV}={forced}: the ConvPw kernel runs {choices} pixels")
        return int(forced)
    if not weights.concurrency:
        return PIXELS
    waves = replace(weights, concurrency=min(weights.concurrency, CONCURRENCY))
    return min(PIXEL_CHOICES, key=lambda p: (estimate_us([pixels_cost(step, geo, p)], waves), -p))


@gpu_kernel("ConvPw")
class ConvPwGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        from .layout import is_feature_map

        reason = window_reason(step)
        if reason:
            return reason
        if not is_feature_map(step.input_specs[0]):
            return "only 2-D convolutions run on the GPU"
        if not all(known(step, i) for i in (W, B, W_PW, B_PW)):
            return "weights and biases must be known at resize (they are repacked)"
        cmid, cout = step.input_specs[W].shape[0], step.input_specs[W_PW].shape[0]
        if max(cmid, cout) > 4 * MAX_SLICES:
            return (f"{cmid} conv and {cout} output channels: the GPU kernel computes at most {4 * MAX_SLICES} "
                    "of each")
        return activation_expression(step, "conv_activation")[1] or activation_expression(step, "activation")[1]

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return (0, RESIDUAL)

    @classmethod
    def linear_inputs(cls, step: Step) -> tuple[int, ...]:
        # An image of at most 4 channels (a network's first conv): as Conv, read a slice at a time
        # through its accessor rather than converted by a dispatch of its own.
        return (0,) if step.input_specs[0].shape[1] <= 4 else ()

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # Kernel rows around W taps around input slices (the sliding variant: input slices around W
        # taps), then the output slices; the loops over pixels and slices of an invocation have
        # constant trip counts (unrolled).
        _, _, kh, kw = step.input_specs[W].shape
        slices = ceil_div(step.input_specs[0].shape[1], 4)
        return kh * (max(kw * (slices + 1), slices * (kw + 1)) + 1) + MAX_SLICES + 8

    def prepare(self) -> None:
        from .conv_paths import adapter_weights, weights_binding
        from .elementwise import feature_map_text
        from .layout import accessor_params, arithmetic

        step, attrs = self.step, self.step.attrs
        x, y = step.input_specs[0], step.output_specs[0]
        n, cout, oh, ow = y.shape
        cmid = step.input_specs[W].shape[0]
        geo = conv_geometry(step)
        half = arithmetic(self.backend) == "f16"
        w, w_decl = weights_binding(self, "convpw_weights", step.input_values[W], pack_conv_weights, half=half,
                                    binding=1, var="w")
        wp, wp_decl = weights_binding(self, "convpw_pw_weights", step.input_values[W_PW], pack_pointwise_weights,
                                      half=half, binding=2, var="wp")
        # Both stages' biases in one buffer, keyed by the conv weights (constants of the model, like
        # the biases, so they are packed once per session).
        biases = self.packed_constant("convpw_biases", step.input_values[W], lambda _: np.concatenate(
            [pack_channels(value_or_zeros(step, B, cmid)), pack_channels(value_or_zeros(step, B_PW, cout))]))
        residual = step.inputs[RESIDUAL] if has_input(step, RESIDUAL) else step.inputs[0]
        r = step.input_specs[RESIDUAL] if has_input(step, RESIDUAL) else x
        weights = adapter_weights(self.backend.context)
        pixels, slide = variant(geo, choose_pixels(step, geo, weights))
        blocks = ceil_div(ow, pixels)
        count = n * oh * blocks
        params = [count, blocks, int(has_input(step, RESIDUAL)), 0, *geo["kernel"], *geo["strides"], *geo["dilations"],
                  *geo["begin"], float(attrs["conv_activation_alpha"]), float(attrs["conv_activation_beta"]),
                  float(attrs["activation_alpha"]), float(attrs["activation_beta"]),
                  *accessor_params(x), *accessor_params(y), *accessor_params(r)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 4, 21, True),
                                       "r": (residual, 5, 26, False)}, half=half)
        text.update(W_DECL=w_decl, WP_DECL=wp_decl, CONV_ACT=activation_expression(step, "conv_activation")[0],
                    ACT=activation_expression(step, "activation")[0])
        tensors = [step.inputs[0], w, wp, biases, step.outputs[0], residual]
        self.dispatch(KERNEL, tensors, params, count, text=text,
                      constants={"MID": ceil_div(cmid, 4), "PIXELS": pixels, "SLIDE": int(slide)})
        if weights.concurrency or os.environ.get(PIXELS_ENV):  # a resize may pick another count: compile them
            for other in PIXEL_CHOICES:
                if other != pixels:
                    _, other_slide = variant(geo, other)
                    self.compile(KERNEL, tensors, text=text,
                                 constants={"MID": ceil_div(cmid, 4), "PIXELS": other, "SLIDE": int(other_slide)})
