"""ConvDwPw on the GPU: a depthwise 3x3 conv and the 1x1 conv reading it in one dispatch on NC4HW4
feature maps (kernels_wgsl/conv/dwpw_nc4hw4.wgsl), so the depthwise result, the widest tensor of
a MobileNet block, is neither written nor read back, and a dispatch (~50-76 us on lavapipe) is
saved.

Each invocation computes every output slice (C_out <= 32) of a block of output pixels, looping
over the input slices: the slice's depthwise results (bias, activation) in registers, then their
products with that slice's pointwise weights added into the output sums. Weights and biases are
repacked once (known at resize); 32-bit weights that fit go to uniform buffers on every adapter
(conv_paths.weights_binding: lavapipe loads uniform vec4s about 3x faster; on real GPUs every
invocation reads the same weight at once, which a constant cache broadcasts). Precision
fp16-arith (shader-f16): 16-bit depthwise arithmetic and pointwise products, 32-bit pointwise
sums, as the 3x3 depthwise and 1x1 GEMM kernels do.

The block (rows x columns: 2x4, 2x2, 1x2 or 1x1; ConvDwPwExpand's kernel shares the choice and the
depthwise code, kernels_wgsl/conv/dwpw_stage.wgsl) is picked per dispatch from the output's size.
An invocation reads every weight once whatever its block, so a block's pixels share those reads:
on big maps 2x4 is fastest (on lavapipe, MobileNetV2 at 224: 1x4 and 2x2 0.7-0.9x its speed; 1x4 is
not kept, as 2x2 did as well or better where a smaller block won). But
a SIMD group runs its idle lanes too: a 4x4 output is two 2x4 invocations, 2 of lavapipe's 8 lanes
busy for the time of 8 pixels, where 1x2 blocks fill the 8 lanes for the time of 2 pixels
(MobileNetV2 at 32, its two 4x4-output ops: 1.2-1.5x faster, the model 1.07x; at 16, 2x2 outputs
in 1x1 blocks: 1.4-1.9x, the model 1.2-1.3x). The rule estimates each block's time with the conv
paths' cost model (conv_paths.CostWeights: on lavapipe a uniform weight load ~1.6 ns, a tap
load ~3.3 ns, a vec4 FMA ~0.23 ns per invocation, ~36 us to start a second worker thread) with
the invocations rounded up to whole workgroups (the kernel's WG, one SIMD group on CPU adapters),
and takes the cheapest, the larger block on a tie. On MobileNetV2 (32, 64, 224) it picks the block
measured fastest or one within the noise of it. WGNN_DWPW_BLOCK=RxC forces a block (A/B runs).
ConvDwPwExpand's kernel can also give each pixel block 2, 4 or 8 invocations (expand groups,
chosen with the block; WGNN_DWPW_GROUPS=G forces G), each repeating the depthwise and project
work and computing its share of the expand slices: on real GPUs, where the cost model prices one
invocation's chain (conv_paths.GPU_WEIGHTS), that shortens the chains of a small map's few
invocations; CPU adapters keep one group.
The first prepare compiles every block's pipeline (a resize compiles nothing): on lavapipe the
three small blocks together compile in about what the 2x4 one does (MobileNetV2's ConvDwPwExpand
ops: 2x4 0.17-0.23 s, 2x2 0.08-0.09 s, 1x2 0.04-0.05 s, 1x1 0.03 s; the model's shader compilation
went from 0.73 s to 1.02 s). lavapipe generates a kernel's machine code at its first dispatch (and
keeps it in Mesa's disk cache), so only the blocks that run pay that, seconds for a 2x4 expand
kernel; the residual is an override constant (RESIDUAL) so that a kernel without one has no
residual loads to compile: with it MobileNetV2's first-ever run at 32 (`wgnn bench
--no-driver-cache`) took 6.7-7.1 s, as before the blocks (6.9-7.2 s), where the blocks alone had
made it 9.0-9.8 s. Where that code is not generated yet (lavapipe, a machine's first run), the
QUICK_BLOCK runs until it is (GpuExecution.quick_first): mobilenetv2's first-ever cold start 2.4-2.9 s
against 8.5-9.2 s.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from ...engine.errors import WgnnError
from ...engine.ops.conv_dwpw import B_DW, B_PW, RESIDUAL, W_DW, W_PW, dw_geometry
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import ceil_div, infer_context, known, pack_channels, pack_depthwise_weights, window_reason
from .conv_paths import CostWeights, KernelCost, estimate_us
from .elementwise import UNARY_EXPR

KERNEL = "conv/dwpw_nc4hw4.wgsl"
# Output pixels (rows, columns) per invocation the kernels are compiled for, largest first.
BLOCKS = ((2, 4), (2, 2), (1, 2), (1, 1))
BLOCK_ENV = "WGNN_DWPW_BLOCK"
# Expand groups of ConvDwPwExpand's kernel (invocations sharing a pixel block, each with its share
# of the expand slices), and the variable that forces a count (A/B runs, tests).
EXPAND_GROUPS = (1, 2, 4, 8)
GROUPS_ENV = "WGNN_DWPW_GROUPS"
# The block run first where the driver has yet to generate a bigger one's code (on lavapipe a 2x4
# expand kernel took 3.3-3.9 s to generate, a 1x2 one about a third of that).
QUICK_BLOCK = (1, 2)
MAX_SLICES = 8  # output slices per invocation (the kernel's sums)
STRIDES = (1, 2)


@dataclass(frozen=True)
class BlockShape:
    """What the cost of a dwpw dispatch depends on: the output's size, the stride, the input,
    project and expand slices (e4s 0: ConvDwPw), slices stored per pixel, a residual, and whether
    the weights are read from a uniform buffer."""

    n: int
    oh: int
    ow: int
    stride: int
    c4s: int
    o4s: int
    e4s: int = 0
    stores: int = 0
    residual: bool = False
    uniform: bool = True


def block_cost(shape: BlockShape, block: tuple[int, int], workgroup: int, groups: int = 1) -> KernelCost:
    """The dispatch's cost in conv_paths' terms (vec4 loads, stores, FMAs per invocation), with the
    invocations rounded up to whole workgroups: idle lanes of a SIMD group cost what busy ones do.
    With expand `groups`, each pixel block's invocations repeat the depthwise and project work and
    share the expand slices."""
    rows, cols = block
    pixels = rows * cols
    invocations = shape.n * ceil_div(shape.oh, rows) * ceil_div(shape.ow, cols) * groups
    taps = shape.c4s * ((rows - 1) * shape.stride + 3) * ((cols - 1) * shape.stride + 3)
    expand = ceil_div(shape.e4s, groups)
    # Per input slice 9 depthwise weights and a 4x4 matrix per project slice; the expand matrices.
    weights = shape.c4s * (9 + 4 * shape.o4s) + 4 * shape.o4s * expand
    loads = taps + shape.c4s + shape.o4s + expand + shape.residual * shape.o4s * pixels  # biases, residual
    stores = shape.stores - shape.e4s + expand
    return KernelCost(ceil_div(invocations, workgroup) * workgroup, loads + (0 if shape.uniform else weights),
                      stores * pixels, weights * pixels, uniform_loads=weights if shape.uniform else 0)


def choose_layout(shape: BlockShape, weights: CostWeights) -> tuple[tuple[int, int], int]:
    """(block, expand groups) of least estimated time (the larger block, then the fewer groups, on a
    tie), with WGNN_DWPW_BLOCK / WGNN_DWPW_GROUPS forcing theirs. Groups only split expand slices
    (ConvDwPwExpand), one slice at least each."""
    block = forced_block()
    blocks = [block] if block else BLOCKS
    groups = forced_groups()
    if not shape.e4s:
        options = [1]
    elif groups:
        options = [groups]
    else:  # CPU adapters: one group (the repeated depthwise and project work would cost their cores)
        options = [g for g in EXPAND_GROUPS if g <= shape.e4s and (g == 1 or weights.concurrency)]
    return min(((b, g) for b in blocks for g in options), key=lambda bg: (
        estimate_us([block_cost(shape, bg[0], weights.workgroup, bg[1])], weights), -bg[0][0] * bg[0][1], bg[1]))


def choose_block(shape: BlockShape, weights: CostWeights) -> tuple[int, int]:
    """The block of choose_layout's choice."""
    return choose_layout(shape, weights)[0]


