"""Reduce and ArgReduce on the GPU: one invocation per output element, looping over its reduced
elements (kernels_wgsl/reduce/), or a workgroup per output on real GPUs and past llvmpipe's loop
limit (workgroup_per_row: reduce_workgroup.wgsl, arg_reduce_workgroup.wgsl). Adding a kind is one
row in a table here.

Where a workgroup per output would leave few workgroups looping over long rows (a ReduceSum of 2^24
elements to one output took 36.6 ms on an H200, 1.8 GB/s where the adapter copies at 1580 GB/s: one
workgroup did it all), Reduce splits (reduce_plan): pass 1 (reduce_split.wgsl) gives each (output,
chunk) pair a workgroup that reduces the chunk into a partial (the kind's combine, then the tree's
merge), written to a scratch buffer of outputs x chunks; pass 2 (reduce_split_merge.wgsl) merges each
output's partials and applies the kind's final step with the whole row's count. Every kind splits:
log_sum_exp's partials carry their chunk's own shift (its largest finite element) and pass 2
rescales them to the row's. ArgReduce keeps a workgroup per output. On the H200 the split ran that
ReduceSum in 0.254 ms (265 GB/s).
"""
from __future__ import annotations

import math
import os

import numpy as np

from ...engine.errors import WgnnError
from ...engine.geometry import contiguous_strides
from ...engine.ops.reduce import reduced_axes
from ..base import Step
from ..numpy.reduce import _empty_identity
from .backend import LOOP_BUDGET, WORKGROUP, GpuExecution, forced_split_size, gpu_kernel, wgsl_type

MAX_RANK = 6
NEG_INF, POS_INF = "bitcast<f32>(0xff800000u)", "bitcast<f32>(0x7f800000u)"

# kind -> (initial value, combine(acc, v, shift), merge(a, b) of two partial results,
# final(acc, count, shift)) for f32 tensors.
MAX_F32 = "select(a, b, b > a || is_nan_f32(b))"  # a NaN wins and stays, as in numpy's max / min
MIN_F32 = "select(a, b, b < a || is_nan_f32(b))"
FLOAT_KINDS = {
    "sum": ("0.0", "acc + v", "a + b", "acc"),
    "mean": ("0.0", "acc + v", "a + b", "acc / f32(count)"),
    "max": (NEG_INF, "select(acc, v, v > acc || is_nan_f32(v))", MAX_F32, "acc"),
    "min": (POS_INF, "select(acc, v, v < acc || is_nan_f32(v))", MIN_F32, "acc"),
    "prod": ("1.0", "acc * v", "a * b", "acc"),
    "l1": ("0.0", "acc + abs(v)", "a + b", "acc"),
    "l2": ("0.0", "acc + v * v", "a + b", "sqrt(acc)"),
    "sum_square": ("0.0", "acc + v * v", "a + b", "acc"),
    "log_sum": ("0.0", "acc + v", "a + b", "log(acc)"),
    "log_sum_exp": ("0.0", "acc + exp(v - shift)", "a + b", "log(acc) + shift"),
}
# The same for integer (i32) tensors; the mean truncates toward zero like the numpy backend.
INT_KINDS = {
    "sum": ("0", "acc + v", "a + b", "acc"),
    "mean": ("0", "acc + v", "a + b", "div_trunc_i32(acc, count)"),
    "max": ("bitcast<i32>(0x80000000u)", "max(acc, v)", "max(a, b)", "acc"),
    "min": ("bitcast<i32>(0x7fffffffu)", "min(acc, v)", "min(a, b)", "acc"),
    "prod": ("1", "acc * v", "a * b", "acc"),
    "l1": ("0", "acc + abs(v)", "a + b", "acc"),
    "l2": ("0", "acc + v * v", "a + b", "isqrt_i32(acc)"),
    "sum_square": ("0", "acc + v * v", "a + b", "acc"),
}
# Constant 8-trip inner loops are unrolled by drivers and do not count against LOOP_BUDGET.
ROW_KERNEL_ENV = "WGNN_ROW_KERNEL"
ROW_KERNELS = ("invocation", "workgroup")
TREE_ITERATIONS = 8  # loop iterations of one reduce/workgroup_tree.wgsl reduction (strides 128 .. 1)
# The split reduction (reduce_plan). WGNN_REDUCE_SPLIT=<elements per chunk> forces it wherever a
# workgroup per output runs (0: never), for tests and A/B runs.
REDUCE_SPLIT_ENV = "WGNN_REDUCE_SPLIT"
SPLIT_KERNELS = ("reduce/reduce_split.wgsl", "reduce/reduce_split_merge.wgsl")
# From this many outputs on, a workgroup each keeps a GPU busy enough for the split's second
# dispatch and partials not to pay (an estimate, not measured).
SPLIT_MAX_OUTPUTS = 256
# 64 elements per invocation at least: shorter chunks spend more on their tree merge and partial
# than on reading.
SPLIT_MIN_CHUNK = 4096
# Pass 1's workgroups in all, where the rows are long enough: what an H200 holds at once (132 SMs x
# 32 resident workgroups of 64 invocations).
SPLIT_WORKGROUPS = 4096


