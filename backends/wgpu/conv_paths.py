"""Conv 2-D on NC4HW4 feature maps: the paths and the cost model that picks one per conv shape.

Paths (all with bias, residual and fused activation in the epilogue):
- "direct": runs every NC4HW4 conv. Kernels: one output slice (4 channels) x 8 pixels along W
  per invocation (conv_nc4hw4.wgsl; conv_slide_nc4hw4.wgsl where the W stride equals the W
  dilation) or, for one group, 4 output slices x 8 pixels (conv4_nc4hw4.wgsl: half the loads per
  FMA, for output channels padded to 16); depthwise convs by 4 x 4 pixel blocks
  (depthwise3x3_nc4hw4.wgsl, 3x3 stride 1; depthwise3x3s2_nc4hw4.wgsl, 3x3 stride 2) or row
  segments (depthwise_nc4hw4.wgsl). Weights are
  repacked once as 4x4 matrices per input slice and tap. For one group and one input slice (an
  RGB network's stem) conv_stem_nc4hw4.wgsl: 4 output pixels x all output slices per invocation,
  taps unrolled with the weights and bias written into its text as literals (stem_text).
- "gemm1x1": 1x1, stride 1, no padding, one group: a GEMM over pixels x channels, 4 output slices
  x 16 pixels per invocation (gemm1x1_nc4hw4.wgsl).
- "winograd2" / "winograd4": 3x3, stride 1, dilation 1, one group: Winograd F(2,3) / F(4,3) in
  three dispatches (conv_winograd.py).
- "tiled": one group, any kernel / strides / dilations / pads: an implicit GEMM (im2col on the
  fly) tiled in workgroup memory for real GPUs, 64 output pixels x 16 output slices per workgroup
  of 64 invocations (conv_tiled_nc4hw4.wgsl). Its barriers make it the slowest path on lavapipe
  (each one switches every invocation of the workgroup), which the cost model's barrier price says.

The cost model (in the spirit of MNN's bestWinogradUnit, which weighs memory traffic over
multiplies) counts for every kernel of a candidate its invocations x (vec4 loads, vec4 stores,
vec4 FMAs) and weighs them with per-adapter costs, plus a cost per dispatch: on lavapipe a vec4
load is a gather costing ~14 FMAs, a dispatch ~35 us, and a kernel's work spreads over at most as
many cores as it has workgroups, each core past the first costing ~36 us to wake
(tools/fit_conv_cost.py measures these). The cheapest candidate (and direct kernel) runs; at a
resize a conv keeps the path it ran before unless another is estimated STICKY times cheaper.
WGNN_CONV_PATH=direct|gemm1x1|winograd|winograd2|winograd4|auto forces a path for testing and
benchmarking where the conv allows it (elsewhere the cost model picks among the paths that can
run; "winograd" lets it pick the unit). The pipelines of every candidate are compiled at prepare,
so a resize that changes a path compiles nothing.

Precision "fp16-arith" (on adapters with shader-f16): the kernels in HALF_SUMS multiply in 16 bits,
with weights repacked to f16 at prepare, and sum in the type given there; the other kernels (and
every epilogue: bias, residual, activation) stay 32-bit.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, replace

import numpy as np

from ...engine.errors import WgnnError
from ..base import Step
from .conv import ceil_div, infer_context, pack_channels, pack_conv_weights, pack_depthwise_weights
from .conv_winograd import SLICE_BLOCK, TILE_BLOCK, pack_quads, prepare_winograd, winograd_geometry

PATH_ENV = "WGNN_CONV_PATH"
# A resize keeps a conv's path (and direct kernel) while its estimate is within this factor of the
# best one's: switching repacks the weights into another buffer, for a gain within the model's error.
STICKY = 1.5
PATH_CHOICES = ("auto", "direct", "gemm1x1", "winograd", "winograd2", "winograd4", "tiled")
# conv_tiled_nc4hw4.wgsl's tile (fixed in its text): output pixels x output slices per workgroup of
# TILED_PIXELS invocations, and input slices per K step.
TILED_PIXELS, TILED_SLICES, TILED_CHUNK = 64, 16, 4
NC4HW4_PIXELS = 8  # output pixels along W per invocation of the direct kernels
# Kernels with a 16-bit arithmetic variant, and the type their sums run in there. The GEMM-like
# kernels sum taps x input channels products (576 for 3x3 64->64): measured on lavapipe against
# float64, 16-bit sums gave 3.5x the RMS error of f32 sums (1.8e-3 vs 5.3e-4 of the output's RMS;
# f16 storage alone: 2.9e-4), so they add each slice's 4 f16 products (one mat4x4 x vec4) into f32
# sums. The 3x3 depthwise sums 9 products: f16 throughout (6e-4 RMS).
HALF_SUMS = {"conv/conv_nc4hw4.wgsl": "f32", "conv/conv4_nc4hw4.wgsl": "f32", "conv/gemm1x1_nc4hw4.wgsl": "f32",
             "conv/conv_stem_nc4hw4.wgsl": "f32",
             "conv/winograd_gemm.wgsl": "f32", "conv/depthwise3x3_nc4hw4.wgsl": "f16",
             "conv/depthwise3x3s2_nc4hw4.wgsl": "f16"}
# Winograd units whose GEMM may multiply in 16 bits. F(4,3)'s output transform (coefficients up to
# 8) magnifies the f16 rounding of V and U: 1.3e-2 max error on 3x3 64->64 (F(2,3): 9e-4).
HALF_WINOGRAD_UNITS = (2,)
F16_MAX = 65504.0  # largest finite f16
# Output pixels (W, H) per invocation of depthwise3x3s2_nc4hw4.wgsl (fixed in its text). Measured on
# lavapipe (MobileNetV2's stride-2 depthwise convs): 4 x 2, 4 x 4 and 4 x 8 alike, 8-wide ~8% slower.
DW_S2_BLOCK = (4, 4)
DW_SEGMENT = 16  # output pixels per invocation of depthwise_nc4hw4.wgsl (4 at a time; 4 to 32 measured alike)
STEM_KERNEL = "conv/conv_stem_nc4hw4.wgsl"
# conv_stem_nc4hw4.wgsl (measured on lavapipe, ResNet's and MobileNetV2's stems at 32 and 224): 4
# output pixels per invocation ran 10-15% faster than 2 (8: alike, 1.5-3x the compile time); groups
# of 8 output slices ~13% faster than 4 (the input is loaded once per group, accumulators spill).
STEM_PIXELS = 4  # output pixels along W per invocation
# What a stem step runs until the driver has the STEM_PIXELS kernel's code (GpuExecution.quick_first):
# a quarter of its unrolled products to generate.
QUICK_STEM_PIXELS = 1
STEM_SLICES = 8  # output slices per group of its accumulators (groups run one after another)
# Input slices it runs. It also won with 2 to 4 (8->8 3x3 at 32x32 1.5x, 16->16 at 56x56 1.6x), but
# its pipeline is compiled per conv (its weights are in the text): 0.05-0.25 s each, for every conv
# that may take it, so only stems (one per model) do.
STEM_INPUT_SLICES = 1
# The most vec4 multiply-adds its text unrolls (taps x input channels x output slices x pixels):
# lavapipe's compile time grows faster than that count (0.07 s at 432, 0.5 s at 2352, 1.8 s at 4704).
STEM_PRODUCTS = 2400


@dataclass(frozen=True)
class CostWeights:
    """Microseconds per dispatch; nanoseconds of one worker per invocation-level operation, with
    `workers` of them sharing the invocations."""

    dispatch_us: float
    invocation_ns: float  # index arithmetic, epilogue set-up
    load_ns: float  # one vec4 load (storage buffer or texture)
    store_ns: float  # one vec4 store
    fma_ns: float  # one vec4 FMA (a 4x4 matrix x vec4 is 4)
    workers: int = 1
    workgroup: int = 64  # invocations per workgroup (tuning.preferred_workgroup): a worker runs whole ones
    uniform_load_ns: float | None = None  # one vec4 weight load from a uniform buffer (None: as load_ns)
    wake_us: float = 0.0  # microseconds per busy worker past the first: an idle worker thread's start
    shared_load_ns: float | None = None  # one vec4 read or write of workgroup memory (None: as load_ns)
    barrier_ns: float = 0.0  # one workgroup barrier, per invocation
    workgroup_memory: bool = True  # whether kernels tiled in workgroup memory are candidates (offers_tiled)
    # Invocations the adapter runs at once (0: a CPU adapter's workers share them instead). Where
    # set, the prices are one invocation's chain of dependent work, and a kernel takes one chain
    # per wave of `concurrency` invocations (estimate_us).
    concurrency: int = 0


# lavapipe / llvmpipe (CPU adapters): `python -m wgnn.tools.fit_conv_cost` (docs/performance.md),
# three runs pooled. The prices are a non-negative least-squares fit (relative errors) of 428
# kernel timings: lavapipe's process CPU time of every conv kernel (direct, gemm1x1, depthwise,
# both Winograd units' three) on 76 conv shapes, weights in uniform and in storage buffers; median
# error 11% (measured / predicted: gemm1x1 1.25, the row-segment and stride-2 depthwise kernels
# 1.2, F(2,3)'s input transform 0.76). dispatch_us and wake_us come from the same runs' wall times
# (wall = dispatch + wake per extra busy worker + work / busy workers): on a quiet machine a
# dispatch costs ~35 us and waking the second worker ~36 us more (on a loaded one both shrink: the
# workers never sleep), so tiny convs run fastest on one workgroup. The invocations spread over
# one worker thread per core. On 52 held-out shapes (the zoo's convs at 32 and 224, others) the
# model picks the fastest path and kernel in 44-46 per run (41-44 with the earlier weights, which
# spread tiny convs over both cores), the misses costing 0.6-1.0% of the fastest options' total:
# near ties, gemm1x1 against conv4 on 1x1 convs, and 16->16 / 32->16 at 112x112, where F(4,3) is
# picked and the direct conv4 runs 1.05-1.2x faster (its transforms grow costlier past the caches
# than their counts say).
CPU_WEIGHTS = CostWeights(dispatch_us=34.6, wake_us=36.3, invocation_ns=2.81, load_ns=3.27, store_ns=8.0,
                          fma_ns=0.23, uniform_load_ns=1.6, barrier_ns=150.0, workgroup_memory=False)
# barrier_ns: lavapipe switches every invocation of a workgroup at a barrier. Fitted by hand to the
# tiled path forced on zoo:resnet at 224 (WGNN_CONV_PATH=tiled wgnn bench --per-op; the other
# prices as above): its 16->16 3x3 convs at 56x56 9.7-10.3 ms (conv4: 1.2-1.4 ms), predicted 9.6;
# 16->32 stride 2 2.8 ms (2.55), 32->32 5.5 (5.1), the 7x7 stem 223 (209). With whole tiles it
# does better than predicted: 64->64 at 56x56 38.9 ms against conv4's 20.3 (`wgnn bench --kernels
# --case "Conv 3x3 64->64 @56"`; predicted 3x). The fit tool leaves the tiled path out: on CPU
# adapters it is a candidate only when forced.
# Real GPUs: a conv of a small network leaves most of the GPU idle, so its time is one
# invocation's chain of dependent loads and multiply-adds, not the work summed over invocations:
# on an NVIDIA H200 (Vulkan, 2026-12-04) ResNet's 16->16 3x3 conv at 56x56 took 43 us as conv4
# (392 invocations x 4 slices x 8 pixels) and 26 us tiled (3136 invocations), and MobileNetV2's
# fused dwpw blocks ran fastest at 1x1 (most invocations, shortest chains; 2x4: 1.5-2.8x slower).
# Prices: a non-negative least-squares fit (relative errors) of 52 per-op GPU times of zoo
# resnet and mobilenetv2 at 224 with every conv path and dwpw block forced (`tools/gpu_check.py`'s
# knob runs; each op's KernelCost per invocation; median error 12%; the literal-weight stem runs
# 3.4x its estimate, still the cheapest). Store's price also carries what the big blocks spill.
# concurrency is an estimate (every timing fitted ran in one wave): past it the chains repeat.
# `python -m wgnn.tools.fit_gpu_cost knobs.json` refits the prices from such runs.
GPU_WEIGHTS = CostWeights(dispatch_us=5.0, invocation_ns=0.0, load_ns=34.2, store_ns=196.0, fma_ns=1.76,
                          shared_load_ns=14.4, barrier_ns=0.0, concurrency=32768)


def adapter_weights(context) -> CostWeights:
    """The cost weights of the adapter's type; the tiled path a candidate where `wgnn tune`
    measured it faster (the "conv" variant "tiled"), not where it measured it slower ("registers"),
    else by the type's rule (real GPUs yes, CPU adapters no)."""
    from .tuning import preferred_workgroup, tuned_variant

    weights = GPU_WEIGHTS
    if context.info.adapter_type == "CPU":
        # lavapipe runs a dispatch on its worker threads, or on its queue thread alone where it has none
        workers = getattr(context, "lavapipe_threads", None)
        workers = max(1, os.cpu_count() or 1) if workers is None else max(1, workers)
        weights = replace(CPU_WEIGHTS, workers=workers, workgroup=preferred_workgroup(context))
    tuned = tuned_variant(context, "conv")
    return weights if tuned is None else replace(weights, workgroup_memory=tuned == "tiled")