def forced_groups() -> int | None:
    """WGNN_DWPW_GROUPS=G makes ConvDwPwExpand's kernel run G expand groups (A/B runs, tests)."""
    value = os.environ.get(GROUPS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise WgnnError(f"{GROUPS_ENV}={value}: expected a count of expand groups (1 or more)")
    return int(value)


def forced_block() -> tuple[int, int] | None:
    """WGNN_DWPW_BLOCK=RxC (e.g. 1x2) makes both dwpw kernels run that block (for A/B runs)."""
    value = os.environ.get(BLOCK_ENV, "")
    if not value:
        return None
    try:
        block = tuple(int(v) for v in value.lower().split("x"))
    except ValueError:
        block = ()
    if block not in BLOCKS:
        raise WgnnError(f"{BLOCK_ENV}={value}: the dwpw kernels run blocks {', '.join(f'{r}x{c}' for r, c in BLOCKS)}")
    return block


def block_text(block: tuple[int, int], stride: int) -> dict[str, str]:
    """The text parameters of a block: its size and the per-pixel lists of dwpw_stage.wgsl, written
    out (as loops they compiled 2.5x slower)."""
    rows, cols = block
    taps = [f"tap(n, c4, iy, ix + {c})" for c in range((cols - 1) * stride + 3)]
    row_sums = [f"acc[{c}] + k[0] * x[{c * stride}] + k[1] * x[{c * stride + 1}] + k[2] * x[{c * stride + 2}]"
                for c in range(cols)]
    sums = [f"{half}[{c}]" for half in ("top", "bottom")[:rows] for c in range(cols)]
    products = [f"mac_pixel(acc[{i}], m, d[{i}])" for i in range(rows * cols)]
    return {"ROWS": str(rows), "COLS": str(cols), "STRIDE": str(stride), "ROW": ", ".join(taps),
            "MAC_ROW": ", ".join(row_sums), "SUMS": ", ".join(sums), "MAC": ", ".join(products)}


def dispatch_block(ex: GpuExecution, kernel: str, tensors: list[str], params: list, text: dict[str, str],
                   shape: BlockShape) -> tuple[int, int]:
    """Dispatch `kernel` with the block and expand groups choose_layout picks for `shape` (params
    slots 0, 1, 2 and 12 set here: invocations, column blocks, expand groups, row blocks; the
    RESIDUAL constant from shape.residual), and compile the other blocks' pipelines: a resize may
    pick another block and must compile nothing (the groups are a param). Where the driver has yet
    to generate a big block's code (ex.quick_first), the QUICK_BLOCK runs until it has. Returns the
    block dispatched first."""
    from .backend import WORKGROUP
    from .conv_paths import adapter_weights
    from .tuning import tuned_workgroup

    context = ex.backend.context
    weights = replace(adapter_weights(context), workgroup=tuned_workgroup(context, kernel, WORKGROUP))
    block, groups = choose_layout(shape, weights)
    ex.expand_groups = groups

    def dispatch(chosen: tuple[int, int], preferred: bool = False):
        rows, cols = ceil_div(shape.oh, chosen[0]), ceil_div(shape.ow, chosen[1])
        count = shape.n * rows * cols * groups
        block_params = list(params)
        block_params[0], block_params[1], block_params[2], block_params[12] = count, cols, groups, rows
        return ex.dispatch(kernel, tensors, block_params, count, text={**text, **block_text(chosen, shape.stride)},
                           constants=block_constants(chosen, shape), preferred=preferred)

    if block[0] * block[1] <= QUICK_BLOCK[0] * QUICK_BLOCK[1] or forced_block():  # a forced block runs as forced
        dispatch(block)
    elif ex.quick_first(dispatch(block, preferred=True), lambda: dispatch(QUICK_BLOCK)):
        block = QUICK_BLOCK
    for other in BLOCKS:
        if other != block:
            ex.compile(kernel, tensors, text={**text, **block_text(other, shape.stride)},
                       constants=block_constants(other, shape))
    return block


def block_constants(block: tuple[int, int], shape: BlockShape) -> dict:
    """The kernel's override constants for a block: RESIDUAL, and PROJECT_SLICES for blocks bigger
    than QUICK_BLOCK (kernels specialised for the op's project slices, generated in the background
    on a first-ever run; the quick and small blocks read them from the params, so that one kernel
    serves every op)."""
    specialised = block[0] * block[1] > QUICK_BLOCK[0] * QUICK_BLOCK[1]
    return {"RESIDUAL": int(shape.residual), "PROJECT_SLICES": shape.o4s if specialised else 0}


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
                                      binding=1, var="wd", broadcast=True)
        wp, wp_decl = weights_binding(self, "pw_weights", step.input_values[W_PW], pack_pointwise_weights, half=half,
                                      binding=2, var="wp", broadcast=True)
        # Both stages' biases in one buffer, keyed by the depthwise weights (constants of the model,
        # like the biases, so the pair is packed once per session).
        channels = x.shape[1]
        biases = self.packed_constant("biases", step.input_values[W_DW], lambda _: np.concatenate(
            [pack_channels(value_or_zeros(step, B_DW, channels)), pack_channels(value_or_zeros(step, B_PW, cout))]))
        residual = step.inputs[RESIDUAL] if has_input(step, RESIDUAL) else step.inputs[0]
        r = step.input_specs[RESIDUAL] if has_input(step, RESIDUAL) else x
        attrs = step.attrs
        params = [0, 0, 0, c4s, o4s, 0, *begin,
                  float(attrs["dw_activation_alpha"]), float(attrs["dw_activation_beta"]),
                  float(attrs["activation_alpha"]), float(attrs["activation_beta"]), 0, 0, 0, 0,
                  *accessor_params(x), *accessor_params(y), *accessor_params(r)]
        text = feature_map_text(self, {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 4, 21, True),
                                       "r": (residual, 5, 26, False)}, half=half)
        text.update(ACC="f32", WD_DECL=wd_decl, WP_DECL=wp_decl,
                    DW_ACT=activation_expression(step, "dw_activation")[0],
                    ACT=activation_expression(step, "activation")[0])
        shape = BlockShape(n, oh, ow, strides[0], c4s, o4s, stores=o4s, residual=has_input(step, RESIDUAL),
                           uniform="var<uniform>" in wp_decl)
        self.block = dispatch_block(self, KERNEL, [step.inputs[0], wd, wp, biases, step.outputs[0], residual], params,
                                    text, shape)