def workgroup_per_row(ex: GpuExecution, one_invocation_iterations: int, row_length: int) -> bool:
    """Whether a row-wise kernel (Softmax, LayerNorm, RMSNorm, GroupNorm, InstanceNorm, Reduce, ArgReduce)
    gives each row (or output) a workgroup of WORKGROUP invocations rather than one invocation:
    WGNN_ROW_KERNEL=invocation|workgroup if set; else, for rows of at least WORKGROUP elements
    (shorter ones would leave most of a workgroup idle), what wgnn tune measured faster on the
    adapter, or without a measurement a workgroup on real GPUs (a row per invocation leaves most of
    them idle and has each SIMD group read rows far apart) and an invocation on CPU adapters
    (lavapipe: one invocation's loop over a row beats the row spread over a SIMD group, with no
    barriers). Where one invocation's loops (one_invocation_iterations) would pass the driver's
    loop limit, a workgroup whatever the rest says."""
    from .tuning import tuned_variant

    backend = ex.backend
    if backend.loop_budget is not None and one_invocation_iterations > backend.loop_budget:
        return True
    chosen = os.environ.get(ROW_KERNEL_ENV, "").strip()
    if chosen and chosen not in ROW_KERNELS:
        raise WgnnError(f"{ROW_KERNEL_ENV}={chosen!r}: expected one of {', '.join(ROW_KERNELS)}")
    if chosen:
        return chosen == "workgroup"
    preferred = tuned_variant(backend.context, "rows") or default_row_kernel(backend.context)
    return preferred == "workgroup" and row_length >= WORKGROUP


def default_row_kernel(context) -> str:
    """The row kernels where nothing was tuned: "invocation" on CPU adapters, "workgroup" on real GPUs."""
    return "invocation" if context.info.adapter_type == "CPU" else "workgroup"


