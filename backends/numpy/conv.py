"""Conv family on numpy.

Conv: im2col + one batched matmul (BLAS) across groups, with what a run needs built at resize (the
kernel's prepare hook): a padded input buffer whose zero border is written once (a run copies only
the interior), a strided window view over it, the im2col buffer with a row of ones, the weights
repacked with the bias as their last column, and the matmul's result buffer. A run is then an
interior copy, one strided im2col copy and one matmul into the output, plus the fused residual and
activation in place. On the zoo's tiny models the cost is per numpy call rather than per element,
so fewer calls is what makes this fast.
- 1x1 convolutions with stride 1 and no padding are a matmul on a reshaped view of the input.
- Where it adds few columns, the im2col rows run over a widened output grid (output rows as far
  apart as the padded input's rows): one long row per channel and tap instead of one short row per
  output row, at the price of a few extra matmul columns, dropped afterwards.
- Depthwise convolutions take the same path: groups of one channel, (1, taps) @ (taps, pixels).
- Stride 2 (2-D and 3-D, where use_phases says so: mostly depthwise and few-output convs) keeps
  the padded input as stride phases, one grid per (row, column) parity, filled from the input by
  one deinterleaving copy. Every tap then reads one phase with stride 1, over a widened grid as
  above; the im2col rows are tap-major, so each phase's taps are one copy of long contiguous runs
  (a depthwise tap: one run over all channels) instead of many rows of a few strided elements,
  and the weights are packed in that row order (_ConvPlan._init_phases).
- An im2col buffer over IM2COL_BAND_BYTES holds one band of output rows at a time: each band is
  copied and multiplied while it is still in cache (_ConvPlan._bind_bands; with stride phases
  _bind_phase_bands, whose rows then span a band instead of a whole phase grid).
- Where numpy's BLAS has a faster kernel for small products (backends/numpy/blas.py), convs with
  few outputs per group cut their product to its size: im2col bands (_band_rows), and pointwise
  convs' products in bands of columns.
- A 1-D or 2-D depthwise conv whose im2col would pass DEPTHWISE_CHUNK_BYTES runs a chunk of
  channels at a time instead (_DepthwisePlan): padding, im2col, matmul and epilogue of each chunk
  on buffers that stay in cache, where the whole-tensor plan makes each of them a pass over memory.
- Where numba runs the compiled loops (backends/numpy/compiled.py), a float32 conv that is not
  depthwise runs without im2col as one compiled loop from its padded input (_CompiledDirectPlan:
  compiled_loops.conv_grid over the padded plane's whole rows at stride 1, over its stride phases
  at larger strides where they pay, over the plane as one row for a plain product (1x1, stride 1,
  no padding); else conv_direct): 80-100 GFLOP/s on one core here against 50-60 for im2col +
  BLAS at ResNet's 224x224 shapes. Large convs share the loop among threads (compiled.threads_for).
- The im2col and the widened result are not kept per step but laid out in the backend's shared
  scratch memory (NumpyBackend.scratch), the row of ones rewritten on every run, the views built
  again only when the scratch array changes. The padded input, whose zero border is written once,
  stays the step's own up to RESIDENT_BYTES; a larger one goes to the scratch too, its padding
  zeroed on every run (_memory). ConvTranspose keeps all its buffers up to RESIDENT_BYTES.
ConvTranspose: one batched matmul + col2im (a strided copy or add per kernel tap), with the same
prepared buffers.
Other dtypes (integer, mixed) and empty tensors take the general code (_conv_any,
_conv_transpose_any), which builds everything on each run.

The window helpers are shared with the Pool family.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...engine.ops.base import InferContext
from ...engine.ops.conv import conv_transpose_geometry, resolve_pads, spatial_list
from . import blas, compiled
from .blas import matmul_in_bands, small_product_columns
from .elementwise import apply_unary, phi_tables, unary_into
from .kernel import aligned_zeros, numpy_kernel, thread_rows, work_counter


def infer_context(ex) -> InferContext:
    """The shape-function context of a step, to recompute resolved geometry in a kernel."""
    step = ex.step
    return InferContext(step.node, step.attrs, step.input_specs, step.input_values or [])


def pad_spatial(x: np.ndarray, begin, end, fill=0) -> np.ndarray:
    """x (N, C, *spatial) padded with fill; x itself when nothing is padded."""
    if not any(begin) and not any(end):
        return x
    widths = [(0, 0), (0, 0), *zip(begin, end, strict=True)]
    return np.pad(x, widths, mode="constant", constant_values=fill)


def window_view(x: np.ndarray, out, kernel, strides, dilations) -> np.ndarray:
    """Read-only view (N, C, *out, *kernel) of x (N, C, *spatial): element [n, c, o..., t...] is
    x[n, c, o * stride + t * dilation ...]. The caller makes sure every window fits in x."""
    st = x.strides
    step = [st[2 + i] * s for i, s in enumerate(strides)]
    tap = [st[2 + i] * d for i, d in enumerate(dilations)]
    return as_strided(x, (*x.shape[:2], *out, *kernel), (*st[:2], *step, *tap), writeable=False)


def finish(ex, y: np.ndarray, bias: np.ndarray | None, residual: np.ndarray | None = None) -> np.ndarray:
    """Bias (per output channel, axis 1), the fused residual (Conv's input 3) and the fused
    activation, in place where possible."""
    if bias is not None:
        y += bias.reshape((-1,) + (1,) * (y.ndim - 2)).astype(y.dtype, copy=False)
    if residual is not None:
        y += residual
    kind = ex.attrs["activation"]
    if kind:
        with np.errstate(all="ignore"):
            y = apply_unary(kind, y, ex.attrs["activation_alpha"], ex.attrs["activation_beta"])
    return y


WIDEN = 1.5  # widen the output grid when it adds at most this factor of columns
# A Conv step keeps its padded input between runs up to this size (a ConvTranspose all its
# buffers); larger ones are laid out on every run in the backend's scratch memory, shared by all
# steps, so a big model holds one such buffer at a time rather than one per convolution.
RESIDENT_BYTES = 1 << 20
# An im2col buffer larger than this is filled and multiplied in bands of output rows, each band's
# copy still in cache when its matmul reads it (this machine's EPYC: 1 MiB L2 per core, 32 MiB
# L3). Whole models at 224x224 against one whole buffer, in-process A/B over 3 x 60 rounds,
# before the phased convs had bands: 2 MiB bands x0.81-0.84 (mobilenetv2) and x0.53-0.55 (unet),
# 1 MiB about the same, 4 MiB x0.86-0.88 and x0.61-0.64, 8 MiB x0.91-0.95 and x0.88-0.94; resnet
# (its phased 7x7 stem is half its time) within 2%. With phased bands too: mobilenetv2 x0.76-0.80,
# resnet x0.73-0.74, unet x0.55-0.56.
IM2COL_BAND_BYTES = 2 << 20


def _band_rows(out_rows: int, row_columns: int, row_bytes: int, mg: int, k: int, dtype: np.dtype) -> int:
    """Output rows per im2col band: all of them while the im2col fits IM2COL_BAND_BYTES, else as
    many as fit; fewer where numpy's BLAS runs the (mg x k) @ (k x columns) products faster in
    bands of columns (blas.small_product_columns: with 8 or 16 outputs 2-3x the GFLOP/s,
    docs/performance.md)."""
    band = out_rows if row_bytes * out_rows <= IM2COL_BAND_BYTES else max(1, IM2COL_BAND_BYTES // row_bytes)
    rows = small_product_columns(mg, k, out_rows * row_columns, dtype) // row_columns
    if rows * row_columns >= blas.SMALL_PRODUCT_COLUMNS:
        band = min(band, rows)
    return band


PHASES = True  # False: no stride phases (the plain strided im2col), for A/B measurements
FOLD = True  # False: fill the phases one by one, for A/B measurements


def use_phases(n: int, c: int, group: int, mg: int, kernel, strides, dilations, sizes, out) -> bool:
    """Whether a strided Conv's im2col goes through stride phases (_ConvPlan._init_phases): they
    trade the plain im2col's short strided rows (n * c * taps * output rows of them) for a slower
    deinterleaving fill, a few more numpy calls (~1 us each) and a few more matmul columns, so
    they pay where those rows are many and the matmul is light. Measured per call (A/B,
    OPENBLAS_NUM_THREADS=1, fused Relu, /tmp/phases/sweep*.py), phases / plain:
    - depthwise 3x3 stride 2: 0.71-0.82 from 32 channels at 16x16 on (96 x 16x16 0.75, 144 x 8x8
      0.71, 256 x 32x32 0.78), 0.93-0.96 at 1000-1200 rows, 1.08-1.20 below; 5x5 0.65-0.80;
      dilation 2 0.55; stride (2, 1) 0.71; 3-D 0.57;
    - regular convs with at most 16 outputs per group: 0.86-0.94 (3x3, 1100-37000 rows), 0.55-0.84
      (5x5 and 7x7, 1200+ rows; 7x7 3 -> 16 at 32x32: 0.83), 1.04-1.41 under 1000 rows (3 -> 16
      3x3 at 16x16 to 32x32: 1.19-1.33); with 32 outputs per group 0.93-1.06, 64: 0.98;
    - 1x1 stride 2 (plain im2col rows of whole output rows): 0.93-1.04;
    - with an odd input size the fill takes one copy per phase, not one in all: 1.19 at 1152 rows
      (16 x 15x15), 0.73 at 7776 (96 x 17x17);
    - 1-D (the plain rows are long already): 0.83-1.14; stride 3 (3x3 pad 1, 9 fills): 1.23;
      stride 4 (4x4 patches: 16 phases of one tap each): 1.75.
    So: 2-D and 3-D, strides 1 and 2, at most 16 outputs per group, and at least 500 plain rows per
    fill copy plus 500 (1000 with one folded fill copy, 2500 with four, one per phase)."""
    if not PHASES or len(out) < 2 or max(strides) != 2 or mg > 16:
        return False
    used = sum(all(_phase_taps(kernel, dilations, strides, phase))
               for phase in itertools.product(*(range(s) for s in strides)))  # phases some tap reads
    fold = used == math.prod(strides) and all(size % s == 0 for size, s in zip(sizes, strides))
    rows = n * c * math.prod(kernel) * math.prod(out[:-1])
    return rows >= 500 * (1 + (1 if fold else used))


def _phase_taps(kernel, dilations, strides, phase) -> list[list[int]]:
    """Per spatial axis, the taps that read stride phase `phase` (tap k reads phase k * d % s)."""
    return [[k for k in range(size) if k * d % s == r]
            for size, d, s, r in zip(kernel, dilations, strides, phase, strict=True)]


def _phase_fill(phase, begin, strides, sizes) -> tuple[tuple, tuple] | None:
    """Where the input elements landing in stride phase `phase` go: (the phase grid's cells,
    the input's elements), per spatial axis slices (every s-th input element from the first one
    landing there); None where only padding lands there."""
    first = [(r - b) % s for r, b, s in zip(phase, begin, strides, strict=True)]
    start = [(f + b) // s for f, b, s in zip(first, begin, strides, strict=True)]
    counts = [len(range(f, size, s)) for f, size, s in zip(first, sizes, strides, strict=True)]
    if not all(counts):
        return None
    return (tuple(slice(j, j + k) for j, k in zip(start, counts, strict=True)),
            tuple(slice(f, None, s) for f, s in zip(first, strides, strict=True)))


def _bands(rows: int, band: int) -> list[tuple[int, int]]:
    """[first, end) of each band of `band` output rows (the last one shorter)."""
    return [(first, min(first + band, rows)) for first in range(0, rows, band)]


def _reshaped_view(a: np.ndarray, shape) -> np.ndarray:
    """a reshaped without a copy (numpy's reshape would copy silently where a view cannot be had)."""
    view = a.view()
    view.shape = shape
    return view


def _conv_geometry(ex) -> tuple[list[int], list[int], list[int], list[int]]:
    """(strides, dilations, pads_begin, pads_end) of a Conv step."""
    ctx = infer_context(ex)
    x, w = ctx.shape(0), ctx.shape(1)
    rank = len(x) - 2
    strides = spatial_list(ctx, "strides", rank, 1)
    dilations = spatial_list(ctx, "dilations", rank, 1)
    begin, end = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
    return strides, dilations, begin, end


# Results of at least this many elements take the compiled Relu / Clip: below it the gain is a
# microsecond a call (96 x 8 x 8: 2.0 -> 1.1 us), not worth starting numba for (about 0.3 s in a
# process's first run), unless another step has started it already.
COMPILED_EPILOGUE_SIZE = 65536


def epilogue(kind: str, alpha: float, beta: float, dtype: np.dtype, size: int = 0):
    """fn(src, out): the fused activation of src written to out (src may be out). Relu and Clip,
    the ones the converter fuses most, are one ndarray.clip call: its two-sided loop is several
    times faster than np.maximum on large arrays (numpy 2.x), and it propagates NaN as Relu does;
    where the compiled loops run, in place on a contiguous result of `size` COMPILED_EPILOGUE_SIZE
    or more elements, or of any size once the compiled loops are started, they are
    compiled_loops.activate."""
    if kind in ("relu", "clip"):
        low, high = (0.0, math.inf) if kind == "relu" else (alpha, beta)
        low, high = dtype.type(low), dtype.type(high)
        if ((size >= COMPILED_EPILOGUE_SIZE or compiled.started()) and compiled.enabled()
                and dtype in (np.float32, np.float64)):
            # In place on a contiguous result, the compiled loop takes x0.45-0.6 of clip's time.
            activate, code = compiled.loops().activate, compiled.ACTIVATIONS[kind]

            def compiled_epilogue(src, out):
                if src is out and out.flags.c_contiguous:
                    activate(out.reshape(-1), code, low, high)
                else:
                    src.clip(low, high, out=out)
            return compiled_epilogue
        return lambda src, out: src.clip(low, high, out=out)
    if kind == "gelu" and dtype == np.float32 and compiled.enabled():
        # compiled_loops.gelu_table called straight: elementwise._gelu's compiled path, the same
        # floats, without its checks on every call (x0.5 of a small MatMul + GELU step's time)
        gelu, tables = compiled.loops().gelu_table, phi_tables()

        def compiled_gelu(src, out):
            if src.flags.c_contiguous and out.flags.c_contiguous and src.shape == out.shape:
                gelu(src.reshape(-1), out.reshape(-1), *tables)
            else:
                unary_into(kind, src, alpha, beta, out)
        return compiled_gelu
    if kind:
        return lambda src, out: unary_into(kind, src, alpha, beta, out)
    return None


def _fits(step) -> bool:
    """The prepared paths take floating point steps with one dtype for input, weights, bias and
    output, and nothing empty; the rest run the general code."""
    specs = [s for s in step.input_specs[:3] if s is not None]
    dtype = np.dtype(specs[0].dtype)
    return (dtype.kind == "f" and all(np.dtype(s.dtype) == dtype for s in specs)
            and np.dtype(step.output_specs[0].dtype) == dtype
            and all(math.prod(s.shape) for s in (*specs[:2], step.output_specs[0])))


def _memory(ex, plan, *, keep_first: bool = False) -> np.ndarray | None:
    """Resident plans: their own zeroed memory, now. Shared ones reserve the backend's scratch
    and get it from _bind_shared on every run. keep_first: the first buffer (a conv's padded
    input) stays the plan's own, zeroed once, up to RESIDENT_BYTES, and the rest (im2col, result:
    no border to keep) always goes to the shared scratch. A run then zeroes nothing, and the
    steps' buffers share cache lines: zoo mobilenetv2 at 32x32 x0.69-0.77 of its time alone."""
    item, first = plan.dtype.itemsize, plan.sizes[0]
    plan.first = None  # the padded input's own memory, where it is kept apart from the scratch
    if keep_first and first * item <= RESIDENT_BYTES:
        plan.first = aligned_zeros(first, plan.dtype)
        plan.nbytes = sum(plan.sizes[1:]) * item
        plan.shared = plan.nbytes > 0
    else:
        plan.nbytes = sum(plan.sizes) * item
        plan.shared = plan.nbytes > RESIDENT_BYTES
    if plan.shared:
        ex.backend.reserve_scratch(plan.nbytes)
        return None
    return aligned_zeros(plan.nbytes // item, plan.dtype)


def _bind_shared(ex, plan) -> None:
    """Zero the plan's first buffer where it is in the shared scratch (other steps wrote there)
    and lay its buffers out, unless they already are: the views stay valid while the scratch
    array does (building them costs microseconds per view); then only the row of ones is
    rewritten."""
    memory = ex.backend.scratch(plan.nbytes).view(plan.dtype)
    if getattr(plan, "first", None) is None:
        memory[:plan.sizes[0]].fill(0)
    if memory.base is not getattr(plan, "scratch_base", None):
        plan.bind(memory)
        plan.scratch_base = memory.base
    elif getattr(plan, "ones", None) is not None:
        plan.ones.fill(1)  # the im2col's row of ones (the bias column's input)


class _ConvPlan:
    """What a Conv step reuses on every run (built at resize, see the module docstring)."""

    def __init__(self, ex, strides, dilations, begin, end):
        step = ex.step
        x_shape, w_shape = step.input_specs[0].shape, step.input_specs[1].shape
        out = step.output_specs[0].shape[2:]
        self.dtype = dtype = np.dtype(step.input_specs[0].dtype)
        n, c = x_shape[:2]
        m, kernel = w_shape[0], tuple(w_shape[2:])
        group = ex.attrs["group"]
        cg, mg, taps = c // group, m // group, math.prod(kernel)
        has_bias = len(step.input_specs) > 2 and step.input_specs[2] is not None
        values = list(step.input_values or [])
        values += [None] * (3 - len(values))
        self.kind = epilogue(ex.attrs["activation"], ex.attrs["activation_alpha"], ex.attrs["activation_beta"],
                              dtype, math.prod(step.output_specs[0].shape))
        self.pointwise = all(k == 1 for k in kernel) and not any(s != 1 for s in strides) \
            and not any(begin) and not any(end)
        # A plain matmul of the whole output where there is one (batch, group) pair: numpy's
        # batched matmul costs a few microseconds more per call than a 2-D one.
        single = self.single = n * group == 1
        self.group, self.mg, self.rows = group, mg, cg * taps
        self.valid = self.ones = None
        self.bands = ()  # bands of output rows of the im2col (_bind_bands, _bind_phase_bands)
        self.order = None  # the im2col rows' tap order where it is not the weights' (phases)
        padded = [s + b + e for s, b, e in zip(x_shape[2:], begin, end, strict=True)]
        self.phased = not self.pointwise and use_phases(n, c, group, mg, kernel, strides, dilations, x_shape[2:],
                                                        out)
        if self.pointwise:
            pixels = math.prod(out)
            self.x_shape = self.taps_shape = (cg, pixels) if single else (n, group, cg, pixels)
            self.y_shape = (mg, pixels) if single else (n, group, mg, pixels)
            self.weights_shape = (mg, cg) if single else (group, mg, cg)
            # The bias as a matmul column costs a copy of the input (to append the row of ones);
            # adding it afterwards costs a pass over the output: whichever is smaller.
            self.bias = has_bias and mg > cg
            self.bias_shape = (-1,) + (1,) * len(out)
            self.cols_shape = (n, group, cg + 1, pixels)
            self.sizes = (0, math.prod(self.cols_shape) if self.bias else 0, 0)
            # Products cut into bands of columns where the BLAS's small-product kernel pays.
            band = small_product_columns(mg, cg + self.bias, pixels, dtype)
            self.column_bands = [slice(first, end) for first, end in _bands(pixels, band)] if band < pixels else []
        elif self.phased:
            self.bias = has_bias
            self._init_phases(x_shape, kernel, strides, dilations, begin, padded, out)
        else:
            rank = len(out)
            plane_strides = [math.prod(padded[i + 1:]) for i in range(rank)]  # elements
            pixels = list(out)
            pixel_strides = [s * p for s, p in zip(strides, plane_strides, strict=True)]
            if rank >= 2 and (strides[-2] * padded[-1]) % strides[-1] == 0:
                # Widened grid: output rows V = strides[-2] * padded_width / strides[-1] apart, so
                # that (row, column) fold into one axis read with stride strides[-1].
                width = strides[-2] * padded[-1] // strides[-1]
                if out[-1] < width <= WIDEN * out[-1]:
                    pixels = [*out[:-2], out[-2] * width]
                    pixel_strides = [*pixel_strides[:-2], strides[-1]]
                    self.wide_shape = (n, m, *out[:-1], width)
                    self.crop = (Ellipsis, slice(0, out[-1]))
                    self.valid = out[-1]
            plane = math.prod(padded)
            tap_strides = [d * p for d, p in zip(dilations, plane_strides, strict=True)]
            # The widened grid's extra columns may read past the last row: into zeros, dropped anyway.
            last = ((n * c - 1) * plane + sum((p - 1) * s for p, s in zip(pixels, pixel_strides))
                    + sum((k - 1) * s for k, s in zip(kernel, tap_strides)))
            self.padded_shape = (n, c, *padded)
            self.inner = (slice(None), slice(None), *(slice(b, b + s) for b, s in zip(begin, x_shape[2:], strict=True)))
            self.window_shape = (n, group, cg, *kernel, *pixels)
            self.window_strides = [dtype.itemsize * s for s in (c * plane, cg * plane, plane, *tap_strides,
                                                                *pixel_strides)]
            columns = math.prod(pixels)
            self.bias = has_bias  # the bias rides in the matmul as a last weight column
            self.y_shape = (mg, columns) if single else (n, group, mg, columns)
            # The im2col buffer holds one band of output rows (pixels[0]); all of them unless too big.
            row_columns = math.prod(pixels[1:])
            row_bytes = n * group * (self.rows + has_bias) * row_columns * dtype.itemsize
            band = _band_rows(pixels[0], row_columns, row_bytes, mg, self.rows + has_bias, dtype)
            self.bands = _bands(pixels[0], band)
            self.row_columns, self.pixel_axis = row_columns, 3 + len(kernel)
            self.taps_shape = (n, group, cg, *kernel, band, *pixels[1:])
            self.cols_shape = (n, group, self.rows + has_bias, band * row_columns)
            self.sizes = (max(n * c * plane, last + 1), math.prod(self.cols_shape),
                          math.prod(self.y_shape) if self.valid is not None else 0)
        memory = _memory(ex, self, keep_first=True)
        if memory is not None:
            self.bind(memory)
        self.weights = None
        if values[1] is not None and (not self.bias or values[2] is not None):
            self.weights = (self.pack(values[1], values[2], dtype) if self.bias or not self.pointwise
                            else np.ascontiguousarray(values[1].reshape(self.weights_shape), dtype))

    def _init_phases(self, x_shape, kernel, strides, dilations, begin, padded, out) -> None:
        """Stride phases: the padded input kept as prod(strides) phase grids, phase r holding the
        padded elements at r + strides * j (cells[i] = ceil(padded[i] / strides[i]) per axis), each
        grid (N, C, *cells) contiguous. Tap k reads phase (k * dilation) % stride at cell offset
        (k * dilation) // stride with stride 1 along every axis, so in the phase grid every tap is
        one long run over the widened output grid (output rows cells[-1] apart, the extra columns
        dropped after the matmul). The taps of one phase form a regular grid: one strided copy per
        phase fills their im2col rows. Rows are ordered tap-major within a (batch, group) pair, so
        that a tap's rows for all the pair's channels are one contiguous run of the phase grid; with
        one channel per group (depthwise) the rows of a tap are contiguous across all pairs, and
        the whole tap is one run of N * C grids. The weights are packed in the same row order."""
        n, c = x_shape[:2]
        group, mg, itemsize = self.group, self.mg, self.dtype.itemsize
        cg, rank = c // group, len(out)
        cells = [-(-p // s) for p, s in zip(padded, strides, strict=True)]
        cell_strides = [math.prod(cells[i + 1:]) for i in range(rank)]  # elements
        grid = math.prod(cells)
        phase_size = n * c * grid
        depthwise = cg == 1
        rows = self.rows + self.bias
        # run: a tap's contiguous im2col span; pair: the distance between (batch, group) pairs' rows
        run = (n * c if depthwise else cg) * grid
        row_stride, pair = (run, grid) if depthwise else (grid, rows * grid)
        pairs = 1 if depthwise else n * group  # copies per tap
        fills, copies, order, last = [], [], [], 0
        for index, phase in enumerate(itertools.product(*(range(s) for s in strides))):
            ks = _phase_taps(kernel, dilations, strides, phase)
            if not all(ks):
                continue  # no tap reads this phase: it is neither filled nor copied
            counts = [len(k) for k in ks]
            fill = _phase_fill(phase, begin, strides, x_shape[2:])
            if fill is not None:  # else only padding lands here: the zeros written at resize
                cells_index, x_index = fill
                fills.append((index, cells_index, (slice(None), slice(None), *x_index)))
            offset = index * phase_size + sum(k[0] * d // s * cs for k, d, s, cs
                                              in zip(ks, dilations, strides, cell_strides, strict=True))
            # Along an axis the phase's taps are k0 + j * s / g, at cells q0 + j * d / g (g = gcd(s, d)).
            steps = [d // math.gcd(s, d) * cs for d, s, cs in zip(dilations, strides, cell_strides, strict=True)]
            tap_strides = [run * math.prod(counts[i + 1:]) for i in range(rank)]
            copies.append(((pairs, *counts, run), len(order) * run, (pair, *tap_strides, 1),
                           offset, (cg * grid, *steps, 1)))
            last = max(last, offset + (pairs - 1) * cg * grid + sum((k - 1) * s for k, s in zip(counts, steps))
                       + run - 1)
            order += [int(np.ravel_multi_index(tap, kernel)) for tap in itertools.product(*ks)]
        self.order = np.array(order)
        self.fills_layout, self.copy_layout = fills, copies
        # One copy fills every phase where, along each axis, input index s * a + e (e < s) lands at
        # an address linear in (a, e): stride 1, stride 2 (two points are on a line), or a begin
        # pad that is a multiple of the stride; the input size a multiple of the stride.
        self.fold = None
        if FOLD and len(copies) == math.prod(strides) and all(
                size % s == 0 and (s <= 2 or b % s == 0) for size, s, b in zip(x_shape[2:], strides, begin)):
            shape, steps, offset = [n, c], [c * grid, grid], 0
            for size, s, b, cs, i in zip(x_shape[2:], strides, begin, cell_strides, range(rank), strict=True):
                if s == 1:
                    shape, steps, offset = [*shape, size], [*steps, cs], offset + b * cs
                    continue
                phase_stride = math.prod(strides[i + 1:]) * phase_size
                at = [(e + b) % s * phase_stride + (e + b) // s * cs for e in (0, 1)]
                shape, steps, offset = [*shape, size // s, s], [*steps, cs, at[1] - at[0]], offset + at[0]
            self.fold = (tuple(shape), offset, tuple(steps))
        self.phases_shape = (math.prod(strides), n, c, *cells)
        self.row_stride, self.pair_stride = row_stride, pair
        columns = out[0] * math.prod(cells[1:])  # the widened output grid
        if columns != math.prod(out):
            self.wide_shape = (n, mg * group, out[0], *cells[1:])
            self.crop = (Ellipsis, *(slice(0, o) for o in out[1:]))
            self.valid = out[-1]
        # The matmul's operand: per (batch, group) pair a (rows, columns) matrix, rows row_stride apart.
        shape, steps = ((rows, columns), (row_stride, 1)) if self.single else \
            ((n, group, rows, columns), (group * pair, pair, row_stride, 1))
        self.operand = (shape, tuple(s * itemsize for s in steps))
        self.pairs = n * group
        self.y_shape = (mg, columns) if self.single else (n, group, mg, columns)
        cols_size = rows * run if depthwise else n * group * rows * grid
        # Past the budget the im2col holds a band of output rows (of cells[1:] columns each) at a
        # time, its rows span columns apart instead of a whole grid (_bind_phase_bands).
        self.grid, self.row_columns = grid, math.prod(cells[1:])
        self.span = grid
        row_bytes = cols_size // grid * self.row_columns * itemsize
        band = _band_rows(out[0], self.row_columns, row_bytes, mg, rows, self.dtype)
        if band < out[0]:  # else one band: the whole grid
            self.bands = _bands(out[0], band)
            self.span = band * self.row_columns
            cols_size = cols_size // grid * self.span
        self.sizes = (max(math.prod(strides) * phase_size, last + 1), cols_size,
                      math.prod(self.y_shape) if self.valid is not None else 0)

    def bind(self, memory: np.ndarray) -> None:
        """Lay the run's buffers out in memory (elements of the plan's dtype): padded input + slack
        (zero; in self.first where the plan keeps it apart, else memory's first sizes[0]),
        im2col, widened result."""
        flat_size, cols_size, _ = self.sizes
        flat, rest = (self.first, memory) if self.first is not None else (memory[:flat_size], memory[flat_size:])
        if self.phased:
            self._bind_phases(flat, rest[:cols_size])
        elif not self.pointwise:
            self.buffer = flat[:math.prod(self.padded_shape)].reshape(self.padded_shape)
            self.interior = self.buffer[self.inner]
            self.window = as_strided(flat, self.window_shape, self.window_strides, writeable=False)
        if cols_size and not self.phased:
            cols = rest[:cols_size].reshape(self.cols_shape)
            if self.bias:
                self.ones = cols[:, :, -1]
                self.ones.fill(1)
            self.taps = cols[:, :, :self.rows].reshape(self.taps_shape)
            self.cols = cols.reshape(self.cols_shape[2:]) if self.single else cols
            if not self.pointwise and len(self.bands) > 1:
                self._bind_bands(cols)
        if self.valid is not None:
            self.result = rest[cols_size:].reshape(self.y_shape)
            self.wide = self.result.reshape(self.wide_shape)[self.crop]

    def _bind_bands(self, cols: np.ndarray) -> None:
        """Per band of output rows: its im2col copy (the buffer's rows for it, the last band's
        shorter, and the window's rows), the matmul's operand and its columns in the result."""
        axis = self.pixel_axis
        self.band_views = []
        for first, end in self.bands:
            band_cols = cols[..., :(end - first) * self.row_columns]
            taps_shape = (*self.taps_shape[:axis], end - first, *self.taps_shape[axis + 1:])
            rows = (Ellipsis, slice(first, end), *[slice(None)] * (len(taps_shape) - axis - 1))
            copies = [(_reshaped_view(band_cols[:, :, :self.rows], taps_shape), self.window[rows])]
            self.band_views.append((copies, band_cols[0, 0] if self.single else band_cols,
                                    slice(first * self.row_columns, end * self.row_columns)))

    def _bind_phases(self, flat: np.ndarray, cols: np.ndarray) -> None:
        phases = flat[:math.prod(self.phases_shape)].reshape(self.phases_shape)
        self.fills = [(phases[(index, slice(None), slice(None), *cells)], source)
                      for index, cells, source in self.fills_layout]
        item = self.dtype.itemsize
        if self.fold is not None:
            shape, offset, steps = self.fold
            self.fold_view = as_strided(flat[offset:], shape, tuple(s * item for s in steps))
        if self.bands:
            self._bind_phase_bands(flat, cols)
            return
        self.copies = [(as_strided(cols[dst:], shape, tuple(s * item for s in dst_strides)),
                        as_strided(flat[src:], shape, tuple(s * item for s in src_strides), writeable=False))
                       for shape, dst, dst_strides, src, src_strides in self.copy_layout]
        if self.bias:  # the row of ones, in every (batch, group) pair's matrix
            self.ones = as_strided(cols[self.rows * self.row_stride:], (self.pairs, self.operand[0][-1]),
                                   (self.pair_stride * item, item))
            self.ones.fill(1)
        self.cols = as_strided(cols, *self.operand, writeable=False)

    def _bind_phase_bands(self, flat: np.ndarray, cols: np.ndarray) -> None:
        """The phases' im2col band by band of output rows: the buffer's rows are span apart, not a
        grid, so a tap's copy takes each channel's band of the grid (one copy per phase and band,
        as the whole-grid copies are one per phase)."""
        item, grid, span = self.dtype.itemsize, self.grid, self.span
        row_stride, pair_stride = self.row_stride // grid * span, self.pair_stride // grid * span
        shape = self.operand[0]
        steps = (row_stride, 1) if self.single else (self.group * pair_stride, pair_stride, row_stride, 1)
        self.band_views = []
        for first, end in self.bands:
            count = (end - first) * self.row_columns
            copies = []
            for copy_shape, dst, dst_strides, src, src_strides in self.copy_layout:
                pairs, *counts, run = copy_shape
                chans = run // grid
                band_shape = (pairs, *counts, chans, count)
                band_dst = (pair_stride, *(s // grid * span for s in dst_strides[1:-1]), span, 1)
                copies.append((as_strided(cols[dst // grid * span:], band_shape, tuple(s * item for s in band_dst)),
                               as_strided(flat[src + first * self.row_columns:], band_shape,
                                          tuple(s * item for s in (*src_strides[:-1], grid, 1)), writeable=False)))
            operand = as_strided(cols, (*shape[:-1], count), tuple(s * item for s in steps), writeable=False)
            self.band_views.append((copies, operand, slice(first * self.row_columns, end * self.row_columns)))
        if self.bias:
            self.ones = as_strided(cols[self.rows * row_stride:], (self.pairs, span), (pair_stride * item, item))
            self.ones.fill(1)

    def describe(self) -> str:
        if self.pointwise:
            return f"matmul, {len(self.column_bands)} bands" if self.column_bands else "matmul"
        parts = ["im2col"]
        if self.phased:
            parts.append(f"{len(self.copy_layout)} phases")
        if self.valid is not None:
            parts.append("widened")
        if len(self.bands) > 1:
            parts.append(f"{len(self.bands)} bands")
        return ", ".join(parts)

    def pack(self, w: np.ndarray, b: np.ndarray | None, dtype) -> np.ndarray:
        """Weights as (G, Mg, Cg * taps [+ 1]) with the bias as the last column ((Mg, ...) for a
        single (batch, group) pair); with phases the columns are tap-major, taps in phase order."""
        packed = np.empty((self.group, self.mg, self.rows + self.bias), dtype)
        if self.order is None:
            packed[:, :, :self.rows] = w.reshape(self.group, self.mg, self.rows)
        else:
            taps = w.reshape(self.group, self.mg, self.rows // len(self.order), -1)[..., self.order]
            packed[:, :, :self.rows] = taps.transpose(0, 1, 3, 2).reshape(self.group, self.mg, self.rows)
        if self.bias:
            packed[:, :, self.rows] = b.reshape(self.group, self.mg)
        return packed[0] if self.single else packed


# A depthwise Conv whose im2col would exceed this runs a chunk of channels at a time, each chunk's
# padding, im2col, matmul and epilogue done while its buffers are in cache (_DepthwisePlan).
# Measured per call on a Xeon with 2 MiB of L2 per core (OPENBLAS_NUM_THREADS=1, Clip epilogue;
# chunks / whole-tensor plan):
# MobileNetV2@224's 144 x 56x56 3x3 x0.50-0.55 (256 KiB chunks x0.56-0.62, 1 MiB x0.51-0.55),
# 96 x 112x112 stride 2 x0.52-0.55, 192 x 28x28 x0.49-0.62; under the budget one chunk is the
# whole tensor, where the general plan is as fast (and phases win at stride 2).
DEPTHWISE_CHUNK_BYTES = 512 << 10


def _depthwise_chunks_fit(step, group: int, strides, dilations, begin, end) -> bool:
    """Whether a Conv step takes _DepthwisePlan: 1-D or 2-D, one input channel per group, an
    im2col past DEPTHWISE_CHUNK_BYTES in all but within it for one channel."""
    x_shape, w_shape = step.input_specs[0].shape, step.input_specs[1].shape
    if len(x_shape) not in (3, 4) or group != x_shape[1] or w_shape[1] != 1:
        return False
    rows = math.prod(w_shape[2:]) + (len(step.input_specs) > 2 and step.input_specs[2] is not None)
    padded_w = x_shape[-1] + begin[-1] + end[-1]
    out = _as_2d(step.output_specs[0].shape[2:], 1)
    pixels, _, _ = _depthwise_grid(out, -(-padded_w // strides[-1]))
    channel_bytes = rows * math.prod(pixels) * np.dtype(step.input_specs[0].dtype).itemsize
    return channel_bytes <= DEPTHWISE_CHUNK_BYTES < channel_bytes * x_shape[0] * x_shape[1]


def _as_2d(values, fill) -> tuple:
    """A 1-D conv's spatial sizes or geometry as a 2-D one's, of height 1 (fill in front)."""
    return (fill, *values) if len(values) == 1 else tuple(values)


def _depthwise_grid(out, cells_w: int):
    """The output grid a depthwise chunk's im2col runs over, in a stride phase's grid of cells_w
    columns (where every tap reads with stride 1): (pixels, their strides in the grid, (out_h,
    cells_w, out_w) when widened, else None). As in _ConvPlan, output rows one grid row apart (one
    long run per channel and tap) where that adds few columns, which the epilogue drops."""
    out_h, out_w = out
    if cells_w == out_w or out_w < cells_w <= WIDEN * out_w:
        return (out_h * cells_w,), (1,), (out_h, cells_w, out_w) if cells_w > out_w else None
    return (out_h, out_w), (cells_w, 1), None


class _DepthwisePlan:
    """A 2-D depthwise Conv (group = channels, any channel multiplier) a chunk of channels at a
    time: per chunk the copy of its input into zero-bordered padded buffers, the im2col copy, one
    batched matmul (channels, multiplier, taps + 1) @ (channels, taps + 1, pixels) and the
    epilogue, all on buffers of DEPTHWISE_CHUNK_BYTES or so, which stay in cache. The whole-tensor
    plan (_ConvPlan) makes each of those a pass over memory: an im2col of 10x the output at 3x3.

    The padded chunk is kept as stride phases (as _ConvPlan._init_phases explains; one phase at
    stride 1): phase (a, b) holds the padded elements at (a + stride_h * i, b + stride_w * j), so
    every tap reads one phase with stride 1, over the widened output grid where it adds few
    columns. The taps of a phase form a regular grid, copied in one call; the im2col rows, and the
    packed weights, are in that phase-major order (self.order). A 1-D conv runs as a 2-D one of
    height 1, on (N, C, 1, L) views of its tensors."""

    def __init__(self, ex, strides, dilations, begin, end):
        step = ex.step
        self.rank = len(step.input_specs[0].shape) - 2
        strides, dilations = _as_2d(strides, 1), _as_2d(dilations, 1)
        begin, end = _as_2d(begin, 0), _as_2d(end, 0)
        n, c, height, width = step.input_specs[0].shape[:2] + _as_2d(step.input_specs[0].shape[2:], 1)
        m, _, kh, kw = step.input_specs[1].shape[:2] + _as_2d(step.input_specs[1].shape[2:], 1)
        self.dtype = dtype = np.dtype(step.input_specs[0].dtype)
        self.mg = m // c
        self.bias = len(step.input_specs) > 2 and step.input_specs[2] is not None
        self.kind = epilogue(ex.attrs["activation"], ex.attrs["activation_alpha"], ex.attrs["activation_beta"],
                              dtype, math.prod(step.output_specs[0].shape))
        padded = (height + begin[0] + end[0], width + begin[1] + end[1])
        cells = [-(-p // s) for p, s in zip(padded, strides)]
        grid = cells[0] * cells[1]
        self.pixels, pixel_strides, self.wide = _depthwise_grid(_as_2d(step.output_specs[0].shape[2:], 1), cells[1])
        pixels = math.prod(self.pixels)
        self.taps_count = kh * kw
        rows = self.taps_count + self.bias
        self.chunk = chunk = max(1, min(c, DEPTHWISE_CHUNK_BYTES // (rows * pixels * dtype.itemsize)))
        self.chunks = _bands(c, chunk)
        self.batch = n
        phase_size = chunk * grid
        # Per phase some tap reads: its taps (one regular grid per axis, d / gcd(s, d) cells apart)
        # and the input elements landing in it.
        self.order, self.copy_layout, self.fill_layout, last = [], [], [], 0
        # Only the residues some tap reads, per axis: a stride can be far larger than the kernel
        # (a model with strides (2, 1048576) made 2^21 phases to look at: 7.7 s at resize).
        residues = [sorted({k * d % s for k in range(size)}) for size, d, s in zip((kh, kw), dilations, strides)]
        used = [(phase, _phase_taps((kh, kw), dilations, strides, phase)) for phase in itertools.product(*residues)]
        for index, (phase, ks) in enumerate(used):
            steps = [d // math.gcd(s, d) for d, s in zip(dilations, strides)]
            offset = index * phase_size + ks[0][0] * dilations[0] // strides[0] * cells[1] \
                + ks[1][0] * dilations[1] // strides[1]
            counts = (len(ks[0]), len(ks[1]))
            tap_strides = (steps[0] * cells[1], steps[1])
            self.copy_layout.append((len(self.order), counts, offset, tap_strides))
            self.order += [k0 * kw + k1 for k0 in ks[0] for k1 in ks[1]]
            last = max(last, offset + (chunk - 1) * grid + sum((k - 1) * t for k, t in zip(counts, tap_strides))
                       + sum((p - 1) * t for p, t in zip(self.pixels, pixel_strides)))
            fill = _phase_fill(phase, begin, strides, (height, width))
            if fill is not None:  # else only padding lands in this phase: zeros
                cells_index, x_index = fill
                self.fill_layout.append((index, cells_index, (slice(None), *x_index)))
        self.phases_shape = (len(used), chunk, *cells)
        self.grid, self.pixel_strides = grid, pixel_strides
        self.cols_shape = (chunk, rows, pixels)
        # The widened grid's extra columns may read past the chunk's last row: into zeros, dropped.
        self.sizes = (max(math.prod(self.phases_shape), last + 1), math.prod(self.cols_shape),
                      chunk * self.mg * pixels if self.wide else 0)
        # Always in the shared scratch: the chunk's buffers are small, and reusing the memory the
        # steps before wrote keeps it in cache.
        self.nbytes = sum(self.sizes) * dtype.itemsize
        self.shared = True
        ex.backend.reserve_scratch(self.nbytes)
        values = list(step.input_values or []) + [None] * 3
        self.weights = None
        if values[1] is not None and (not self.bias or values[2] is not None):
            self.weights = self.pack(values[1], values[2], dtype)

    def bind(self, memory: np.ndarray) -> None:
        """Lay out the phases (zero), the im2col with its row of ones and the widened result in
        memory, with the views of a full chunk and of the last, shorter one."""
        flat_size, cols_size, _ = self.sizes
        flat = memory[:flat_size]
        phases = flat[:math.prod(self.phases_shape)].reshape(self.phases_shape)
        item = self.dtype.itemsize
        cols = memory[flat_size:flat_size + cols_size].reshape(self.cols_shape)
        self.ones = None
        if self.bias:
            self.ones = cols[:, -1]
            self.ones.fill(1)
        result = crop = None
        if self.wide is not None:
            result = memory[flat_size + cols_size:].reshape(self.chunk, self.mg, -1)
            crop = result.reshape(self.chunk * self.mg, *self.wide[:2])[:, :, :self.wide[2]]
        self.views = {}
        for first, end in self.chunks:
            count = end - first
            if count in self.views:
                continue
            fills = [(phases[(index, slice(0, count), *cells)], source) for index, cells, source in self.fill_layout]
            copies = [(_reshaped_view(cols[:count, row:row + math.prod(taps)], (count, *taps, *self.pixels)),
                       as_strided(flat[offset:], (count, *taps, *self.pixels),
                                  tuple(item * t for t in (self.grid, *tap_strides, *self.pixel_strides)),
                                  writeable=False))
                      for row, taps, offset, tap_strides in self.copy_layout]
            self.views[count] = (fills, copies, cols[:count], None if result is None else result[:count],
                                 None if crop is None else crop[:count * self.mg])

    def describe(self) -> str:
        parts = [f"depthwise {len(self.chunks)}x{self.chunk}ch"]  # chunks x channels
        if self.phases_shape[0] > 1:
            parts.append(f"{self.phases_shape[0]} phases")
        if self.wide is not None:
            parts.append("widened")
        return ", ".join(parts)

    def pack(self, w: np.ndarray, b: np.ndarray | None, dtype) -> np.ndarray:
        """(channels, multiplier, taps [+ 1]), the taps in the im2col's order, the bias last."""
        channels = w.shape[0] // self.mg
        packed = np.empty((channels, self.mg, self.cols_shape[1]), dtype)
        packed[:, :, :self.taps_count] = w.reshape(channels, self.mg, self.taps_count)[..., self.order]
        if self.bias:
            packed[:, :, -1] = b.reshape(channels, self.mg)
        return packed

    def run(self, ex, x, w, b, residual, out) -> None:
        _bind_shared(ex, self)
        weights = self.weights if self.weights is not None else self.pack(w, b, x.dtype)
        if self.rank == 1:  # (N, C, L) as (N, C, 1, L): views of contiguous tensors
            x, out = x[:, :, None], out[:, :, None]
            residual = None if residual is None else residual[:, :, None]
        mg, views = self.mg, self.views
        for image in range(self.batch):
            for first, end in self.chunks:
                fills, copies, cols, result, crop = views[end - first]
                chunk = x[image, first:end]
                for dst, source in fills:
                    np.copyto(dst, chunk[source])
                for dst, src in copies:  # im2col
                    np.copyto(dst, src)
                target = out[image, first * mg:end * mg]
                if result is None:  # the matmul's result is the chunk's output
                    src = target
                    np.matmul(weights[first:end], cols, out=target.reshape(end - first, mg, -1))
                else:
                    src = crop
                    np.matmul(weights[first:end], cols, out=result)
                if residual is not None:
                    np.add(src, residual[image, first * mg:end * mg], out=target)
                    src = target
                if self.kind is not None:
                    self.kind(src, target)
                elif src is not target:
                    np.copyto(target, src)


def _loop_activation(ex, dtype: np.dtype) -> tuple:
    """A conv step's fused activation as the compiled loops take it: (code, low, high) for the Relu
    or Clip inside the loop (compiled.ACTIVATIONS), and the epilogue of any other kind, run after."""
    kind = ex.attrs["activation"] or None
    alpha, beta = ex.attrs["activation_alpha"], ex.attrs["activation_beta"]
    low, high = (dtype.type(alpha), dtype.type(beta)) if kind == "clip" else (dtype.type(0),) * 2
    after = None if kind in compiled.ACTIVATIONS else epilogue(kind, alpha, beta, dtype)
    return compiled.ACTIVATIONS.get(kind, 0), low, high, after


class _CompiledDepthwisePlan:
    """A 1-D or 2-D depthwise Conv (any channel multiplier) as one compiled loop
    (backends/numpy/compiled.py): the bias, the residual and a Relu or Clip inside it, another
    activation after it. float32 convs of one output channel per input channel take
    depthwise_channel_blocks (channels-last blocks: zoo mobilenetv2's at 32x32 x0.3-0.5 of
    depthwise_channels_inner's time, 384 x 14 x 14 x0.3 of depthwise_phases's), but where
    depthwise_rows's steps of 4 rows x 16 pixels fill the output rows (DEPTHWISE_ROWS_COVER; 3x3
    / 2 convs it sums straight from the input plane, others through stride phases); other small
    planes depthwise_channels_inner, the rest depthwise_phases."""

    shared, nbytes = False, 0

    def __init__(self, ex, strides, dilations, begin, end):
        step = ex.step
        self.rank = len(step.input_specs[0].shape) - 2
        self.dtype = dtype = np.dtype(step.input_specs[0].dtype)
        self.strides, self.dilations = (np.array(_as_2d(v, 1), np.int64) for v in (strides, dilations))
        self.pads = np.array(_as_2d(begin, 0), np.int64)
        self.multiplier = step.input_specs[1].shape[0] // step.input_specs[0].shape[1]
        self.activation, self.low, self.high, self.kind = _loop_activation(ex, dtype)
        self.no_bias, self.no_residual = np.empty(0, dtype), np.empty((0, 0, 0, 0), dtype)
        self.threads = 1  # the threads of depthwise_rows and depthwise_channel_blocks (the others run on one)
        # The loop for the output plane's size, and its work buffers, made here: a run allocates nothing.
        loops = compiled.loops()
        x_shape = (step.input_specs[0].shape[:2] + _as_2d(step.input_specs[0].shape[2:], 1))
        out_shape = (step.output_specs[0].shape[:2] + _as_2d(step.output_specs[0].shape[2:], 1))
        kernel = _as_2d(step.input_specs[1].shape[2:], 1)
        channels_out, out_h, out_w = out_shape[1:]
        multiply_adds = math.prod(out_shape) * math.prod(kernel)
        # depthwise_rows reads strided planes through stride phases, but 3x3 / 2 ones straight
        straight = loops.rows_read_planes_straight(kernel, self.strides, self.dilations)
        strided_by_phases = bool(np.any(self.strides > 1)) and not straight
        rows_width = loops.DEPTHWISE_ROWS_STRIDED_WIDTH if strided_by_phases else loops.DEPTHWISE_ROWS_LOOP_WIDTH
        rows_fill = (out_h >= loops.DEPTHWISE_ROWS and out_w >= max(rows_width, loops.DEPTHWISE_PIXELS)
                     and -(-out_w // loops.DEPTHWISE_PIXELS) * loops.DEPTHWISE_PIXELS
                     <= loops.DEPTHWISE_ROWS_COVER * out_w)
        self.style = "phases"  # or "rows" (weights (M, taps), takes the kernel), "blocks", "channels inner"
        if dtype == np.float32 and loops.can_vectorize() and rows_fill:
            self.style, self.loop = "rows", loops.vectorized_loop("depthwise_rows")
            _, cells_w, size = loops.phase_grid(x_shape, out_shape, kernel, self.strides, self.dilations, self.pads)
            self.kernel = np.array(kernel, np.int64)
            self.threads = compiled.loop_threads(ex, multiply_adds, compiled.THREADED_DEPTHWISE_MULTIPLY_ADDS)
            # phases per thread (none to fill where the loop reads the planes straight), tap offsets,
            # the shares of planes
            self.buffers = (thread_rows(self.threads, 1 if straight else size, dtype),
                            np.empty(math.prod(kernel), np.int64), work_counter(self.threads))
        elif dtype == np.float32 and self.multiplier == 1 and loops.DEPTHWISE_CHANNEL_BLOCKS:
            self.style, self.loop = "blocks", loops.depthwise_channel_blocks
            self.threads = compiled.loop_threads(ex, multiply_adds, compiled.THREADED_DEPTHWISE_MULTIPLY_ADDS)
            self._plan_blocks(loops, step, x_shape, out_shape, kernel)
        elif out_h * out_w <= loops.CHANNELS_INNER_PIXELS:
            self.style, self.loop = "channels inner", loops.depthwise_channels_inner
            self.buffers = (np.empty((*x_shape[2:], channels_out), dtype), np.empty((*kernel, channels_out), dtype),
                            np.empty(channels_out, dtype))
        else:
            _, cells_w, size = loops.phase_grid(x_shape, out_shape, kernel, self.strides, self.dilations, self.pads)
            self.loop = loops.depthwise_phases
            self.buffers = (np.zeros(size, dtype), np.empty(out_shape[2] * cells_w, dtype))

    def _plan_blocks(self, loops, step, x_shape, out_shape, kernel) -> None:
        """depthwise_channel_blocks's tables and buffers, and its weights where they are constants."""
        lanes = loops.GRID_LANES
        (height, width), (out_h, out_w) = x_shape[2:], out_shape[2:]
        (stride_h, stride_w), (dilation_h, dilation_w), (top, left) = self.strides, self.dilations, self.pads
        # Rows and columns up to the last tap of the last output pixel (past the input: the padding).
        padded_h = max(height + top, (out_h - 1) * stride_h + (kernel[0] - 1) * dilation_h + 1)
        padded_w = max(width + left, (out_w - 1) * stride_w + (kernel[1] - 1) * dilation_w + 1)
        ky, kx = np.meshgrid(np.arange(kernel[0]), np.arange(kernel[1]), indexing="ij")
        tap_offsets = ((ky * dilation_h * padded_w + kx * dilation_w) * lanes).ravel().astype(np.int64)
        iy, ix = np.divmod(np.arange(height * width), width)
        places = np.zeros(height * width + lanes, np.int64)  # the tail: read for lanes no transpose stores
        places[:height * width] = ((iy + top) * padded_w + ix + left) * lanes
        planes = np.arange(lanes, dtype=np.int64) * out_h * out_w
        self.blocks = -(-out_shape[1] // lanes)
        self.tail = (tap_offsets, places, planes)
        self.padded_w = int(padded_w)
        self.buffers = (thread_rows(self.threads, padded_h * padded_w * lanes, np.float32),
                        thread_rows(self.threads, out_h * out_w * lanes, np.float32), work_counter(self.threads))
        self.packed_weights = self.packed_bias = None
        values = list(step.input_values or []) + [None] * 3
        if values[1] is not None:
            self.packed_weights = self.pack_weights(values[1])
        if values[2] is not None or len(step.input_specs) < 3 or step.input_specs[2] is None:
            self.packed_bias = self.pack_bias(values[2])

    def pack_weights(self, w: np.ndarray) -> np.ndarray:
        """(M, 1, kh, kw) as (blocks, taps, GRID_LANES): a block's channels side by side per tap."""
        lanes = compiled.loops().GRID_LANES
        packed = np.zeros((self.blocks * lanes, math.prod(w.shape[2:])), np.float32)
        packed[:len(w)] = w.reshape(len(w), -1)
        return np.ascontiguousarray(packed.reshape(self.blocks, lanes, -1).transpose(0, 2, 1))

    def pack_bias(self, b: np.ndarray | None) -> np.ndarray:
        packed = np.zeros((self.blocks, compiled.loops().GRID_LANES), np.float32)
        if b is not None:
            packed.reshape(-1)[:len(b)] = b
        return packed

    @staticmethod
    def fits(step, group: int) -> bool:
        x_shape, w_shape = step.input_specs[0].shape, step.input_specs[1].shape
        return (len(x_shape) in (3, 4) and group == x_shape[1] and w_shape[1] == 1
                and np.dtype(step.input_specs[0].dtype) in (np.float32, np.float64))

    def describe(self) -> str:
        return f"depthwise, compiled loop ({self.loop.__name__})"

    def run(self, ex, x, w, b, residual, out) -> None:
        if self.rank == 1:  # (N, C, L) as (N, C, 1, L)
            x, w, out = x[:, :, None], w[:, :, None], out[:, :, None]
            residual = None if residual is None else residual[:, :, None]
        bias = self.no_bias if b is None else b
        residual = self.no_residual if residual is None else residual
        if self.style == "blocks":
            weights = self.pack_weights(w) if self.packed_weights is None else self.packed_weights
            bias = self.pack_bias(b) if self.packed_bias is None else self.packed_bias
            self.loop(np.ascontiguousarray(x), weights, bias, np.ascontiguousarray(residual), out, self.strides,
                      self.activation, self.low, self.high, self.buffers[0], self.padded_w, *self.tail,
                      *self.buffers[1:], compiled.run_workers(self.threads, ex.backend))
        elif self.style == "rows":
            self.loop(np.ascontiguousarray(x), np.ascontiguousarray(w).reshape(len(w), -1), bias,
                      np.ascontiguousarray(residual), out, self.kernel, self.strides, self.dilations, self.pads,
                      self.multiplier, self.activation, self.low, self.high, *self.buffers,
                      compiled.run_workers(self.threads, ex.backend))
        else:  # (the loops read x, the residual and out as flat arrays)
            self.loop(np.ascontiguousarray(x), w, bias, np.ascontiguousarray(residual), out, self.strides,
                      self.dilations, self.pads, self.multiplier, self.activation, self.low, self.high, *self.buffers)
        if self.kind is not None:
            self.kind(out, out)


# 1x1 convs (stride 1, no padding) of fewer multiply-adds stay numpy products, so that a model of
# only such tiny convs runs without starting numba (about 0.4 s at its import). Not for speed: the
# loop took x0.81-0.85 of the product + epilogue's time from 256 to 65536 multiply-adds (1x1 8 -> 8
# at 2x2 to 64 -> 64 at 4x4, one thread, /tmp/w/pwsmall.py); with the limit at 100 000 (until
# 2026-12-06) zoo mobilenetv2's small ones stayed products: x0.89 at 32x32, x0.81 at 16x16 since.
POINTWISE_LOOP_MULTIPLY_ADDS = 4096

# Strided convs whose every stride phase some tap reads take conv_grid over those phases where they
# have at most this many input channels per group (image stems) or output rows of a step's
# GRID_LANES pixels or more; the others conv_direct (_CompiledDirectPlan).
STRIDED_GRID_CHANNELS = 4


class _CompiledDirectPlan:
    """A 1-D or 2-D float32 Conv as one compiled loop, without im2col: where its output grid holds
    GRID_LANES pixels or more, 8 output channels x GRID_LANES grid pixels summed in registers
    (compiled_loops.conv_grid) from its zero-padded input at stride 1 (a 1x1 conv's plane read as
    one row), or at strides past 1 its stride phases (each tap then reads a row with stride 1:
    STRIDED_GRID_CHANNELS says which); else 16 output channels x 4 pixels (compiled_loops.conv_direct)
    from its zero-padded input. The bias, the residual and a Relu or Clip inside the loop, another
    activation after it."""

    shared = False

    def __init__(self, ex, strides, dilations, begin, end):
        step, loops = ex.step, compiled.loops()
        self.x_shape = x_shape = tuple(step.input_specs[0].shape[:2]) + _as_2d(step.input_specs[0].shape[2:], 1)
        w_shape = step.input_specs[1].shape
        out = step.output_specs[0].shape
        out_h, out_w = _as_2d(out[2:], 1)
        (stride_h, stride_w), (dilation_h, dilation_w) = _as_2d(strides, 1), _as_2d(dilations, 1)
        (top, left), (bottom, right) = _as_2d(begin, 0), _as_2d(end, 0)
        n, c, height, width = x_shape
        kernel_h, kernel_w = _as_2d(w_shape[2:], 1)
        self.group = group = ex.attrs["group"]
        self.mg = w_shape[0] // group
        self.out_shape = (out[0], out[1], out_h * out_w)
        channel, ky, kx = np.meshgrid(np.arange(c // group), np.arange(kernel_h), np.arange(kernel_w), indexing="ij")
        self.threads = compiled.loop_threads(ex, math.prod(out) * math.prod(w_shape[1:]),
                                             compiled.THREADED_CONV_MULTIPLY_ADDS)
        padded = top or bottom or left or right
        # A 1x1 conv with stride 1 and no padding reads its plane as one row.
        plane_is_row = kernel_h == kernel_w == 1 and stride_h == stride_w == 1 and not padded
        # The input as the loop reads it: x itself, or a buffer zeroed once whose interior each run
        # fills (the padded plane, or its stride phases).
        self.padded = self.phases = None
        geometry = (np.array([stride_h, stride_w], np.int64), np.array([dilation_h, dilation_w], np.int64),
                    np.array([top, left], np.int64))
        if plane_is_row:
            grid_h, grid_w = 1, out_h * out_w  # the output grid too: one row
            cells_h, cells_w = grid_h, grid_w
        else:
            grid_h, grid_w = out_h, out_w
            cells_h, cells_w, _ = loops.phase_grid(x_shape, (n, out[1], out_h, out_w), (kernel_h, kernel_w), *geometry)
        # At strides past 1 the stride phases cost a pass over the input each run (0.13-0.17 ns an
        # element here, a copy 0.09), which image stems, a few input channels under many taps, win
        # back at any width, other convs where most steps stay in one output row (/tmp/w/ab_phases.py,
        # grid / direct, one thread: 3x3 / 2 16 -> 32 at 56 x0.85-0.91, at 112 x0.86-0.91, 64 -> 128
        # at 56 x0.81; 32 -> 64 at 28, rows of 14, x1.09-1.12; two threads alike, 14: x1.28).
        # Phases no tap reads (a strided 1x1 conv reads one of four) would be filled for nothing.
        phases_read = {(y * dilation_h % stride_h, x * dilation_w % stride_w)
                       for y in range(kernel_h) for x in range(kernel_w)}
        phases_pay = stride_h == stride_w == 1 or (
            len(phases_read) == stride_h * stride_w
            and (c // group <= STRIDED_GRID_CHANNELS or out_w >= loops.GRID_LANES))
        if (grid_h - 1) * cells_w + grid_w >= max(loops.GRID_LOOP_PIXELS, loops.GRID_LANES) and phases_pay:
            self.loop_name, self.block = "conv_grid", loops.GRID_CHANNELS
            phase_count, grid = stride_h * stride_w, cells_h * cells_w
            taps = [loops.tap_offset(y, x, *geometry[:2], grid, cells_w) for y, x in zip(ky.ravel(), kx.ravel())]
            tap_offsets = channel.ravel() * phase_count * grid + np.array(taps)
            if not plane_is_row and (phase_count, cells_h, cells_w) != (1, height, width):
                self.phases = aligned_zeros((n, c, phase_count, cells_h, cells_w), np.float32)
                self.fill_phases, self.phase_geometry = loops.fill_phase_bands, (geometry[0], geometry[2])
            self.layout = (tap_offsets.astype(np.intp), cells_w, grid_w)
            self.buffers = (work_counter(self.threads),)  # the shares of chunks of the grid
        else:
            self.loop_name, self.block = "conv_direct", loops.DIRECT_CHANNELS
            padded_h, padded_w = height + top + bottom, width + left + right
            if padded:
                self.padded = aligned_zeros((n, c, padded_h, padded_w), np.float32)
                self.interior = self.padded[:, :, top:top + height, left:left + width]
            tap_offsets = (channel * padded_h * padded_w + ky * dilation_h * padded_w + kx * dilation_w).ravel()
            oy, ox = np.meshgrid(np.arange(out_h), np.arange(out_w), indexing="ij")
            pixel_offsets = (oy * stride_h * padded_w + ox * stride_w).ravel().astype(np.intp)
            self.layout = (tap_offsets.astype(np.intp), pixel_offsets)
            # a tile per thread, the shares of tiles
            self.buffers = (thread_rows(self.threads, loops.DIRECT_TILE * self.block, np.float32),
                            work_counter(self.threads))
        self.loop = loops.vectorized_loop(self.loop_name)
        self.activation, self.low, self.high, self.kind = _loop_activation(ex, np.dtype(np.float32))
        # The loop's arguments after out, but the workers: the same on every run.
        self.tail = (*self.layout, self.activation, self.low, self.high, *self.buffers)
        # Where the loop reads a buffer of the plan's (the stride phases, the padded plane), as it reads it.
        laid_out = self.phases if self.phases is not None else self.padded
        self.source = None if laid_out is None else laid_out.reshape(n, -1)
        self.no_residual = np.empty((0, 0, 0), np.float32)
        values = list(step.input_values or []) + [None] * 3
        self.weights = self.bias = None
        if values[1] is not None:
            self.weights = self.pack_weights(values[1])
        if values[2] is not None or len(step.input_specs) < 3 or step.input_specs[2] is None:
            self.bias = self.pack_bias(values[2])

    @staticmethod
    def fits(step, group: int, strides, begin, end) -> bool:
        """float32 1-D and 2-D convs but depthwise ones (their own loop), with a residual of the
        output's shape, where the loops compile. 1x1 convs too from POINTWISE_LOOP_MULTIPLY_ADDS,
        on any thread count: the loop took x0.85-0.98 of numpy's product + epilogue on one thread
        (1x1 256 -> 256 at 28x28 x0.85, 1024 -> 1024 at 14x14 x0.98; zoo mobilenetv2's at 224x224
        x0.89 of the model's time, at 32x32 all of them x0.93 against those of 3 M multiply-adds
        and more: /tmp/w/pwth.py, abflag.py, abth.py), and x0.81-0.85 on tiny ones."""
        x_shape, w_shape = step.input_specs[0].shape, step.input_specs[1].shape
        residual = step.input_specs[3] if len(step.input_specs) > 3 else None
        pointwise = all(k == 1 for k in w_shape[2:]) and all(s == 1 for s in strides) \
            and not any(begin) and not any(end)
        multiply_adds = math.prod(step.output_specs[0].shape) * math.prod(w_shape[1:])
        # (a small 1x1 conv is decided before numba would be imported)
        return (len(x_shape) in (3, 4) and np.dtype(step.input_specs[0].dtype) == np.float32
                and not (group == x_shape[1] and w_shape[1] == 1)
                and (residual is None or tuple(residual.shape) == tuple(step.output_specs[0].shape))
                and not (pointwise and multiply_adds < POINTWISE_LOOP_MULTIPLY_ADDS)
                and compiled.enabled() and compiled.loops().can_vectorize())

    def pack_weights(self, w: np.ndarray) -> np.ndarray:
        """(M, C / G, kh, kw) as (G, blocks, taps, block): each block's channels' weights per tap
        side by side, zeros past the group's channels."""
        blocks = -(-self.mg // self.block)
        packed = np.zeros((self.group, blocks * self.block, math.prod(w.shape[1:])), np.float32)
        packed[:, :self.mg] = w.reshape(self.group, self.mg, -1)
        return np.ascontiguousarray(packed.reshape(self.group, blocks, self.block, -1).transpose(0, 1, 3, 2))

    def pack_bias(self, b: np.ndarray | None) -> np.ndarray:
        blocks = -(-self.mg // self.block)
        packed = np.zeros((self.group, blocks * self.block), np.float32)
        if b is not None:
            packed[:, :self.mg] = b.reshape(self.group, self.mg)
        return packed.ravel()

    def describe(self) -> str:
        return f"direct, compiled loop ({self.loop_name})"

    def run(self, ex, x, w, b, residual, out) -> None:
        workers = compiled.run_workers(self.threads, ex.backend)
        source = self.source
        if self.phases is not None:
            self.fill_phases(np.ascontiguousarray(x).reshape(self.x_shape), self.phases, *self.phase_geometry, workers)
        elif self.padded is not None:
            np.copyto(self.interior, x.reshape(self.interior.shape))
        else:
            source = np.ascontiguousarray(x).reshape(len(x), -1)
        weights = self.pack_weights(w) if self.weights is None else self.weights
        bias = self.pack_bias(b) if self.bias is None else self.bias
        residual = self.no_residual if residual is None else np.ascontiguousarray(residual).reshape(self.out_shape)
        self.loop(source, weights, bias, residual, out.reshape(self.out_shape), *self.tail, workers)
        if self.kind is not None:
            self.kind(out, out)


def _prepare_conv(ex) -> None:
    plan = None
    if _fits(ex.step):
        geometry = _conv_geometry(ex)
        if _CompiledDepthwisePlan.fits(ex.step, ex.attrs["group"]) and compiled.enabled():
            plan = _CompiledDepthwisePlan(ex, *geometry)
        elif _CompiledDirectPlan.fits(ex.step, ex.attrs["group"], geometry[0], *geometry[2:]):
            plan = _CompiledDirectPlan(ex, *geometry)
        else:
            chunked = _depthwise_chunks_fit(ex.step, ex.attrs["group"], *geometry)
            plan = (_DepthwisePlan if chunked else _ConvPlan)(ex, *geometry)
    ex.state["conv"] = plan


def _describe(key: str):
    """describe(ex) of a conv kernel: its plan's path, or the general code's."""
    def describe(ex) -> str:
        plan = ex.state.get(key)
        return "general (any dtype)" if plan is None else plan.describe()
    return describe


@numpy_kernel("Conv", writes_outputs=True, prepare=_prepare_conv, describe=_describe("conv"))
def conv(ex, inputs, outputs):
    if "conv" not in ex.state:  # run without prepare (a direct call)
        _prepare_conv(ex)
    plan = ex.state["conv"]
    x, w, b, residual = (list(inputs) + [None] * 4)[:4]
    out = outputs[0]
    if plan is None:
        np.copyto(out, _conv_any(ex, x, w, b, residual), casting="unsafe")
        return
    if type(plan) in (_DepthwisePlan, _CompiledDepthwisePlan, _CompiledDirectPlan):
        plan.run(ex, x, w, b, residual, out)
    else:
        _run_prepared(ex, plan, x, w, b, residual, out)


def _run_prepared(ex, plan: _ConvPlan, x, w, b, residual, out) -> None:
    """One run of a conv through numpy's BLAS with its prepared buffers."""
    if plan.shared:
        _bind_shared(ex, plan)
    weights = plan.weights
    if plan.pointwise and not plan.bias:
        if weights is None:
            weights = w.reshape(plan.weights_shape)
        matmul_in_bands(weights, x.reshape(plan.x_shape), out.reshape(plan.y_shape), plan.column_bands)
        if b is not None:
            np.add(out, b.reshape(plan.bias_shape), out=out)
        src = out
    else:
        if plan.pointwise:
            np.copyto(plan.taps, x.reshape(plan.x_shape))
        elif plan.phased:
            if plan.fold is not None:
                np.copyto(plan.fold_view, x.reshape(plan.fold[0]))
            else:
                for dst, index in plan.fills:
                    np.copyto(dst, x[index])
            if len(plan.bands) < 2:
                for dst, src in plan.copies:  # im2col
                    np.copyto(dst, src)
        else:
            np.copyto(plan.interior, x)
            if len(plan.bands) < 2:
                np.copyto(plan.taps, plan.window)  # im2col
        if weights is None:
            weights = plan.pack(w, b, x.dtype)
        if len(plan.bands) > 1:
            result = out.reshape(plan.y_shape) if plan.valid is None else plan.result
            for copies, cols, columns in plan.band_views:
                for dst, src in copies:  # im2col of the band
                    np.copyto(dst, src)
                np.matmul(weights, cols, out=result[..., columns])
            src = out if plan.valid is None else plan.wide
        elif plan.pointwise:
            matmul_in_bands(weights, plan.cols, out.reshape(plan.y_shape), plan.column_bands)
            src = out
        elif plan.valid is None:
            np.matmul(weights, plan.cols, out=out.reshape(plan.y_shape))
            src = out
        else:
            np.matmul(weights, plan.cols, out=plan.result)
            src = plan.wide
    if residual is not None:
        np.add(src, residual, out=out)
        src = out
    if plan.kind is not None:
        plan.kind(src, out)
    elif src is not out:
        np.copyto(out, src)


def _conv_any(ex, x, w, b=None, residual=None) -> np.ndarray:
    """Any Conv (integer or mixed dtypes, empty tensors): np.pad, im2col copied tap by tap, one
    batched matmul, computed fresh on every run."""
    strides, dilations, begin, end = ex.state.get("geometry") or _conv_geometry(ex)
    ex.state["geometry"] = strides, dilations, begin, end
    out = ex.step.output_specs[0].shape[2:]
    n, c = x.shape[:2]
    m, kernel = w.shape[0], w.shape[2:]
    group = ex.attrs["group"]
    view = window_view(pad_spatial(x, begin, end), out, kernel, strides, dilations)
    cols = np.empty((n, c, *kernel, *out), dtype=x.dtype)
    for tap in np.ndindex(*kernel):
        cols[(slice(None), slice(None), *tap)] = view[(Ellipsis, *tap)]
    cols = cols.reshape(n, group, (c // group) * math.prod(kernel), math.prod(out))
    weights = w.reshape(group, m // group, -1)
    y = np.matmul(weights, cols).reshape(n, m, *out)  # (G, Mg, CgK) @ (N, G, CgK, P), batched
    return finish(ex, y, b, residual)


class _ConvTransposePlan:
    """What a ConvTranspose step reuses on every run: the repacked weights, the matmul's result,
    the col2im buffer and its per-tap (destination, source) views."""

    def __init__(self, ex):
        step = ex.step
        out, begin, _, strides, dilations, _ = conv_transpose_geometry(infer_context(ex))
        x_shape, w_shape = step.input_specs[0].shape, step.input_specs[1].shape
        self.dtype = dtype = np.dtype(step.input_specs[0].dtype)
        n, c, *sizes = x_shape
        group = ex.attrs["group"]
        mg, kernel = w_shape[1], tuple(w_shape[2:])
        m, pixels = mg * group, math.prod(sizes)
        self.single = n * group == 1
        self.weights_shape = (group, c // group, mg * math.prod(kernel))
        self.x_shape = (c, pixels) if self.single else (n, group, c // group, pixels)
        # Every input pixel scatters a (M, *k) patch: cols[n, g, (m, k), p] = sum_c W[g, c, (m, k)] x[n, g, c, p].
        self.cols_shape = (n, group, mg * math.prod(kernel), pixels)
        self.patches_shape = (n, m, *kernel, *sizes)
        # col2im: tap t lands at output t * dilation + i * stride; the buffer also covers output
        # beyond the natural size (output_shape / output_padding larger than the scattered extent).
        full = [max((s - 1) * st + (k - 1) * d + 1, bg + o)
                for s, st, k, d, bg, o in zip(sizes, strides, kernel, dilations, begin, out, strict=True)]
        self.buffer_shape = (n, m, *full)
        self.where = [(tuple(slice(t * d, t * d + (s - 1) * st + 1, st)
                             for t, d, s, st in zip(tap, dilations, sizes, strides, strict=True)), tap)
                      for tap in np.ndindex(*kernel)]
        self.crop_index = (slice(None), slice(None), *(slice(bg, bg + o) for bg, o in zip(begin, out, strict=True)))
        # Taps that tile the buffer (kernel == stride, no dilation) never overlap: each run
        # overwrites them, with no zero fill and no adds (what no tap reaches stays zero).
        self.tiles = all(k == s and d == 1 for k, s, d in zip(kernel, strides, dilations, strict=True))
        self.bias_shape = (-1,) + (1,) * len(out)
        self.kind = epilogue(ex.attrs["activation"], ex.attrs["activation_alpha"], ex.attrs["activation_beta"],
                              dtype, math.prod(step.output_specs[0].shape))
        self.sizes = (math.prod(self.buffer_shape), math.prod(self.cols_shape))
        memory = _memory(ex, self)
        if memory is not None:
            self.bind(memory)
        values = list(step.input_values or []) + [None, None]
        self.weights = None if values[1] is None else self.pack(values[1])

    def bind(self, memory: np.ndarray) -> None:
        """Lay out the col2im buffer (zero) and the matmul's result in memory."""
        buffer = memory[:self.sizes[0]].reshape(self.buffer_shape)
        cols = memory[self.sizes[0]:].reshape(self.cols_shape)
        patches = cols.reshape(self.patches_shape)
        self.cols = cols.reshape(self.cols_shape[2:]) if self.single else cols
        self.taps = [(buffer[(slice(None), slice(None), *where)], patches[(slice(None), slice(None), *tap)])
                     for where, tap in self.where]
        self.buffer, self.crop = buffer, buffer[self.crop_index]

    def describe(self) -> str:
        return "matmul, col2im " + ("tiles" if self.tiles else "sums")

    def pack(self, w: np.ndarray) -> np.ndarray:
        """(G, Mg * taps, Cg) contiguous for BLAS; (Mg * taps, Cg) for a single (batch, group)."""
        packed = np.ascontiguousarray(w.reshape(self.weights_shape).transpose(0, 2, 1))
        return packed[0] if self.single else packed


def _prepare_conv_transpose(ex) -> None:
    ex.state["conv_transpose"] = _ConvTransposePlan(ex) if _fits(ex.step) else None


@numpy_kernel("ConvTranspose", writes_outputs=True, prepare=_prepare_conv_transpose,
              describe=_describe("conv_transpose"))
def conv_transpose(ex, inputs, outputs):
    if "conv_transpose" not in ex.state:  # run without prepare (a direct call)
        _prepare_conv_transpose(ex)
    plan = ex.state["conv_transpose"]
    x, w, b = (list(inputs) + [None] * 3)[:3]
    out = outputs[0]
    if plan is None:
        np.copyto(out, _conv_transpose_any(ex, x, w, b), casting="unsafe")
        return
    if plan.shared:
        _bind_shared(ex, plan)  # zeroes the whole buffer
    np.matmul(plan.weights if plan.weights is not None else plan.pack(w), x.reshape(plan.x_shape), out=plan.cols)
    if plan.tiles:
        for dst, src in plan.taps:
            np.copyto(dst, src)
    else:
        if not plan.shared:
            plan.buffer.fill(0)
        for dst, src in plan.taps:
            np.add(dst, src, out=dst)
    if b is not None:
        np.add(plan.crop, b.reshape(plan.bias_shape), out=out)
    else:
        np.copyto(out, plan.crop)
    if plan.kind is not None:
        plan.kind(out, out)


def _conv_transpose_any(ex, x, w, b=None) -> np.ndarray:
    """Any ConvTranspose (integer or mixed dtypes, empty tensors), computed fresh on every run."""
    out, begin, _, strides, dilations, _ = conv_transpose_geometry(infer_context(ex))
    n, c, *sizes = x.shape
    group = ex.attrs["group"]
    mg, kernel = w.shape[1], w.shape[2:]
    m = mg * group
    weights = w.reshape(group, c // group, mg * math.prod(kernel)).transpose(0, 2, 1)
    cols = np.matmul(weights, x.reshape(n, group, c // group, math.prod(sizes)))
    cols = cols.reshape(n, m, *kernel, *sizes)
    full = [max((s - 1) * st + (k - 1) * d + 1, bg + o)
            for s, st, k, d, bg, o in zip(sizes, strides, kernel, dilations, begin, out, strict=True)]
    buffer = np.zeros((n, m, *full), dtype=np.result_type(x, w))
    for tap in np.ndindex(*kernel):
        where = tuple(slice(t * d, t * d + (s - 1) * st + 1, st)
                      for t, d, s, st in zip(tap, dilations, sizes, strides, strict=True))
        buffer[(slice(None), slice(None), *where)] += cols[(slice(None), slice(None), *tap)]
    y = buffer[(slice(None), slice(None), *(slice(bg, bg + o) for bg, o in zip(begin, out, strict=True)))]
    return finish(ex, np.ascontiguousarray(y), b)
