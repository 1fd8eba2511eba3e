"""Conv family on the GPU. Every kernel sees 1-D, 2-D and 3-D convolutions as D x H x W with missing
leading axes of size 1.

- Conv 2-D on NC4HW4 feature maps, preferred where the weights are known at resize (repacked once):
  direct, 1x1 GEMM and Winograd paths, picked per conv shape by a cost model (conv_paths.py,
  conv_winograd.py), for one group or groups of whole slices, and depthwise convs.
- Conv on linear tensors (1-D/3-D convs, channel multipliers, groups of partial slices, weights
  known only at run time): a direct kernel, 8 output channels x 8 pixels along W per invocation
  (conv.wgsl; a variant that slides loaded columns across W taps when the W stride equals the W
  dilation, conv_slide.wgsl), and for one input channel per group with a channel multiplier < 4 a
  depthwise kernel, one channel's row segment of up to 64 pixels per invocation (depthwise.wgsl).
- ConvTranspose: a gather kernel, 4 output channels x 4 pixels of one residue class modulo the W
  stride per invocation, on linear tensors (conv_transpose.wgsl) or, for 2-D feature maps whose
  input is NC4HW4 and weights known at resize (one group or groups of whole slices), on NC4HW4
  with weights repacked as the NC4HW4 Conv's (conv_transpose_nc4hw4.wgsl). A decoder's 2x2
  up-convolution at strides 2 (no pads, one group) writes each output pixel from one tap: it runs
  as a 1x1 conv with a 2x2 depth-to-space store (conv_transpose2x2_nc4hw4.wgsl; on lavapipe zoo
  unet's one 0.18 -> 0.13 ms at 32x32, 1.77 -> 0.77 ms at 224x224, the model x0.95).

Pads and output sizes come from the engine's shape helpers (engine/ops/conv.py) at prepare time;
bias, the fused residual (Conv's input 3) and the fused activation (a Unary kind, as WGSL text from
elementwise.UNARY_EXPR) run in the kernels' epilogue.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.ops.base import InferContext
from ...engine.ops.conv import conv_transpose_geometry, resolve_pads, spatial_list
from ..base import Step
from .backend import LOOP_BUDGET, GpuExecution, gpu_kernel
from .elementwise import UNARY_EXPR

MAX_SPATIAL = 3
BLOCK = 4  # output channels and pixels per invocation of conv_transpose.wgsl; depthwise below this multiplier
CONV_BLOCK = 8  # output channels and output pixels per invocation of conv.wgsl
# Output pixels along W per invocation of depthwise.wgsl and pool.wgsl (a multiple of 4): their
# index arithmetic (integer divisions, slow on lavapipe) is paid once per segment.
SEGMENT = 64


def infer_context(step: Step) -> InferContext:
    """The shape-function context of a step, to get resolved geometry from the engine's helpers."""
    return InferContext(step.node, step.attrs, step.input_specs, step.input_values or [])


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def as_3d(values, fill: int) -> list[int]:
    """Per-spatial-axis values padded at the front to 3 axes (D, H, W)."""
    return [fill] * (MAX_SPATIAL - len(values)) + list(values)


def window_reason(step: Step) -> str | None:
    """Why a Conv/Pool-family step cannot run on the GPU (shared with pool.py), else None."""
    x = step.input_specs[0]
    if x.dtype != "float32":
        return f"dtype {x.dtype} not supported on the GPU by this kernel (float32 only)"
    if len(x.shape) - 2 > MAX_SPATIAL:
        return f"{len(x.shape) - 2} spatial axes (the GPU kernels handle 1 to {MAX_SPATIAL})"
    return None


def activation(step: Step) -> tuple[str, str | None]:
    """(WGSL expression of v, alpha, beta; reason it cannot run) for the fused activation."""
    kind = step.attrs.get("activation", "")
    if not kind:
        return "v", None
    expr = UNARY_EXPR.get(kind)
    return (expr, None) if expr is not None else ("v", f"fused activation {kind} has no GPU expression")


def conv_params(invocations: int, x, y, w_spatial, channels: tuple[int, int, int, int], blocks: tuple[int, int],
                strides, dilations, pads, has_bias: bool, step: Step) -> list:
    """The params block shared by the conv kernels (layout in kernels_wgsl/conv/conv.wgsl); blocks
    go to slots 6 and 7 (their meaning is per kernel)."""
    cin, cout, cg, mg = channels
    return [invocations, x[0], cin, cout, cg, mg, *blocks,
            *as_3d(x[2:], 1), 0, *as_3d(y[2:], 1), 0, *as_3d(w_spatial, 1), 0,
            *as_3d(strides, 1), 0, *as_3d(dilations, 1), 0, *as_3d(pads, 0), 0,
            int(has_bias), float(step.attrs["activation_alpha"]), float(step.attrs["activation_beta"])]