def workgroup_iterations(length: int, passes: int, reductions: int) -> int:
    """Loop iterations of one invocation of a workgroup-per-row kernel: `passes` strided walks over
    a row of `length` (vec4s or elements) and `reductions` workgroup tree reductions."""
    return passes * (1 + -(-length // WORKGROUP)) + reductions * TREE_ITERATIONS


def reduce_plan(ex: GpuExecution, outputs: int, outer: int, length: int, passes: int) -> tuple[bool, int]:
    """(whether each output gets a workgroup, elements per chunk of a split reduction or 0) for
    `outputs` outputs of `outer` rows of `length` reduced elements each. A workgroup per output as
    workgroup_per_row decides; then a split where WGNN_REDUCE_SPLIT=<elements per chunk> says so
    (0: never), or else on real GPUs for fewer than SPLIT_MAX_OUTPUTS outputs over at least two
    SPLIT_MIN_CHUNK chunks each, cut so that the outputs get SPLIT_WORKGROUPS chunks in all
    (SPLIT_MIN_CHUNK elements at least each). Not on CPU adapters unless forced: lavapipe ran a
    ReduceSum of 2^20 elements to one in 8.5 ms split against 3.4 with a workgroup (2 threads).
    Never where the passes' loops would pass the driver's loop limit."""
    count = outer * length
    if not workgroup_per_row(ex, loop_iterations(outer, length, passes), count):
        return False, 0
    chunk = forced_chunk()
    if chunk is None:
        real_gpu = default_row_kernel(ex.backend.context) == "workgroup"
        few_long = outputs < SPLIT_MAX_OUTPUTS and count >= 2 * SPLIT_MIN_CHUNK
        chunks = min(count // SPLIT_MIN_CHUNK, -(-SPLIT_WORKGROUPS // max(outputs, 1)))
        chunk = -(-count // chunks) if real_gpu and few_long else 0
    if not outputs or not 0 < chunk < count:
        return True, 0
    budget = ex.backend.loop_budget
    if budget is not None and split_iterations(length, chunk, -(-count // chunk), passes) > budget:
        return True, 0
    return True, chunk


def forced_chunk() -> int | None:
    """WGNN_REDUCE_SPLIT's elements per chunk (0: no split), or None where it is not set."""
    return forced_split_size(REDUCE_SPLIT_ENV, "elements per chunk")


def split_iterations(length: int, chunk: int, chunks: int, passes: int) -> int:
    """Loop iterations of one invocation of reduce_split.wgsl or reduce_split_merge.wgsl, the
    larger: per outer row a chunk meets, its while loop's, strided_offset's and reduce_row's
    (up to 7 tail elements), and the 8-element steps of the chunk's share."""
    rows = -(-chunk // length) + 1
    split = passes * (rows * 17 + chunk // (8 * WORKGROUP) + 1 + TREE_ITERATIONS)
    merge = passes * (1 + -(-chunks // WORKGROUP) + TREE_ITERATIONS)
    return max(split, merge)


def reduce_pieces(outer: int, length: int) -> tuple[int, int]:
    """(pieces, elements per piece) the walked dim is cut into for reduce_workgroup.wgsl: enough
    that the outer rows x pieces give every invocation of the workgroup a share."""
    pieces = min(length, max(1, -(-WORKGROUP // max(outer, 1))))
    piece = -(-length // pieces) if length else 0
    return (-(-length // piece) if piece else 1), piece


def workgroup_reduce_iterations(outer: int, length: int, passes: int) -> int:
    """Loop iterations of one invocation of reduce_workgroup.wgsl."""
    pieces, piece = reduce_pieces(outer, length)
    items = -(-outer * pieces // WORKGROUP)
    return passes * (items * (1 + loop_iterations(1, piece)) + 1 + TREE_ITERATIONS)


def merge_dims(shape: tuple[int, ...], reduced: set[int]) -> list[tuple[int, int, bool]]:
    """(size, stride, is_reduced) of the input's dims with size-1 dims dropped and neighbours of the
    same class merged (C-order neighbours are contiguous), so kept and reduced dims alternate."""
    merged: list[tuple[int, int, bool]] = []
    for axis, (size, stride) in enumerate(zip(shape, contiguous_strides(shape))):
        if size == 1:
            continue
        red = axis in reduced
        if merged and merged[-1][2] == red:
            merged[-1] = (merged[-1][0] * size, stride, red)
        else:
            merged.append((size, stride, red))
    return merged


def padded(values: list[int], fill: int) -> list[int]:
    """Right-aligned rank-6 slots followed by two spare slots (the prelude's strided_offset)."""
    return [fill] * (MAX_RANK - len(values)) + values + [0, 0]


def identity_word(kind: str, dtype: str) -> int | None:
    """The 32-bit word an empty reduction writes, or None when it does not fit the GPU's i32."""
    value = _empty_identity(kind, np.dtype(dtype))
    if dtype == "float32":
        return int(np.float32(value).view(np.int32))
    value = int(value)
    return value if -(2 ** 31) <= value < 2 ** 31 else None


def loop_iterations(rows: int, length: int, passes: int = 1) -> int:
    """Loop iterations of one invocation walking `rows` rows of `length` elements 8 at a time."""
    return passes * rows * (1 + length // 8 + length % 8)


def reduce_layout(step: Step) -> tuple[list[tuple[int, int, bool]], tuple[int, int], list[tuple[int, int, bool]]]:
    """(kept dims, (length, stride) of the reduced dim walked directly, the other reduced dims).
    The longest reduced dim is walked: the others cost a decomposition per row."""
    x = step.input_specs[0]
    dims = merge_dims(x.shape, set(reduced_axes(step.attrs, len(x.shape))))
    kept = [d for d in dims if not d[2]]
    reduced = [d for d in dims if d[2]] or [(1, 1, True)]
    longest = max(range(len(reduced)), key=lambda i: reduced[i][0])
    walked = reduced.pop(longest)
    return kept, walked[:2], reduced


@gpu_kernel("Reduce")
class ReduceGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x, kind = step.input_specs[0], step.attrs["kind"]
        table = FLOAT_KINDS if x.dtype == "float32" else INT_KINDS if x.dtype in ("int32", "int64") else {}
        if kind not in table:
            return f"reduce {kind} on {x.dtype} has no GPU kernel"
        kept, (length, _), others = reduce_layout(step)
        if len(kept) > MAX_RANK or len(others) > MAX_RANK:
            return f"more than {MAX_RANK} separate kept or reduced dims"
        if step.output_specs[0].size and x.size == 0 and identity_word(kind, x.dtype) is None:
            return f"the {kind} of nothing on {x.dtype} does not fit the GPU's int32"
        rows = math.prod(d[0] for d in others)
        if workgroup_reduce_iterations(rows, length, 2 if kind == "log_sum_exp" else 1) > LOOP_BUDGET:
            return f"{rows * length} elements per output need a multi-pass reduction (a workgroup per output)"
        return None

    def prepare(self) -> None:
        from .conv_paths import scratch

        step = self.step
        x, out = step.input_specs[0], step.output_specs[0]
        kind = step.attrs["kind"]
        kept, (length, stride), others = reduce_layout(step)
        outer = math.prod(d[0] for d in others)
        count = length * outer
        passes = 2 if kind == "log_sum_exp" else 1
        by_workgroup, chunk = reduce_plan(self, out.size, outer, length, passes)
        chunks = -(-count // chunk) if chunk else 0
        # Slots 5, 6: reduce_workgroup.wgsl's pieces, or the split kernels' chunks.
        pieces, piece = (chunks, chunk) if chunk else reduce_pieces(outer, length) if by_workgroup else (0, 0)
        params = [out.size, count, length, stride, identity_word(kind, x.dtype) or 0, pieces, piece, 0]
        params += padded([d[0] for d in kept], 1) + padded([d[1] for d in kept], 0)
        params += padded([d[0] for d in others], 1) + padded([d[1] for d in others], 0)
        t = wgsl_type(x.dtype)
        init, combine, merge, final = (FLOAT_KINDS if t == "f32" else INT_KINDS)[kind]
        text = {"T": t, "INIT": init, "COMBINE": combine, "MERGE": merge, "FINAL": final,
                "SHIFTED": "true" if kind == "log_sum_exp" else "false"}
        tensors = [step.inputs[0], step.outputs[0]]
        if chunk:
            # log_sum_exp's partials: the chunks' sums, then their shifts
            partials = scratch(self, "reduce partials", -(-out.size * chunks * passes // 4))
            self.dispatch(SPLIT_KERNELS[0], [step.inputs[0], partials], params, out.size * chunks * WORKGROUP,
                          text=text)
            self.dispatch(SPLIT_KERNELS[1], [partials, step.outputs[0]], params, out.size * WORKGROUP, text=text)
            chosen = SPLIT_KERNELS
        elif by_workgroup:
            self.dispatch("reduce/reduce_workgroup.wgsl", tensors, params, out.size * WORKGROUP, text=text)
            chosen = ("reduce/reduce_workgroup.wgsl",)
        else:
            self.dispatch("reduce/reduce.wgsl", tensors, params, out.size, text=text)
            chosen = ("reduce/reduce.wgsl",)
        # A resize may switch kernels and must compile nothing (the same binding kinds throughout);
        # the split pair only where reduce_plan may pick it.
        forced = forced_chunk()
        splits = bool(forced) if forced is not None else default_row_kernel(self.backend.context) == "workgroup"
        for path in ("reduce/reduce.wgsl", "reduce/reduce_workgroup.wgsl", *(SPLIT_KERNELS if splits else ())):
            if path not in chosen:
                self.compile(path, tensors, text=text)


@gpu_kernel("ArgReduce")
class ArgReduceGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        x = step.input_specs[0]
        if x.dtype not in ("float32", "int32", "int64"):
            return f"arg {step.attrs['kind']} on {x.dtype}"
        length = x.shape[step.attrs["axis"] % len(x.shape)]
        if -(-length // WORKGROUP) + TREE_ITERATIONS > LOOP_BUDGET:
            return f"an axis of {length} elements needs a multi-pass reduction (a workgroup per output)"
        return None

    def prepare(self) -> None:
        step = self.step
        x, out = step.input_specs[0], step.output_specs[0]
        axis = step.attrs["axis"] % len(x.shape)
        length = x.shape[axis]
        inner = math.prod(x.shape[axis + 1:])
        t = wgsl_type(x.dtype)
        text = {"T": t, "BETTER": ">" if step.attrs["kind"] == "max" else "<",
                "IS_NAN": "is_nan_f32(v)" if t == "f32" else "false"}
        params = [out.size, length, inner, int(step.attrs["select_last_index"])]
        if workgroup_per_row(self, loop_iterations(1, length), length):
            self.dispatch("reduce/arg_reduce_workgroup.wgsl", [step.inputs[0], step.outputs[0]], params,
                          out.size * WORKGROUP, text=text)
        else:
            self.dispatch("reduce/arg_reduce.wgsl", [step.inputs[0], step.outputs[0]], params, out.size, text=text)