def default_conv_variant(context) -> str:
    """The "conv" variant where nothing was tuned: "tiled" where the adapter type's weights offer
    the tiled path (real GPUs), else "registers"."""
    weights = CPU_WEIGHTS if context.info.adapter_type == "CPU" else GPU_WEIGHTS
    return "tiled" if weights.workgroup_memory else "registers"


def measured_path(context) -> str | None:
    """The path wgnn tune's "conv" variants force while it measures them: "tiled", or for
    "registers" the choice without it (None)."""
    from .tuning import trial_variant

    return "tiled" if trial_variant("conv") == "tiled" else None


@dataclass
class KernelCost:
    invocations: int
    loads: float  # per invocation, vec4s (weight loads from a uniform buffer apart)
    stores: float
    fmas: float
    uniform_loads: float = 0.0  # per invocation, vec4 weight loads from a uniform buffer
    shared_loads: float = 0.0  # per invocation, vec4 reads and writes of workgroup memory
    barriers: float = 0.0  # per invocation

    def ns(self, w: CostWeights) -> float:
        uniform_ns = w.load_ns if w.uniform_load_ns is None else w.uniform_load_ns
        shared_ns = w.load_ns if w.shared_load_ns is None else w.shared_load_ns
        return self.invocations * (w.invocation_ns + self.loads * w.load_ns + self.uniform_loads * uniform_ns
                                   + self.stores * w.store_ns + self.fmas * w.fma_ns
                                   + self.shared_loads * shared_ns + self.barriers * w.barrier_ns)