def conv_kernel(kernel_w: int, stride_w: int, dilation_w: int) -> str:
    """The blocked conv kernel: where the W stride equals the W dilation, neighbouring W taps share
    loaded input columns (~15% less CPU time on lavapipe for 3x3 stride 1; no gain for 1x1)."""
    return "conv/conv_slide.wgsl" if kernel_w > 1 and stride_w == dilation_w else "conv/conv.wgsl"


class _ConvBase(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return window_reason(step) or activation(step)[1]

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # Nested tap loops around the channel loop; depthwise walks a row segment of taps.
        w = step.input_specs[1].shape
        taps = math.prod(w[2:])
        channels = step.input_specs[0].shape[1] // step.attrs["group"]
        segment = SEGMENT // 4 if channels == 1 else 1
        return segment * (taps * (channels + 2) + 2 * math.prod(w[2:-1]) + 8) + 16

    def bind(self) -> tuple[list[str], bool]:
        """(x, w, bias, y; whether there is a bias): an absent bias binds the weight again, which
        the kernel then never reads."""
        step = self.step
        has_bias = len(step.inputs) > 2 and bool(step.inputs[2])
        bias = step.inputs[2] if has_bias else step.inputs[1]
        return [step.inputs[0], step.inputs[1], bias, step.outputs[0]], has_bias


def known(step: Step, i: int) -> bool:
    """Whether input i is absent or its value is known at resize (a constant)."""
    values = step.input_values or []
    return not (i < len(step.inputs) and step.inputs[i]) or (i < len(values) and values[i] is not None)


def nc4hw4_conv_kind(step: Step) -> str | None:
    """The NC4HW4 kernel that runs this Conv ("depthwise" or "conv"), or None: it stays linear."""
    from .layout import is_feature_map

    x, w = step.input_specs[0], step.input_specs[1].shape
    if not (is_feature_map(x) and known(step, 1) and known(step, 2)):
        return None
    group = step.attrs["group"]
    cg, mg = x.shape[1] // group, w[0] // group
    if cg == 1 and mg == 1:
        return "depthwise"
    # An output slice must read one group's input slices.
    return "conv" if group == 1 or (cg % 4 == 0 and mg % 4 == 0) else None


def pack_conv_weights(w: np.ndarray) -> np.ndarray:
    """(C_out, C_in/group, kH, kW) -> (C_out4, kH, kW, C_in/group padded to slices, 4): a vec4 over
    4 output channels per input channel and tap; padding channels get zero weights."""
    cout, cg, kh, kw = w.shape
    padded = np.zeros((ceil_div(cout, 4) * 4, ceil_div(cg, 4) * 4, kh, kw), np.float32)
    padded[:cout, :cg] = w
    return padded.reshape(-1, 4, padded.shape[1], kh, kw).transpose(0, 3, 4, 2, 1)


def pack_depthwise_weights(w: np.ndarray) -> np.ndarray:
    """(C, 1, kH, kW) -> (C4, kH, kW, 4): a vec4 over a slice's 4 channels per tap."""
    c, _, kh, kw = w.shape
    padded = np.zeros((ceil_div(c, 4) * 4, kh, kw), np.float32)
    padded[:c] = w[:, 0]
    return padded.reshape(-1, 4, kh, kw).transpose(0, 2, 3, 1)


def pack_channels(v: np.ndarray) -> np.ndarray:
    """(C,) -> (C4 * 4,): zero-padded to whole vec4 slices."""
    padded = np.zeros(ceil_div(v.size, 4) * 4, np.float32)
    padded[:v.size] = v.reshape(-1)
    return padded


@gpu_kernel("Conv")
class ConvGpu(_ConvBase):
    path = "direct"  # the NC4HW4 path prepare() took (conv_paths.py); linear convs are direct

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4", "linear") if nc4hw4_conv_kind(step) else ("linear",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return (0, 3)  # the input and the fused residual

    @classmethod
    def linear_inputs(cls, step: Step) -> tuple[int, ...]:
        # An image of at most 4 channels (a network's first conv): its slice costs at most 4 scalar
        # loads instead of 1 vec4 load, where a conversion would cost a whole pass (a dispatch).
        return (0,) if step.input_specs[0].shape[1] <= 4 else ()

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        from .conv_paths import loop_iterations

        kind = nc4hw4_conv_kind(step)
        return super().loop_iterations(step) if kind is None else loop_iterations(step, kind)

    def prepare(self) -> None:
        if self.layout == "nc4hw4":
            from .conv_paths import prepare_nc4hw4

            self.path = prepare_nc4hw4(self, nc4hw4_conv_kind(self.step))
            return
        step = self.step
        x, w, y = step.input_specs[0].shape, step.input_specs[1].shape, step.output_specs[0].shape
        ctx = infer_context(step)
        rank = len(x) - 2
        strides = spatial_list(ctx, "strides", rank, 1)
        dilations = spatial_list(ctx, "dilations", rank, 1)
        begin, _ = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
        group = step.attrs["group"]
        cin, cout = x[1], y[1]
        cg, mg = cin // group, cout // group
        rows = y[0] * math.prod(y[2:-1])
        tensors, has_bias = self.bind()
        # The residual (absent: the input again, never read) and its flag in slot 35.
        residual = len(step.inputs) > 3 and bool(step.inputs[3])
        tensors.append(step.inputs[3] if residual else step.inputs[0])
        if cg == 1 and mg < BLOCK:
            # Depthwise (channel multiplier < 4): a block of channels would mostly idle.
            path, segments = "conv/depthwise.wgsl", ceil_div(y[-1], SEGMENT)
            invocations, blocks = rows * cout * segments, (SEGMENT, segments)
        else:
            path = conv_kernel(w[-1], strides[-1], dilations[-1])
            blocks = (ceil_div(mg, CONV_BLOCK), ceil_div(y[-1], CONV_BLOCK))
            invocations = rows * group * blocks[0] * blocks[1]
        params = conv_params(invocations, x, y, w[2:], (cin, cout, cg, mg), blocks, strides, dilations,
                             begin, has_bias, step) + [int(residual)]
        self.dispatch(path, tensors, params, invocations, text={"ACT": activation(step)[0]})


TRANSPOSE_PIXELS = 8  # output pixels of one residue class per invocation of conv_transpose_nc4hw4.wgsl


def nc4hw4_transpose(step: Step) -> bool:
    """Whether this ConvTranspose can run conv_transpose_nc4hw4.wgsl: a 2-D feature map, weights
    and bias known at resize (repacked once), one group or groups of whole slices."""
    from .layout import is_feature_map

    x, w = step.input_specs[0], step.input_specs[1].shape
    if not (is_feature_map(x) and len(w) == 4 and known(step, 1) and known(step, 2)):
        return False
    group = step.attrs["group"]
    whole_slices = group == 1 or (x.shape[1] // group % 4 == 0 and w[1] % 4 == 0)
    return whole_slices and transpose_iterations(step) <= LOOP_BUDGET


def transpose_iterations(step: Step) -> int:
    """Loop iterations of an invocation of conv_transpose_nc4hw4.wgsl: taps around input slices."""
    _, _, kh, kw = step.input_specs[1].shape
    slices = ceil_div(step.input_specs[0].shape[1] // step.attrs["group"], 4)
    return kh * (kw * (slices + 1) + 1) + 8


def pack_transpose_weights(w: np.ndarray, group: int) -> np.ndarray:
    """(C_in, C_out/group, kH, kW) -> the Conv kernels' packing of the equivalent gather weights
    (C_out, C_in/group, kH, kW): output channel g * mg + m reads input channel g * cg + j with
    w[g * cg + j, m]."""
    cin, mg, kh, kw = w.shape
    cg = cin // group
    gathered = w.reshape(group, cg, mg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(group * mg, cg, kh, kw)
    return pack_conv_weights(gathered)


def up_convolution(step: Step) -> bool:
    """Whether an NC4HW4 ConvTranspose is a 2x2 kernel at strides 2 that writes every output pixel
    from exactly one tap (dilation 1, no pads, the output twice the input, one group): it runs
    conv_transpose2x2_nc4hw4.wgsl, a 1x1 conv and a depth-to-space, with no tap tests."""
    w, x, y = step.input_specs[1].shape, step.input_specs[0].shape, step.output_specs[0].shape
    _, begin, end, strides, dilations, _ = conv_transpose_geometry(infer_context(step))
    return (tuple(w[2:]) == (2, 2) and list(strides) == [2, 2] and list(dilations) == [1, 1]
            and not any(begin) and not any(end) and step.attrs["group"] == 1
            and list(y[2:]) == [2 * x[2], 2 * x[3]])


UP_PIXELS = 4  # input pixels along W per invocation of conv_transpose2x2_nc4hw4.wgsl


@gpu_kernel("ConvTranspose")
class ConvTransposeGpu(_ConvBase):
    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        # Follows its input: NC4HW4 where the producer wrote NC4HW4 (a decoder's convs), so no
        # conversion either side; linear where the input is linear.
        return ("linear", "nc4hw4") if nc4hw4_transpose(step) else ("linear",)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        linear = super().loop_iterations(step)
        return max(linear, transpose_iterations(step)) if nc4hw4_transpose(step) else linear

    def prepare(self) -> None:
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4()
            return
        step = self.step
        x, w, y = step.input_specs[0].shape, step.input_specs[1].shape, step.output_specs[0].shape
        _, begin, _, strides, dilations, _ = conv_transpose_geometry(infer_context(step))
        group = step.attrs["group"]
        cin, cout = x[1], y[1]
        cg, mg = cin // group, w[1]
        cblocks = ceil_div(mg, BLOCK)
        # Output columns are grouped by residue modulo the W stride, 4 per invocation.
        qblocks = ceil_div(ceil_div(y[-1], strides[-1]), BLOCK)
        invocations = y[0] * math.prod(y[2:-1]) * group * cblocks * strides[-1] * qblocks
        tensors, has_bias = self.bind()
        params = conv_params(invocations, x, y, w[2:], (cin, cout, cg, mg), (cblocks, qblocks), strides, dilations,
                             begin, has_bias, step)
        self.dispatch("conv/conv_transpose.wgsl", tensors, params, invocations,
                      text={"ACT": activation(step)[0]})

    def prepare_nc4hw4(self) -> None:
        from .elementwise import feature_map_text
        from .layout import accessor_params

        if up_convolution(self.step):
            self.prepare_up_convolution()
            return
        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        n, cout, oh, ow = y.shape
        group = step.attrs["group"]
        _, begin, _, strides, dilations, _ = conv_transpose_geometry(infer_context(step))
        oc4s = ceil_div(cout, 4)
        slices = (oc4s, ceil_div(x.shape[1], 4)) if group == 1 else (cout // group // 4, x.shape[1] // group // 4)
        qblocks = ceil_div(ceil_div(ow, strides[1]), TRANSPOSE_PIXELS)
        invocations = n * oc4s * oh * strides[1] * qblocks
        weights = self.packed_constant("transpose_weights", step.input_values[1],
                                       lambda w: pack_transpose_weights(w, group))
        has_bias = len(step.inputs) > 2 and bool(step.inputs[2])
        bias = self.packed_constant("bias", step.input_values[2], pack_channels) if has_bias else weights
        params = [invocations, qblocks, *slices, *step.input_specs[1].shape[2:], *strides, *dilations, *begin,
                  int(has_bias), float(step.attrs["activation_alpha"]), float(step.attrs["activation_beta"]), 0,
                  *accessor_params(x), *accessor_params(y)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 3, 21, True)})
        text["ACT"] = activation(step)[0]
        self.dispatch("conv/conv_transpose_nc4hw4.wgsl", [step.inputs[0], weights, bias, step.outputs[0]], params,
                      invocations, text=text)

    def prepare_up_convolution(self) -> None:
        from .conv_paths import bias_tensor, has_bias, weights_binding
        from .elementwise import feature_map_text
        from .layout import accessor_params

        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        n, cout = y.shape[:2]
        oc4s, c4s = ceil_div(cout, 4), ceil_div(x.shape[1], 4)
        blocks = ceil_div(x.shape[3], UP_PIXELS)
        invocations = n * oc4s * x.shape[2] * blocks
        weights, declaration = weights_binding(self, "transpose_weights", step.input_values[1],
                                               lambda w: pack_transpose_weights(w, 1), half=False)
        params = [invocations, blocks, oc4s, c4s] + [0] * 8 + [
            int(has_bias(step)), float(step.attrs["activation_alpha"]), float(step.attrs["activation_beta"]), 0,
            *accessor_params(x), *accessor_params(y)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 3, 21, True)})
        text.update(ACT=activation(step)[0], W_DECL=declaration)
        self.dispatch("conv/conv_transpose2x2_nc4hw4.wgsl",
                      [step.inputs[0], weights, bias_tensor(self, weights), step.outputs[0]], params, invocations,
                      text=text)
