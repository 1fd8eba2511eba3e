"""ConvMaxPool on the GPU: a 2-D conv and the max pooling of its output in one dispatch on NC4HW4
feature maps (kernels_wgsl/conv/conv_maxpool_nc4hw4.wgsl), so the conv output is not read back
(nor written, unless the op keeps it as its second output) and a dispatch (~50-76 us on lavapipe)
is saved.

Each invocation computes up to 4 output slices (balanced: 20 channels run as 3 + 2 slices; one
slice where neighbouring slices read different input slices: groups narrower than 4 slices,
depthwise) x up to 4 pooled pixels of a pooled row, walking the conv rows of their windows: per
row 8 conv outputs along W per slice, in registers, then bias, activation and the max into the
pooled pixels. The pooled pixels per invocation are as many as fit their windows in those 8
columns (pooled_per_invocation), so windows may be at most 8 wide. The kernel's variant (slices,
sliding loads where the W stride equals the W dilation, depthwise weights) is a set of override
constants fixed by the op's weights and attributes: a resize compiles nothing. On real GPUs an
invocation takes one output slice where the map is small (gpu_slices); both counts are compiled.

Weights are repacked once (known at resize) per output slice over the range of input slices its
group reads, zero elsewhere (depthwise: a vec4 per slice and tap); on CPU adapters 32-bit weights
that fit go to a uniform buffer, as for the conv kernels (lavapipe loads uniform vec4s about 3x
faster). Precision fp16-arith (shader-f16): 16-bit products, 32-bit sums, as conv4_nc4hw4.wgsl.

A stem conv (one group, one input slice: an RGB network's first conv, e.g. zoo UNet's 3 -> 8)
whose pool windows tile its output runs kernels_wgsl/conv/conv_stem_maxpool_nc4hw4.wgsl instead
(stem_pool_block): as conv_stem_nc4hw4.wgsl for Conv, its text carries the weights and bias as
literals (conv_paths.stem_text), each invocation computing the conv outputs of STEM_POOLED_COLUMNS
conv columns' worth of pooled pixels (2 pooled pixels of a 2x2 / 2 pool: 2 conv rows x 4 columns)
for all output slices, then their activation, the store of z and the max. On lavapipe a weight
read from a buffer costs ~10x the multiply-add by a literal. Its text depends on the weights and
attributes only (the routing too), so a resize compiles nothing.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ...engine.errors import WgnnError
from ...engine.ops.conv_pool import B, W, conv_context, conv_spec, keeps_conv, pool_window
from ..base import Step
from .backend import GpuExecution, gpu_kernel
from .conv import activation, ceil_div, infer_context, known, pack_channels, pack_depthwise_weights, window_reason

KERNEL = "conv/conv_maxpool_nc4hw4.wgsl"
STEM_KERNEL = "conv/conv_stem_maxpool_nc4hw4.wgsl"
# Conv columns per invocation of the stem kernel, in whole windows (at least one): as many as the
# plain stem kernel's pixels (conv_paths.STEM_PIXELS), the block spanning the windows' rows.
STEM_POOLED_COLUMNS = 4
COLUMNS = 8  # conv outputs along W per row and slice of an invocation (fixed in the kernel)
MOST_POOLED = 4  # pooled pixels per invocation (the kernel's maxima)
QUAD = 4  # output slices per invocation where they share their input slices


def pooled_per_invocation(kernel_w: int, stride_w: int) -> int:
    """Pooled pixels of a row per invocation: as many as fit their windows in COLUMNS conv columns
    (0: the window is wider than the kernel computes)."""
    if kernel_w > COLUMNS:
        return 0
    return min(MOST_POOLED, (COLUMNS - kernel_w) // stride_w + 1)


def slice_ranges(w_shape, cin: int, group: int) -> tuple[int, np.ndarray]:
    """(input slices each output slice reads, first input slice of each output slice): the input
    slices of the groups of the output slice's channels, one count for all (the largest), the
    first one moved down where the range would pass the last input slice (the kernel's lo)."""
    cout, cg = w_shape[0], w_shape[1]
    mg = cout // group
    o4s, c4s = ceil_div(cout, 4), ceil_div(cin, 4)
    first = np.arange(o4s) * 4
    last = np.minimum(first + 3, cout - 1)
    lo = first // mg * cg // 4
    hi = -(-(last // mg + 1) * cg // 4)
    count = int((hi - lo).max())
    return count, np.minimum(lo, c4s - count)


def pack_weights(w: np.ndarray, cin: int, group: int) -> np.ndarray:
    """(C_out, C_in / group, kH, kW) -> (taps, C_out4, count, 4 input lanes, 4 output lanes): per
    output slice o and input slice k of its range, the 4x4 matrix's columns (input lane j), each a
    vec4 over o's channels; zero where an input channel is outside the output channel's group."""
    cout, cg = w.shape[:2]
    taps = math.prod(w.shape[2:])
    count, lo = slice_ranges(w.shape, cin, group)
    o4s = lo.size
    channel = np.arange(o4s * 4)  # output channels, padded to whole slices
    inputs = 4 * np.repeat(lo, 4)[:, None] + np.arange(4 * count)[None, :]  # input channel per (oc, column)
    relative = inputs - (np.minimum(channel, cout - 1) // (cout // group) * cg)[:, None]
    valid = (relative >= 0) & (relative < cg) & (channel < cout)[:, None] & (inputs < cin)
    flat = w.reshape(cout, cg, taps)
    values = flat[np.minimum(channel, cout - 1)[:, None], np.clip(relative, 0, cg - 1)]  # (oc, 4 count, taps)
    values = np.where(valid[..., None], values, 0.0).astype(np.float32)
    # [o][out lane][k][in lane][tap] -> [tap][o][k][in lane][out lane]
    return np.ascontiguousarray(values.reshape(o4s, 4, count, 4, taps).transpose(4, 0, 2, 3, 1))


def slices_per_invocation(w_shape, cin: int, group: int) -> int:
    """Output slices per invocation: up to QUAD, balanced over the invocations of a pixel block
    (20 channels: 3 + 2, not 4 + 1), where each invocation's slices read the same input slices
    (one group always; else one)."""
    _, lo = slice_ranges(w_shape, cin, group)
    slices = ceil_div(lo.size, ceil_div(lo.size, QUAD))
    padded = np.concatenate([lo, np.full(-lo.size % slices, -1)]).reshape(-1, slices)
    shared = all(len(set(row[row >= 0].tolist())) == 1 for row in padded)
    return slices if shared else 1


SLICES_ENV = "WGNN_CONVPOOL_SLICES"


def gpu_slices(ex, balanced: int, single_invocations: int) -> int:
    """Output slices per invocation: `balanced` (slices_per_invocation) on CPU adapters; on real
    GPUs, whose cost model prices one invocation's chain (conv_paths.GPU_WEIGHTS), one slice while
    the `single_invocations` that makes fit in one wave (a small map's few invocations then run a
    quarter of the chain; zoo unet's 8->16 conv + pool at 56x56 took 98 us on an H200 with 4).
    WGNN_CONVPOOL_SLICES=1|balanced forces one (A/B runs)."""
    from .conv_paths import adapter_weights

    forced = os.environ.get(SLICES_ENV, "").strip()
    if forced:
        if forced not in ("1", "balanced"):
            raise WgnnError(f"{SLICES_ENV}={forced}: expected 1 or balanced")
        return 1 if forced == "1" else balanced
    concurrency = adapter_weights(ex.backend.context).concurrency
    return 1 if concurrency and single_invocations <= concurrency else balanced


def geometry(step: Step) -> dict:
    """Resolved conv and pool geometry of a step."""
    from ...engine.ops.conv import resolve_pads, spatial_list

    ctx = infer_context(step)
    conv = conv_spec(ctx)
    cctx = conv_context(ctx)
    x, w = step.input_specs[0].shape, step.input_specs[W].shape
    strides = spatial_list(cctx, "strides", 2, 1)
    dilations = spatial_list(cctx, "dilations", 2, 1)
    begin, _ = resolve_pads(cctx, x[2:], w[2:], strides, dilations)
    kernel, pool_strides, pool_begin, _, _ = pool_window(ctx, conv.shape[2:])
    return {"conv": conv, "strides": strides, "dilations": dilations, "begin": begin, "pool_kernel": kernel,
            "pool_strides": pool_strides, "pool_begin": pool_begin}


def grid_cells(geo: dict, pooled_shape, keeps: bool) -> tuple[int, int]:
    """(rows, columns) of pooled cells the kernels' grid covers: the pooled output's, and with a
    kept conv output the cells of windows tiling all of it (past the pooled ones where the conv
    output is left over: they store z only)."""
    rows, cols = pooled_shape[2:]
    if keeps:
        conv = geo["conv"].shape
        rows = max(rows, ceil_div(conv[2] + geo["pool_begin"][0], geo["pool_strides"][0]))
        cols = max(cols, ceil_div(conv[3] + geo["pool_begin"][1], geo["pool_strides"][1]))
    return rows, cols


def stem_geometry(step: Step, geo: dict) -> dict:
    """The conv's geometry as conv_paths' stem functions take it."""
    return {"kernel": list(step.input_specs[W].shape[2:]), "strides": geo["strides"], "dilations": geo["dilations"],
            "group": step.attrs["group"]}


def stem_pool_block(step: Step) -> tuple[int, int, int] | None:
    """(conv rows, conv columns, pooled pixels) an invocation of the stem kernel computes where it
    runs this op, else None: the conv fits the stem rules (conv_paths.stem_fits, for the block's
    conv outputs) and the pool windows tile the conv output (pool kernel = pool strides; pool pads
    and ceil_mode then just leave the edge windows partial)."""
    from .conv_paths import stem_fits

    kernel, strides = list(step.attrs["pool_kernel_shape"]), list(step.attrs["pool_strides"] or [1, 1])
    if len(kernel) != 2 or kernel != strides:
        return None
    pooled = max(1, STEM_POOLED_COLUMNS // kernel[1])
    rows, cols = kernel[0], pooled * kernel[1]
    if not stem_fits(step, stem_geometry(step, geometry(step)), rows * cols):
        return None
    return rows, cols, pooled


def _has(step: Step, i: int) -> bool:
    return i < len(step.inputs) and bool(step.inputs[i])


@gpu_kernel("ConvMaxPool")
class ConvMaxPoolGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        from .layout import is_feature_map

        reason = window_reason(step) or activation(step)[1]
        if reason:
            return reason
        if not is_feature_map(step.input_specs[0]):
            return "only 2-D convolutions run on the GPU"
        if not (known(step, W) and known(step, B)):
            return "weights and bias must be known at resize (they are repacked)"
        kernel, strides = step.attrs["pool_kernel_shape"], step.attrs["pool_strides"] or [1, 1]
        if not pooled_per_invocation(kernel[1], strides[1]):
            return f"pool window {kernel}: the GPU kernel pools windows at most {COLUMNS} wide"
        if keeps_conv(step.node) and list(kernel) != list(strides):
            return (f"pool window {kernel} with strides {list(strides)}: the GPU kernel keeps the conv output "
                    "only for windows as large as their strides (they tile it)")
        return None

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("nc4hw4",)

    @classmethod
    def linear_inputs(cls, step: Step) -> tuple[int, ...]:
        # An image of at most 4 channels (a network's first conv): as Conv, read a slice at a
        # time through its accessor rather than converted by a dispatch of its own.
        return (0,) if step.input_specs[0].shape[1] <= 4 else ()

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # Pool rows around conv taps around the input slices of the range (the sliding variant: input
        # slices around W taps); the loops over a row's 8 outputs and 4 pooled pixels have constant
        # trip counts (unrolled). The stem kernel has no loops.
        if stem_pool_block(step) is not None:
            return 0
        x, w = step.input_specs[0].shape, step.input_specs[W].shape
        count, _ = slice_ranges(w, x[1], step.attrs["group"])
        kh, kw = w[2:]
        return step.attrs["pool_kernel_shape"][0] * (kh * (max(kw * (count + 1), count * (kw + 1)) + 1) + 1) + 8

    def prepare(self) -> None:
        block = stem_pool_block(self.step)
        if block is not None:
            self._prepare_stem(*block)
            return
        from .elementwise import feature_map_text
        from .layout import accessor_params, arithmetic

        step, attrs = self.step, self.step.attrs
        x, y = step.input_specs[0], step.output_specs[0]
        w_shape = step.input_specs[W].shape
        geo = geometry(step)
        conv = geo["conv"]
        n, cout = y.shape[:2]
        group = attrs["group"]
        count, _ = slice_ranges(w_shape, x.shape[1], group)
        balanced = slices_per_invocation(w_shape, x.shape[1], group)
        # Depthwise (one input and one output channel per group): a vec4 of the slice's channels per
        # tap, multiplied lane by lane, where the general packing would hold 4x4 diagonal matrices.
        depthwise = w_shape[1] == 1 and cout == group
        pooled = pooled_per_invocation(geo["pool_kernel"][1], geo["pool_strides"][1])
        keeps = keeps_conv(step.node)
        rows, cols = grid_cells(geo, y.shape, keeps)
        blocks = ceil_div(cols, pooled)
        slices = gpu_slices(self, balanced, n * ceil_div(cout, 4) * rows * blocks)
        groups = ceil_div(ceil_div(cout, 4), slices)
        invocations = n * groups * rows * blocks
        half = arithmetic(self.backend) == "f16"
        weights, declaration = self._weights(depthwise, half)
        bias_values = step.input_values[B] if _has(step, B) else np.zeros(cout, np.float32)
        # Keyed by the weights (a constant of the model, as the bias is), so both are packed once.
        bias = self.packed_constant("pool_bias", step.input_values[W], lambda _: pack_channels(bias_values))
        params = [invocations, blocks, rows, groups, 1 if depthwise else 4 * count, count, *w_shape[2:],
                  *geo["strides"], *geo["dilations"], *geo["begin"], int(_has(step, B)),
                  float(attrs["activation_alpha"]), float(attrs["activation_beta"]), *geo["pool_kernel"],
                  *geo["pool_strides"], *geo["pool_begin"], pooled, int(keeps), x.shape[1] // group, cout // group,
                  float("-inf"), *accessor_params(x), *accessor_params(y), *accessor_params(conv)]
        names = {"x": (step.inputs[0], 0, 28, False), "y": (step.outputs[0], 3, 33, True)}
        if keeps:
            names["z"] = (step.outputs[1], 4, 38, True)
        text = feature_map_text(self, names, half=half)
        z = step.outputs[1] if keeps else bias
        if not keeps:  # the bias buffer bound again, never written: store_z does nothing
            text["DECL_Z"] = ("@group(0) @binding(4) var<storage, read_write> z_unused: array<vec4<f32>>;\n"
                              f"fn store_z(n: i32, c4: i32, y: i32, x: i32, v: vec4<{text['FLOAT']}>) {{\n}}")
        text.update(ACC="f32", ACT=activation(step)[0], W_DECL=declaration)
        slide = w_shape[3] > 1 and geo["strides"][1] == geo["dilations"][1]
        tensors = [step.inputs[0], weights, bias, step.outputs[0], z]
        self.dispatch(KERNEL, tensors, params, invocations, text=text,
                      constants={"SLICES": slices, "SLIDE": int(slide), "DEPTHWISE": int(depthwise)})
        # A resize may take the other count: a small map's (what fits a wave) or a big map's (balanced).
        for other in {gpu_slices(self, balanced, 0), balanced} - {slices}:
            self.compile(KERNEL, tensors, text=text,
                         constants={"SLICES": other, "SLIDE": int(slide), "DEPTHWISE": int(depthwise)})

    def _prepare_stem(self, rows: int, cols: int, pooled: int) -> None:
        """conv_stem_maxpool_nc4hw4.wgsl: weights and bias in its text; binds x, y and z (if kept)."""
        from .conv_paths import stem_text
        from .elementwise import feature_map_text
        from .layout import accessor_params, arithmetic

        step, attrs = self.step, self.step.attrs
        x, y = step.input_specs[0], step.output_specs[0]
        geo = geometry(step)
        keeps = keeps_conv(step.node)
        cells, columns = grid_cells(geo, y.shape, keeps)
        blocks = ceil_div(columns, pooled)
        invocations = y.shape[0] * cells * blocks
        half = arithmetic(self.backend) == "f16"
        names = {"x": (step.inputs[0], 0, 16, False), "y": (step.outputs[0], 1, 21, True)}
        if keeps:
            names["z"] = (step.outputs[1], 2, 26, True)
        text = feature_map_text(self, names, half=half)
        if not keeps:
            text["DECL_Z"] = f"fn store_z(n: i32, c4: i32, y: i32, x: i32, v: vec4<{text['FLOAT']}>) {{\n}}"
        text["PARAMS_BINDING"] = str(len(names))
        conv_geo = stem_geometry(step, geo)
        kw = geo["pool_kernel"][1]

        def epilogue(o4: int, sums: dict[tuple[int, int], str]) -> list[str]:
            # Per pooled pixel j, the max over its window's conv outputs (columns j kw .. j kw + kw - 1).
            lines = []
            for j in range(pooled):
                window = [(q, c) for q, c in sorted(sums) if c // kw == j]
                lines.append(f"        {{ var m = conv_out(n, {o4}, oy0 + {window[0][0]}, ox0 + {window[0][1]}, "
                             f"{sums[window[0]]});")
                lines += [f"          m = max(m, conv_out(n, {o4}, oy0 + {q}, ox0 + {c}, {sums[q, c]}));"
                          for q, c in window[1:]]
                lines.append(f"          pool_put(n, {o4}, py, px0 + {j}, m); }}")
            return lines

        bias = step.input_values[B] if _has(step, B) else None
        text.update(stem_text(conv_geo, step.input_values[W], bias, half, "f32", rows=rows, cols=cols,
                              epilogue=epilogue))
        text.update(ACT=activation(step)[0], POOLED=str(pooled))
        params = [invocations, blocks, cells, 0, *conv_geo["kernel"], *geo["strides"], *geo["dilations"],
                  *geo["begin"], 0, float(attrs["activation_alpha"]), float(attrs["activation_beta"]), float("-inf"),
                  *accessor_params(x), *accessor_params(y), *accessor_params(geo["conv"]), *geo["pool_kernel"],
                  *geo["pool_begin"]]
        tensors = [step.inputs[0], step.outputs[0]] + ([step.outputs[1]] if keeps else [])
        self.dispatch(STEM_KERNEL, tensors, params, invocations, text=text)

    def _weights(self, depthwise: bool, half: bool) -> tuple[str, str]:
        """The repacked weights and their declaration: a uniform buffer where it pays (CPU adapters,
        32-bit, fits), else a storage buffer of the arithmetic type (16-bit for fp16-arith)."""
        from .conv_paths import weights_binding

        step = self.step
        cin, group = step.input_specs[0].shape[1], step.attrs["group"]

        def pack(w: np.ndarray) -> np.ndarray:
            if depthwise:  # [tap][slice] -> vec4 over the slice's channels
                return np.ascontiguousarray(pack_depthwise_weights(w).transpose(1, 2, 0, 3))
            return pack_weights(w, cin, group)

        return weights_binding(self, "pool_weights", step.input_values[W], pack, half=half)