def weight_loads(step: Step, loads: float) -> dict[str, float]:
    """KernelCost keywords for `loads` weight loads per invocation of the direct / 1x1 kernels:
    uniform where packed_weights would put the weights in a uniform buffer (32-bit weights that
    fit; the cost weights say what a uniform load costs on the adapter), else storage loads."""
    from .backend import UNIFORM_ARRAY_BYTES

    uniform = math.prod(step.input_specs[1].shape) * 4 <= UNIFORM_ARRAY_BYTES and forced_weights() != "storage"
    return {"uniform_loads": loads} if uniform else {"loads": loads}


def geometry(step: Step) -> dict:
    """Resolved 2-D conv geometry of a step."""
    from ...engine.ops.conv import resolve_pads, spatial_list

    ctx = infer_context(step)
    x, w = step.input_specs[0].shape, step.input_specs[1].shape
    strides = spatial_list(ctx, "strides", 2, 1)
    dilations = spatial_list(ctx, "dilations", 2, 1)
    begin, end = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
    return {"strides": strides, "dilations": dilations, "begin": begin, "end": end,
            "kernel": list(w[2:]), "group": step.attrs["group"]}


def dw3x3(geo: dict) -> bool:
    """Whether a depthwise conv can run depthwise3x3_nc4hw4.wgsl."""
    return geo["kernel"] == [3, 3] and geo["strides"] == [1, 1] and geo["dilations"] == [1, 1]


def dw3x3s2(geo: dict) -> bool:
    """Whether a depthwise conv can run depthwise3x3s2_nc4hw4.wgsl."""
    return geo["kernel"] == [3, 3] and geo["strides"] == [2, 2] and geo["dilations"] == [1, 1]


def offers_tiled(weights: CostWeights) -> bool:
    """Whether the tiled path is a candidate: where workgroup memory and barriers are cheap (real
    GPUs, or where wgnn tune measured it faster or is measuring it: adapter_weights), or where
    WGNN_CONV_PATH forces it."""
    return weights.workgroup_memory or forced_path() == "tiled"


def candidates(step: Step, kind: str, tiled: bool = False) -> list[str]:
    """The paths that can run this NC4HW4 conv (kind from conv.nc4hw4_conv_kind); the tiled one
    where `tiled` offers it (offers_tiled)."""
    if kind != "conv":
        return ["direct"]
    geo = geometry(step)
    paths = ["direct"]
    unpadded = not any(geo["begin"] + geo["end"])
    if geo["group"] == 1 and geo["kernel"] == [1, 1] and geo["strides"] == [1, 1] and unpadded:
        paths.append("gemm1x1")
    if geo["group"] == 1 and geo["kernel"] == [3, 3] and geo["strides"] == [1, 1] and geo["dilations"] == [1, 1]:
        paths += ["winograd2", "winograd4"]
    if geo["group"] == 1 and tiled:
        paths.append("tiled")
    return paths


def path_costs(step: Step, kind: str, weights: CostWeights) -> dict[str, list[KernelCost]]:
    """Per candidate path, its kernels' costs (one entry per dispatch; the direct path's cheapest
    kernel under `weights`)."""
    x, y = step.input_specs[0].shape, step.output_specs[0].shape
    n, cout, oh, ow = y
    c4in, c4out = ceil_div(x[1], 4), ceil_div(cout, 4)
    residual = int(has_residual(step))
    geo = geometry(step)
    costs: dict[str, list[KernelCost]] = {}
    for path in candidates(step, kind, offers_tiled(weights)):
        if path == "direct":
            variants = direct_variants(step, kind, geo)
            costs[path] = [variants[cheapest(variants, weights)]]
        elif path == "tiled":
            costs[path] = [tiled_cost(step, geo, residual)]
        elif path == "gemm1x1":
            inv = n * ceil_div(cout, 4 * SLICE_BLOCK) * ceil_div(oh * ow, TILE_BLOCK)
            block = TILE_BLOCK * SLICE_BLOCK
            costs[path] = [_with_weights(KernelCost(inv, c4in * TILE_BLOCK + block * residual, block, c4in * block * 4),
                                         step, c4in * 4 * SLICE_BLOCK)]
        else:
            unit = int(path[-1])
            g = winograd_geometry(unit, y)
            a2 = g["alpha"] ** 2
            # Transform arithmetic: about alpha + 2 vec4 adds per 1-D transform of alpha values.
            transform = 2 * g["alpha"] * (g["alpha"] + 2)
            costs[path] = [
                KernelCost(n * c4in * g["th"] * g["tw"], a2, a2, transform),
                KernelCost(a2 * g["quads"] * g["padded"] // TILE_BLOCK, c4in * (TILE_BLOCK + 4 * SLICE_BLOCK),
                           TILE_BLOCK * SLICE_BLOCK, c4in * TILE_BLOCK * SLICE_BLOCK * 4),
                KernelCost(n * c4out * g["th"] * g["tw"], a2 + unit * unit * residual, unit * unit, transform),
            ]
    return costs


def tiled_steps(step: Step, geo: dict) -> int:
    """K steps of conv_tiled_nc4hw4.wgsl: taps x chunks of TILED_CHUNK input slices."""
    return geo["kernel"][0] * geo["kernel"][1] * ceil_div(step.input_specs[0].shape[1], 4 * TILED_CHUNK)


def tiled_cost(step: Step, geo: dict, residual: int) -> KernelCost:
    """Per K step an invocation stages TILED_CHUNK input and TILED_CHUNK weight vec4s (writes and,
    a step ahead, loads), and per input slice reads 4 inputs and 16 weight columns of workgroup
    memory for 64 vec4 FMAs; two barriers per step; 16 outputs (and residuals) at the end."""
    n, cout, oh, ow = step.output_specs[0].shape
    steps = tiled_steps(step, geo)
    groups = ceil_div(n * oh * ow, TILED_PIXELS) * ceil_div(cout, 4 * TILED_SLICES)
    cost = KernelCost(groups * TILED_PIXELS, steps * TILED_CHUNK + 16 * residual, 16, steps * TILED_CHUNK * 64,
                      shared_loads=steps * (2 * TILED_CHUNK + TILED_CHUNK * 20), barriers=2 * steps)
    return _with_weights(cost, step, steps * TILED_CHUNK)


def direct_variants(step: Step, kind: str, geo: dict) -> dict[str, KernelCost]:
    """The kernels that can run the direct path of this conv, with their costs."""
    x, y = step.input_specs[0].shape, step.output_specs[0].shape
    n, cout, oh, ow = y
    c4out = ceil_div(cout, 4)
    residual = int(has_residual(step))
    kh, kw = geo["kernel"]
    if kind == "depthwise":
        # Row segments: per 4 pixels and kernel row, 4 + kw input loads (sliding) and kw weight loads.
        groups = DW_SEGMENT // 4
        loads = groups * (kh * (4 + 2 * kw) + 4 * residual)
        inv = n * c4out * oh * ceil_div(ow, DW_SEGMENT)
        variants = {"conv/depthwise_nc4hw4.wgsl": KernelCost(inv, loads, DW_SEGMENT, groups * kh * kw * 4)}
        if dw3x3(geo):
            inv = n * c4out * ceil_div(oh, 4) * ceil_div(ow, 4)
            variants["conv/depthwise3x3_nc4hw4.wgsl"] = KernelCost(inv, 36 + 9 + 16 * residual, 16, 16 * 9)
        if dw3x3s2(geo):
            # bw x bh output pixels from (2 bw + 1) x (2 bh + 1) input pixels; an invocation stops
            # after the output's last row (`rows`: the mean rows per block).
            bw, bh = DW_S2_BLOCK
            inv = n * c4out * ceil_div(oh, bh) * ceil_div(ow, bw)
            rows = oh / ceil_div(oh, bh)
            variants["conv/depthwise3x3s2_nc4hw4.wgsl"] = KernelCost(
                inv, (2 * bw + 1) * (2 * rows + 1) + 9 + bw * rows * residual, bw * rows, bw * rows * 9)
        return variants
    px, taps = NC4HW4_PIXELS, kh * kw
    cg4 = ceil_div(x[1] // geo["group"], 4)
    slide = kw > 1 and geo["strides"][1] == geo["dilations"][1]
    x_loads = kh * cg4 * (px + kw - 1) if slide else taps * cg4 * px
    name = "conv/conv_slide_nc4hw4.wgsl" if slide else "conv/conv_nc4hw4.wgsl"
    variants = {name: _with_weights(KernelCost(n * c4out * oh * ceil_div(ow, px), x_loads + px * residual, px,
                                               taps * cg4 * px * 4), step, taps * cg4 * 4)}
    if geo["group"] == 1:
        quads = ceil_div(cout, 4 * SLICE_BLOCK)
        block = px * SLICE_BLOCK
        variants["conv/conv4_nc4hw4.wgsl"] = _with_weights(KernelCost(
            n * quads * oh * ceil_div(ow, px), taps * cg4 * px + block * residual, block, taps * cg4 * block * 4),
            step, taps * cg4 * 4 * SLICE_BLOCK)
    if stem_fits(step, geo):
        variants[STEM_KERNEL] = stem_cost(n, cout, oh, ow, x[1], geo, residual)
    return variants


def stem_fits(step: Step, geo: dict, pixels: int = STEM_PIXELS) -> bool:
    """Whether a literal-weight stem kernel runs this conv, `pixels` conv outputs per invocation
    (conv_stem_nc4hw4.wgsl: STEM_PIXELS; conv_stem_maxpool_nc4hw4.wgsl: its pool block): one
    group, at most STEM_INPUT_SLICES input slices, at most STEM_PRODUCTS multiply-adds to unroll,
    finite weights and bias (literals)."""
    cin, cout = step.input_specs[0].shape[1], step.input_specs[1].shape[0]
    products = geo["kernel"][0] * geo["kernel"][1] * cin * ceil_div(cout, 4) * pixels
    if geo["group"] != 1 or ceil_div(cin, 4) > STEM_INPUT_SLICES or products > STEM_PRODUCTS:
        return False
    values = [v for v in (step.input_values or [])[1:3] if v is not None]
    return all(np.isfinite(v).all() for v in values)


def stem_groups(cout: int, pixels: int = STEM_PIXELS) -> list[range]:
    """A stem kernel's output slices in groups whose sums (slices x `pixels` vec4s) stay within
    STEM_SLICES x STEM_PIXELS (8 slices for 4 pixels), balanced (10 slices run as 5 + 5)."""
    c4out = ceil_div(cout, 4)
    count = ceil_div(c4out, max(1, STEM_SLICES * STEM_PIXELS // pixels))
    size = ceil_div(c4out, count)
    return [range(first, min(first + size, c4out)) for first in range(0, c4out, size)]


# Per axis (H, W), the WGSL names a stem kernel's main() gives the input coordinate of its first
# pixel at tap 0, the conv stride and the dilation.
STEM_AXES = (("iy0", "sy", "dy"), ("cx0", "sx", "dx"))


def stem_step(geo: dict, axis: int = 1, pixels: int = STEM_PIXELS) -> int | None:
    """Neighbouring pixels' taps apart along `axis` where its stride is a multiple of its dilation
    (the pixels then share loaded rows / columns), else None."""
    s, d = geo["strides"][axis], geo["dilations"][axis]
    return s // d if s % d == 0 and geo["kernel"][axis] > 1 and pixels > 1 else None


def stem_columns(geo: dict, axis: int = 1, pixels: int = STEM_PIXELS) -> list[tuple[str, list[tuple[int, int]]]]:
    """The input columns (axis 1) or rows (axis 0) that `pixels` neighbouring conv outputs along
    the axis read, each once: (WGSL coordinate expression, the (pixel, tap) pairs that read it)."""
    base, stride, dilation = STEM_AXES[axis]
    kernel, step = geo["kernel"][axis], stem_step(geo, axis, pixels)

    def where(pixel: int, taps: int) -> str:
        return base + (f" + {pixel} * {stride}" if pixel else "") + f" + {taps} * {dilation}"

    if step is None:
        return [(where(p, k), [(p, k)]) for p in range(pixels) for k in range(kernel)]
    return [(where(0, j), [(p, j - p * step) for p in range(pixels) if 0 <= j - p * step < kernel])
            for j in range((pixels - 1) * step + kernel)]


def stem_cost(n: int, cout: int, oh: int, ow: int, cin: int, geo: dict, residual: int) -> KernelCost:
    """Per invocation: the input columns of every tap row, input slice and group of output slices,
    the residual, STEM_PIXELS x output slices stores, and one vec4 FMA per input channel (padding
    lanes' products fold away), tap, output slice and pixel; no weight loads (literals)."""
    c4in, c4out = ceil_div(cin, 4), ceil_div(cout, 4)
    kh, kw = geo["kernel"]
    px = STEM_PIXELS
    loads = len(stem_groups(cout)) * kh * c4in * len(stem_columns(geo)) + px * c4out * residual
    return KernelCost(n * oh * ceil_div(ow, px), loads, px * c4out, kh * kw * cin * c4out * px)


def wgsl_literal(value: float, half: bool) -> str:
    """`value` as a WGSL float literal that converts exactly to its f32 (or, with `half`, f16)
    rounding: the shortest form where it parses back to that value, else the exact binary value."""
    kind = np.float16 if half else np.float32
    rounded = kind(np.clip(value, -F16_MAX, F16_MAX) if half else value)
    if not np.isfinite(rounded):
        raise WgnnError(f"weight {value} is not a finite float: it cannot be written into a kernel")
    short = str(rounded)
    return short if kind(float(short)) == rounded else repr(float(rounded))


def stem_put(o4: int, sums: dict[tuple[int, int], str]) -> list[str]:
    """conv_stem_nc4hw4.wgsl's epilogue of output slice o4: put() of each pixel of its row."""
    return [f"        put(n, {o4}, oy, ox0 + {p}, {value});" for (_, p), value in sorted(sums.items())]


def stem_text(geo: dict, weights: np.ndarray, bias: np.ndarray | None, half: bool, acc: str, *, rows: int = 1,
              cols: int = STEM_PIXELS, epilogue=stem_put) -> dict[str, str]:
    """WEIGHTS and TAPS of a stem kernel for this conv, each invocation computing a block of `rows`
    x `cols` conv outputs (conv_stem_nc4hw4.wgsl: one row of STEM_PIXELS). WEIGHTS: a constant per
    output slice, input channel and tap (a weight matrix's column; all-zero ones left out). TAPS:
    per group of output slices (stem_groups) its accumulators, per input row, input slice and input
    column of the block (stem_columns: each loaded once) those constants times it into the sums of
    the pixels that read it, then per output slice `epilogue(o4, sums)`: its WGSL lines, given
    each pixel's (row, column) sums plus the bias, a 32-bit vec4 expression."""
    cout, cin, kh, kw = weights.shape
    real = "f16" if half else "f32"
    constants, names = [], {}
    for ky, kx, o4, i in np.ndindex(kh, kw, ceil_div(cout, 4), cin):
        values = [weights[o, i, ky, kx] if o < cout else 0.0 for o in range(o4 * 4, o4 * 4 + 4)]
        if any(values):
            names[ky, kx, o4, i] = f"k{ky}_{kx}_{o4}_{i}"
            literals = ", ".join(wgsl_literal(v, half) for v in values)
            constants.append(f"const {names[ky, kx, o4, i]} = vec4<{real}>({literals});")
    pixels = list(itertools.product(range(rows), range(cols)))
    lines = []
    for group in stem_groups(cout, rows * cols):
        lines.append("    {")
        lines += [f"        var a{s}_{q}_{p} = vec4<{acc}>(0.0);" for s in range(len(group)) for q, p in pixels]
        for where_y, taps_y in stem_columns(geo, 0, rows):
            lines.append(f"        {{ let iy = {where_y}; let row = iy >= 0 && iy < p(18u);")
            for c in range(ceil_div(cin, 4)):
                for where_x, taps_x in stem_columns(geo, 1, cols):
                    lines.append(f"            {{ let x = tap(n, {c}, iy, {where_x}, row);")
                    for (q, ky), (p, kx), (s, o4) in itertools.product(taps_y, taps_x, enumerate(group)):
                        terms = [f"{names[ky, kx, o4, i]} * x.{'xyzw'[i % 4]}"
                                 for i in range(c * 4, min(cin, c * 4 + 4)) if (ky, kx, o4, i) in names]
                        if terms:
                            lines.append(f"              a{s}_{q}_{p} += vec4<{acc}>({' + '.join(terms)});")
                    lines.append("            }")
            lines.append("        }")
        for s, o4 in enumerate(group):
            b = "" if bias is None else \
                f" + vec4<f32>({', '.join(wgsl_literal(v, False) for v in pack_channels(bias)[o4 * 4:o4 * 4 + 4])})"
            lines += epilogue(o4, {(q, p): f"vec4<f32>(a{s}_{q}_{p}){b}" for q, p in pixels})
        lines.append("    }")
    return {"WEIGHTS": "\n".join(constants), "TAPS": "\n".join(lines)}


def _with_weights(cost: KernelCost, step: Step, loads: float) -> KernelCost:
    extra = weight_loads(step, loads)
    return replace(cost, loads=cost.loads + extra.get("loads", 0.0), uniform_loads=extra.get("uniform_loads", 0.0))


def cheapest(variants: dict[str, KernelCost], weights: CostWeights) -> str:
    return min(variants, key=lambda name: (estimate_us([variants[name]], weights), name))


def estimate_us(kernels: list[KernelCost], weights: CostWeights) -> float:
    """Dispatch overheads plus each kernel's work spread over the workers its workgroups can keep
    busy (a small conv's few workgroups leave cores idle), each worker past the first costing
    wake_us to start (so a tiny kernel gains nothing from a second one). On real GPUs (a
    concurrency): one invocation's chain per wave of that many invocations."""
    if weights.concurrency:
        return sum(weights.dispatch_us + k.ns(weights) / max(1, k.invocations) / 1e3
                   * ceil_div(k.invocations, weights.concurrency) for k in kernels)
    busy = [max(1, min(weights.workers, ceil_div(k.invocations, weights.workgroup))) for k in kernels]
    return sum(weights.dispatch_us + (b - 1) * weights.wake_us + k.ns(weights) / 1e3 / b
               for k, b in zip(kernels, busy, strict=True))


def choose_path(step: Step, kind: str, weights: CostWeights, forced: str | None = None,
                previous: frozenset[str] = frozenset()) -> tuple[str, dict]:
    """(path, estimated microseconds per candidate): the forced path where it can run, else the
    cheapest candidate ("winograd" forces whichever Winograd unit is cheaper), unless a path this
    conv ran before (`previous`) is within STICKY of it."""
    estimates = {path: estimate_us(k, weights) for path, k in path_costs(step, kind, weights).items()}
    allowed = [p for p in estimates if forced in (None, "auto") or p == forced
               or (forced == "winograd" and p.startswith("winograd"))]
    return keep_or_best({p: estimates[p] for p in allowed or estimates}, previous), estimates


def keep_or_best(estimates: dict[str, float], previous) -> str:
    best = min(estimates, key=lambda p: (estimates[p], p))
    kept = [p for p in estimates if p in previous and estimates[p] <= STICKY * estimates[best]]
    return kept[0] if kept else best


def weights_key(path: str, kernel: str = "") -> str:
    """The packed_constant key of a path's (or direct kernel's) repacked weights."""
    if path == "direct":
        return "weights" + kernel[kernel.index("/"):]
    return "gemm_weights" if path == "gemm1x1" else f"{path}_weights"


def packed_before(ex, key: str) -> bool:
    """Whether this conv's weights were repacked under `key` at an earlier resize."""
    return f"{ex.step.node.name}/{key}" in getattr(ex.backend, "packed", {})


def forced_path() -> str | None:
    value = os.environ.get(PATH_ENV, "").strip().lower()
    if not value:
        return None
    if value not in PATH_CHOICES:
        raise WgnnError(f"{PATH_ENV}={value!r}: expected one of {', '.join(PATH_CHOICES)}")
    return value


# ----------------------------------------------------------------------------- shared pieces
def has_residual(step: Step) -> bool:
    return len(step.inputs) > 3 and bool(step.inputs[3])


def residual_tensor(step: Step) -> str:
    """The residual to bind, or (never read then) the conv input, which every dispatch may read."""
    return step.inputs[3] if has_residual(step) else step.inputs[0]


def has_bias(step: Step) -> bool:
    return len(step.inputs) > 2 and bool(step.inputs[2])


_NO_BIAS = np.zeros(4, np.float32)


def bias_tensor(ex, fallback: str) -> str:
    """The bias as whole vec4 slices; when there is none, `fallback` (never read), or a vec4 of
    zeros where `fallback` is bound as a uniform buffer (the bias binding is a storage one)."""
    if not has_bias(ex.step):
        if fallback not in ex.backend.uniform_tensors and fallback not in getattr(ex, "uniform", ()):
            return fallback
        return ex.packed_constant("no_bias", _NO_BIAS, lambda zeros: zeros)
    return ex.packed_constant("bias", ex.step.input_values[2], pack_channels)


def epilogue_params(step: Step) -> list:
    """Params slots 12..30 shared by the NC4HW4 conv kernels: has bias, alpha, beta, has residual,
    then the accessor dims of x (16..20), y (21..25) and the residual (26..30)."""
    from .layout import accessor_params

    r = step.input_specs[3] if has_residual(step) else step.input_specs[0]
    return [int(has_bias(step)), float(step.attrs["activation_alpha"]), float(step.attrs["activation_beta"]),
            int(has_residual(step)), *accessor_params(step.input_specs[0]), *accessor_params(step.output_specs[0]),
            *accessor_params(r)]


def feature_text(ex, kernel: str = "", **bindings: int) -> dict[str, str]:
    """DECL_X / DECL_Y / DECL_R for the given bindings (x at slot 16, y at 21, r at 26), ACT, and
    the arithmetic types FLOAT and ACC of `kernel` (arithmetic_text)."""
    from .conv import activation
    from .elementwise import feature_map_text

    step = ex.step
    tensors = {"x": (step.inputs[0], 16, False), "y": (step.outputs[0], 21, True),
               "r": (residual_tensor(step), 26, False)}
    text = feature_map_text(ex, {var: (tensors[var][0], binding, tensors[var][1], tensors[var][2])
                                 for var, binding in bindings.items()}, half=half_kernel(ex, kernel))
    return {**text, **arithmetic_text(ex, kernel), "ACT": activation(step)[0]}


def half_kernel(ex, kernel: str, allowed: bool = True) -> bool:
    """Whether `kernel` computes in 16 bits in this session (precision fp16-arith, shader-f16);
    `allowed` False keeps it 32-bit."""
    from .layout import arithmetic

    return allowed and kernel in HALF_SUMS and arithmetic(ex.backend) == "f16"


def arithmetic_text(ex, kernel: str, allowed: bool = True) -> dict[str, str]:
    """FLOAT (the multiply type, and the accessors') and ACC (the sums' type) of a kernel."""
    from .layout import arithmetic_text as types

    half = half_kernel(ex, kernel, allowed)
    return {**types(half), "ACC": HALF_SUMS[kernel] if half else "f32"}


def weight_packer(ex, kernel: str, pack, allowed: bool = True):
    """`pack`, or for a kernel computing in 16 bits `pack` rounded to f16 (half_packer)."""
    return half_packer(pack) if half_kernel(ex, kernel, allowed) else pack


def half_packer(pack):
    """`pack` rounded to f16, its bits handed to the backend as a float32 array of half the length
    (vec4<f16> pairs fill whole 32-bit words)."""

    def pack_half(w: np.ndarray) -> np.ndarray:
        # Clipped: a weight past the f16 range would become inf (none of the zoo's come close).
        half = np.clip(np.asarray(pack(w), np.float32), -F16_MAX, F16_MAX).astype(np.float16)
        return np.ascontiguousarray(half).reshape(-1).view(np.float32)

    return pack_half


_SCRATCH_TOKENS: dict[int, np.ndarray] = {}


def scratch(ex, key: str, vec4s: int, *, shared: bool = False) -> str:
    """A GPU buffer of vec4s for intermediate results of one op (kept per node across resizes of
    the same size). Its contents never outlive the op's dispatches, so with `shared` every step
    asking for `key` at this size gets the same buffer (a run's dispatches are ordered)."""
    token = _SCRATCH_TOKENS.setdefault(vec4s, np.array([vec4s]))
    zeros = lambda t: np.zeros(int(t[0]) * 4, np.float32)  # noqa: E731
    if shared:
        return ex.backend.packed_constant(f"scratch/{key}/{vec4s}", token, zeros)
    return ex.packed_constant(key, token, zeros)


# ----------------------------------------------------------------------------- prepare
def prepare_nc4hw4(ex, kind: str) -> str:
    """Dispatches of an NC4HW4 Conv (kind "conv" or "depthwise"); returns the path taken. The
    pipelines of the other candidate paths are compiled too: a resize may pick another path and
    must compile nothing."""
    step = ex.step
    geo, epilogue = geometry(step), epilogue_params(step)
    previous = frozenset(p for p in candidates(step, kind, tiled=True) if any(
        packed_before(ex, weights_key(p, k)) for k in (direct_variants(step, kind, geo) if p == "direct" else [""])))
    context = ex.backend.context
    path, estimates = choose_path(step, kind, adapter_weights(context), forced_path() or measured_path(context),
                                  previous)
    prepare_path(ex, path, kind, geo, epilogue)
    warmer = _PipelineWarmer(ex)
    for other in estimates:
        if other == "direct":
            for kernel in direct_variants(step, kind, geo):
                prepare_direct(warmer, kind, geo, epilogue, kernel)
        elif other != path:
            prepare_path(warmer, other, kind, geo, epilogue)
    return path


def prepare_path(ex, path: str, kind: str, geo: dict, epilogue: list) -> None:
    if path.startswith("winograd"):
        prepare_winograd(ex, int(path[-1]), geo["begin"], epilogue)
    elif path == "gemm1x1":
        prepare_gemm1x1(ex, epilogue)
    elif path == "tiled":
        prepare_tiled(ex, geo, epilogue)
    else:
        prepare_direct(ex, kind, geo, epilogue)


class _PipelineWarmer:
    """Stands in for an execution in the prepare functions: dispatch() only compiles (or finds) the
    pipeline, and constants and scratch buffers are named, not made."""

    def __init__(self, ex):
        self.step, self.backend = ex.step, ex.backend
        self.uniform: set[str] = set()

    def packed_constant(self, key: str, source, pack, *, uniform: bool = False) -> str:
        name = f"{self.step.node.name}/{key}"
        if uniform:
            self.uniform.add(name)
        return name

    def dispatch(self, path: str, tensors: list[str], params: list, invocations: int, *,
                 text: dict | None = None, preferred: bool = False) -> None:
        from .backend import WORKGROUP
        from .loader import UNIFORM

        written = set(self.step.outputs)
        bindings = tuple([UNIFORM if name in self.uniform else self.backend.binding_kind(name, name in written)
                          for name in tensors] + [UNIFORM])
        self.backend.pipelines.get(path, bindings, params=text, constants={"WG": WORKGROUP}, deferred=True)

    def quick_first(self, preferred, quick) -> bool:
        """Variants a resize may switch to run as compiled: no quicker kernel first."""
        return False


def packed_weights(ex, key: str, kernel: str, pack) -> tuple[str, dict[str, str]]:
    """The step's weights (input 1) packed for `kernel` (weights_binding), and its W_DECL text."""
    name, declaration = weights_binding(ex, key, ex.step.input_values[1], pack, half=half_kernel(ex, kernel))
    return name, {"W_DECL": declaration}


def weights_binding(ex, key: str, source: np.ndarray, pack, *, half: bool, binding: int = 1,
                    var: str = "w", broadcast: bool = False) -> tuple[str, str]:
    """`source` packed by `pack` (rounded to f16 when the kernel multiplies in 16 bits) as the
    execution's packed constant `key`, and the WGSL declaration of binding `binding`, `var`.
    On CPU adapters 32-bit weights that fit go in a uniform buffer: lavapipe loads a uniform vec4
    about 3x faster than a storage one (docs/performance.md); a uniform array's elements are 16
    bytes, so 16-bit weights stay in storage. Real GPUs keep storage buffers for kernels that index
    weights per invocation, which would serialise constant-cache reads there; `broadcast` kernels
    (the dwpw ones: every invocation reads the same weight at once, which a constant cache
    broadcasts) take a uniform buffer there too: on an H200, zoo mobilenetv2 at 224 ran 0.95 ->
    0.76 ms with WGNN_CONV_WEIGHTS=uniform (its dwpw ops' GPU time 0.63 -> 0.51 ms)."""
    from .backend import UNIFORM_ARRAY_BYTES

    placement = forced_weights()
    wanted = placement == "uniform" or (placement == "auto" and (
        broadcast or ex.backend.context.info.adapter_type == "CPU"))
    uniform = (wanted and not half and source.size * 4 <= UNIFORM_ARRAY_BYTES
               and np.asarray(pack(source)).size * 4 <= UNIFORM_ARRAY_BYTES)
    name = ex.packed_constant(key, source, half_packer(pack) if half else pack, uniform=uniform)
    variable = (f"var<uniform> {var}: array<vec4<f32>, {UNIFORM_ARRAY_BYTES // 16}>" if uniform
                else f"var<storage, read_write> {var}: array<vec4<{'f16' if half else 'f32'}>>")
    return name, f"@group(0) @binding({binding}) {variable};"


WEIGHT_PLACEMENTS = ("auto", "storage", "uniform")


def forced_weights() -> str:
    """WGNN_CONV_WEIGHTS (for A/B runs): storage keeps every conv's weights in storage buffers;
    uniform puts 32-bit ones that fit in uniform buffers on any adapter; auto (the default) does
    that on CPU adapters only."""
    value = os.environ.get("WGNN_CONV_WEIGHTS", "").strip() or "auto"
    if value not in WEIGHT_PLACEMENTS:
        raise WgnnError(f"WGNN_CONV_WEIGHTS={value!r}: expected one of {', '.join(WEIGHT_PLACEMENTS)}")
    return value


def prepare_gemm1x1(ex, epilogue: list) -> None:
    step = ex.step
    x, y = step.input_specs[0].shape, step.output_specs[0].shape
    blocks, quads, c4in = ceil_div(y[2] * y[3], TILE_BLOCK), ceil_div(y[1], 4 * SLICE_BLOCK), ceil_div(x[1], 4)
    kernel = "conv/gemm1x1_nc4hw4.wgsl"
    weights, declaration = packed_weights(ex, "gemm_weights", kernel,
                                          lambda w: pack_quads(w.reshape(1, w.shape[0], w.shape[1])))
    count = y[0] * quads * blocks
    params = [count, blocks, quads, c4in] + [0] * 8 + epilogue
    tensors = [step.inputs[0], weights, bias_tensor(ex, weights), step.outputs[0], residual_tensor(step)]
    ex.dispatch(kernel, tensors, params, count, text={**feature_text(ex, kernel, x=0, y=3, r=4), **declaration})


def prepare_tiled(ex, geo: dict, epilogue: list) -> None:
    step = ex.step
    x, y = step.input_specs[0].shape, step.output_specs[0].shape
    tiles, blocks = ceil_div(y[0] * y[2] * y[3], TILED_PIXELS), ceil_div(y[1], 4 * TILED_SLICES)
    kernel = "conv/conv_tiled_nc4hw4.wgsl"
    taps = geo["kernel"][0] * geo["kernel"][1]

    def pack(w: np.ndarray) -> np.ndarray:  # one (C_out, C_in) matrix per tap, in tiles
        return pack_quads(w.reshape(*w.shape[:2], taps).transpose(2, 0, 1), TILED_SLICES, TILED_CHUNK)

    weights, declaration = packed_weights(ex, weights_key("tiled"), kernel, pack)
    params = [tiles * blocks, tiles, ceil_div(x[1], 4 * TILED_CHUNK), ceil_div(x[1], 4),
              *geo["kernel"], *geo["strides"], *geo["dilations"], *geo["begin"]] + epilogue
    tensors = [step.inputs[0], weights, bias_tensor(ex, weights), step.outputs[0], residual_tensor(step)]
    ex.dispatch(kernel, tensors, params, tiles * blocks * TILED_PIXELS,
                text={**feature_text(ex, kernel, x=0, y=3, r=4), **declaration})


def prepare_direct(ex, kind: str, geo: dict, epilogue: list, kernel: str | None = None) -> None:
    """The direct path through `kernel` (a key of direct_variants), by default the cheapest."""
    step = ex.step
    x, y = step.input_specs[0].shape, step.output_specs[0].shape
    n, cout, oh, ow = y
    if kernel is None:
        variants = direct_variants(step, kind, geo)
        weights = adapter_weights(ex.backend.context)
        kernel = cheapest(variants, weights)
        limit = STICKY * estimate_us([variants[kernel]], weights)
        kernel = next((k for k in variants if packed_before(ex, weights_key("direct", k))
                       and estimate_us([variants[k]], weights) <= limit), kernel)
    c4in, c4out = ceil_div(x[1], 4), ceil_div(cout, 4)
    rest = [*geo["kernel"], *geo["strides"], *geo["dilations"], *geo["begin"]]  # slots 4..11
    if kernel == "conv/depthwise3x3_nc4hw4.wgsl":
        blocks = (ceil_div(ow, 4), ceil_div(oh, 4))
        count, pack, head = n * c4out * blocks[0] * blocks[1], pack_depthwise_weights, [*blocks, 0]
    elif kernel == "conv/depthwise3x3s2_nc4hw4.wgsl":
        blocks = (ceil_div(ow, DW_S2_BLOCK[0]), ceil_div(oh, DW_S2_BLOCK[1]))
        count, pack, head = n * c4out * blocks[0] * blocks[1], pack_depthwise_weights, [*blocks, 0]
    elif kernel == "conv/depthwise_nc4hw4.wgsl":
        blocks = ceil_div(ow, DW_SEGMENT)
        count, pack, head = n * c4out * oh * blocks, pack_depthwise_weights, [blocks, DW_SEGMENT, 0]
    elif kernel == STEM_KERNEL:
        prepare_stem(ex, geo, [0, 0, 0, c4in, *rest] + epilogue)
        return
    elif kernel == "conv/conv4_nc4hw4.wgsl":
        blocks, quads = ceil_div(ow, NC4HW4_PIXELS), ceil_div(cout, 4 * SLICE_BLOCK)
        taps = geo["kernel"][0] * geo["kernel"][1]
        count, head = n * quads * oh * blocks, [blocks, quads, c4in]

        def pack(w: np.ndarray) -> np.ndarray:  # one (C_out, C_in) matrix per tap
            return pack_quads(w.reshape(*w.shape[:2], taps).transpose(2, 0, 1))
    else:
        blocks = ceil_div(ow, NC4HW4_PIXELS)
        # One group: every output slice reads all input slices (slice index / slices = group 0).
        group = geo["group"]
        slices = (c4out, c4in) if group == 1 else (cout // group // 4, x[1] // group // 4)
        count, pack, head = n * c4out * oh * blocks, pack_conv_weights, [blocks, *slices]
    weights, declaration = packed_weights(ex, weights_key("direct", kernel), kernel, pack)
    tensors = [step.inputs[0], weights, bias_tensor(ex, weights), step.outputs[0], residual_tensor(step)]
    ex.dispatch(kernel, tensors, [count, *head, *rest] + epilogue, count,
                text={**feature_text(ex, kernel, x=0, y=3, r=4), **declaration})


def prepare_stem(ex, geo: dict, params: list) -> None:
    """conv_stem_nc4hw4.wgsl: its text carries the weights and bias, so it binds x, y, r only (params
    slots 0 and 1, invocations and pixel blocks, set here). Where the driver has yet to generate its
    code (ex.quick_first), a kernel of QUICK_STEM_PIXELS runs until it has."""
    step = ex.step
    n, _, oh, ow = step.output_specs[0].shape
    bias = step.input_values[2] if has_bias(step) else None

    def dispatch(pixels: int, preferred: bool = False):
        text = feature_text(ex, STEM_KERNEL, x=0, y=1, r=2)
        text.update(stem_text(geo, step.input_values[1], bias, text["FLOAT"] == "f16", text["ACC"], cols=pixels))
        text["PIXELS"] = str(pixels)
        blocks = ceil_div(ow, pixels)
        return ex.dispatch(STEM_KERNEL, [step.inputs[0], step.outputs[0], residual_tensor(step)],
                           [n * oh * blocks, blocks, *params[2:]], n * oh * blocks, text=text, preferred=preferred)

    ex.quick_first(dispatch(STEM_PIXELS, preferred=True), lambda: dispatch(QUICK_STEM_PIXELS))


def loop_iterations(step: Step, kind: str) -> int:
    """Upper bound of the loop iterations of an invocation over the paths this conv may take."""
    _, _, kh, kw = step.input_specs[1].shape
    if kind == "depthwise":
        return DW_SEGMENT // 4 * (kh * (kw + 1) + 1) + 8
    slices = ceil_div(step.input_specs[0].shape[1] // step.attrs["group"], 4)
    # The gather kernel loops taps around slices, the sliding one slices around W taps; the GEMMs
    # loop over input slices once; the tiled one over its K steps, 4 input slices each.
    tiled = kh * kw * ceil_div(slices, TILED_CHUNK) * (TILED_CHUNK + 1) + 8 if step.attrs["group"] == 1 else 0
    return max(kh * (max(kw * (slices + 1), slices * (kw + 1)) + 1) + 8, slices + 8, math.prod((kh, kw)), tiled)
