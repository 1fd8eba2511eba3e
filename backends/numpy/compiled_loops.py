"""The numpy backend's compiled loops (backends/numpy/compiled.py says when they run). Imported
only where numba is installed: it compiles each loop per dtype at its first call and caches the
machine code on disk (`cache=True`), so a later process loads it. The loops allocate nothing:
their work buffers are the caller's, made when it prepares (backends/numpy/conv.py)."""
import functools
import os

import numba
import numpy as np
from llvmlite import ir as llvm_ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# Indices as unsigned: numba then drops its negative-index wraparound, which keeps LLVM from
# vectorizing the row loops (a tap's multiply-add over a row: 0.75 -> 0.14 ns per element here).
index = np.uintp
# Output planes up to this many pixels of the depthwise convs depthwise_channel_blocks does not take
# (float64, channel multipliers past 1) run depthwise_channels_inner: 3x3 depthwise + Clip with 64
# pixels took it x0.25-0.74 of depthwise_phases's time, with 256 x1.0-1.5, with 784 and more x1.6-3.
CHANNELS_INNER_PIXELS = 100
GOMP_SPIN_TURNS = 10_000
# The process that imported the loops: a child forked from it runs them on one thread.
IMPORTED_BY = os.getpid()


@functools.cache
def threading_layer() -> str | None:
    """numba's threading layer when it starts a parallel region fast enough for a conv step (OpenMP
    or TBB: about 2 us here), else None (its workqueue: about 90 us). Loads the layer: numba picks
    TBB, then OpenMP, then the workqueue, unless NUMBA_THREADING_LAYER says."""
    from numba.np.ufunc import parallel

    if "OMP_WAIT_POLICY" not in os.environ:
        # GNU OpenMP's idle threads spin before they sleep: by default over 3 ms after a loop, a core
        # taken from whatever runs next; 10000 turns (about 0.5 ms here) still span the numpy steps
        # between two threaded loops. Read when libgomp loads: a process that loaded it before keeps its own.
        os.environ.setdefault("GOMP_SPINCOUNT", str(GOMP_SPIN_TURNS))
    parallel._launch_threads()
    layer = numba.threading_layer()
    return layer if layer in ("omp", "tbb") else None


@numba.njit(cache=True, nogil=True, boundscheck=False)
def activate(values, activation, low, high):
    """Relu (activation 1) or a clip to [low, high] (2) of a 1-D array in place; NaN stays NaN."""
    if activation == 1:
        for i in range(values.size):
            value = values[index(i)]
            values[index(i)] = 0 if value < 0 else value
    elif activation == 2:
        for i in range(values.size):
            value = values[index(i)]
            value = low if value < low else value
            values[index(i)] = high if value > high else value


@numba.njit(cache=True)
def phase_grid(x_shape, out_shape, kernel, strides, dilations, pads):
    """depthwise_phases's layout for (N, C, H, W) inputs, (N, M, OH, OW) outputs and (KH, KW)
    kernels: (cells_h, cells_w, the size of its phases buffer), each phase a cells_h x cells_w grid;
    its sums buffer holds out_h x cells_w."""
    height, width = x_shape[2], x_shape[3]
    out_h, out_w = out_shape[2], out_shape[3]
    padded_h = max(height + pads[0], (out_h - 1) * strides[0] + (kernel[0] - 1) * dilations[0] + 1)
    padded_w = max(width + pads[1], (out_w - 1) * strides[1] + (kernel[1] - 1) * dilations[1] + 1)
    cells_h, cells_w = -(-padded_h // strides[0]), -(-padded_w // strides[1])
    # The widened rows of the last tap of the last phase read up to its column shift past the grid.
    size = strides[0] * strides[1] * cells_h * cells_w + (kernel[1] - 1) * dilations[1] // strides[1] + 1
    return cells_h, cells_w, size


@numba.njit(cache=True, inline="always")
def tap_offset(ky, kx, strides, dilations, grid, cells_w):
    """Where tap (ky, kx)'s reads start in depthwise_phases's phases buffer."""
    down, right = ky * dilations[0], kx * dilations[1]
    stride_h, stride_w = strides[0], strides[1]
    return ((down % stride_h) * stride_w + right % stride_w) * grid + (down // stride_h) * cells_w \
        + right // stride_w


@intrinsic
def split_pairs(typingctx, line, line_at, phases, even_at, odd_at, lanes):
    """phases[even_at + j] = line[line_at + 2 * j] and phases[odd_at + j] = line[line_at + 2 * j + 1]
    for j < lanes (a literal): one vector load of 2 * lanes elements and two shuffles (AVX-512's
    vpermt2ps), where the loop numba wrote moved 0.3-0.44 ns an element against a copy's 0.09.
    line and phases: C-contiguous 1-D arrays of one dtype."""
    if not (isinstance(lanes, types.IntegerLiteral) and isinstance(line, types.Array)
            and isinstance(phases, types.Array) and line.layout == phases.layout == "C"
            and line.dtype == phases.dtype):
        return None
    width = lanes.literal_value

    def codegen(context, builder, signature, args):
        element = context.get_data_type(signature.args[0].dtype)
        alignment = signature.args[0].dtype.bitwidth // 8
        line_data = context.make_array(signature.args[0])(context, builder, args[0]).data
        phases_data = context.make_array(signature.args[2])(context, builder, args[2]).data
        pairs = llvm_ir.VectorType(element, 2 * width)
        half = llvm_ir.VectorType(element, width)
        values = builder.load(builder.bitcast(builder.gep(line_data, [args[1]]), pairs.as_pointer()), align=alignment)
        for parity, at in ((0, args[3]), (1, args[4])):
            picks = llvm_ir.Constant(llvm_ir.VectorType(llvm_ir.IntType(32), width),
                                     list(range(parity, 2 * width, 2)))
            builder.store(builder.shuffle_vector(values, values, picks),
                          builder.bitcast(builder.gep(phases_data, [at]), half.as_pointer()), align=alignment)
        return context.get_dummy_value()

    return types.none(line, line_at, phases, even_at, odd_at, lanes), codegen


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def scatter_pairs(source, row_at, width, phases, at, grid, pad_left):
    """One input row (width elements of the flat plane source from row_at) into its two column
    phases (stride 2; phase 1 starts grid past phase 0): in pairs of neighbouring columns, each
    pair to one cell of both phases, GRID_LANES pairs a step by vector shuffles (split_pairs)."""
    first = 0
    if pad_left % 2 == 1 and width > 0:  # input column 0 is padded column pad_left: phase 1
        phases[index(at + grid + pad_left // 2)] = source[index(row_at)]
        first = 1
    even = at + (first + pad_left) // 2  # where columns first, first + 1 go in phases 0 and 1
    odd = even + grid
    pairs = (width - first) // 2
    if pairs >= GRID_LANES:
        # The last step moves back to end at the last pair and writes a few cells again, the same values.
        for done in range(0, pairs, GRID_LANES):
            k = min(done, pairs - GRID_LANES)
            split_pairs(source, row_at + first + 2 * k, phases, even + k, odd + k, GRID_LANES)
    else:
        for k in range(pairs):
            phases[index(even + k)] = source[index(row_at + first + 2 * k)]
            phases[index(odd + k)] = source[index(row_at + first + 2 * k + 1)]
    if (width - first) % 2 == 1:
        phases[index(even + pairs)] = source[index(row_at + width - 1)]


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def fill_plane(source, plane_at, height, width, phases, phases_at, strides, pads, grid, cells_w):
    """One (H, W) channel, at plane_at in the flat source, into the stride phases of its
    zero-padded plane at phases_at in the flat phases (phase (a, b): the padded elements at (a +
    stride_h * i, b + stride_w * j), each a grid of cells_w columns, grid cells apart; one phase at
    stride 1). Writes the same interior cells on every call, so a padding zeroed once stays zero.
    Rows are read at offsets into the flat arrays: a view a row (numba counts its references) took
    as long as moving the row (0.33 against 0.13 ns an element at 144 x 56 x 56, stride 2)."""
    stride_h, stride_w = strides[0], strides[1]
    pad_top, pad_left = pads[0], pads[1]
    # Padded row iy + pad_top is row cell_row of phase row row_phase, kept without a division a row.
    row_phase, cell_row = pad_top % stride_h, pad_top // stride_h
    for iy in range(height):
        row_at = plane_at + iy * width
        at = phases_at + row_phase * stride_w * grid + cell_row * cells_w
        row_phase += 1
        if row_phase == stride_h:
            row_phase, cell_row = 0, cell_row + 1
        if stride_w == 1:
            for ix in range(width):
                phases[index(at + ix + pad_left)] = source[index(row_at + ix)]
        elif stride_w == 2:
            scatter_pairs(source, row_at, width, phases, at, grid, pad_left)
        else:  # phase b's cells j hold padded column b + stride_w * j: input column that - pad_left
            for b in range(stride_w):
                first = max(0, -(-(pad_left - b) // stride_w))
                end = -(-(width + pad_left - b) // stride_w)
                cell = at + b * grid
                for j in range(first, end):
                    phases[index(cell + j)] = source[index(row_at + j * stride_w + b - pad_left)]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def fill_phases(plane, phases, strides, pads, grid, cells_w):
    """fill_plane for one C-contiguous (H, W) channel into a 1-D phases buffer."""
    fill_plane(plane.reshape(-1), 0, plane.shape[0], plane.shape[1], phases, 0, strides, pads, grid, cells_w)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def fill_phase_rows(x, phases, strides, pads, first_cell_row, end_cell_row):
    """fill_plane for the rows of every plane of x (N, C, H, W) that land in phase cell rows
    first_cell_row to end_cell_row of phases (N, C, stride_h * stride_w, cells_h, cells_w): one
    band of fill_phase_bands. By offsets into the flat arrays, no view a plane (144 planes of 8 x
    8: 10.5 -> 4.6 us)."""
    height, width = x.shape[2], x.shape[3]
    cells = phases.shape[2] * phases.shape[3] * phases.shape[4]
    grid = phases.shape[3] * phases.shape[4]
    top = max(0, first_cell_row * strides[0] - pads[0])  # input rows whose padded row is in those cell rows
    bottom = min(height, end_cell_row * strides[0] - pads[0])
    if bottom <= top:
        return
    source, target = x.reshape(-1), phases.reshape(-1)
    for plane in range(x.shape[0] * x.shape[1]):
        fill_plane(source, plane * height * width + top * width, bottom - top, width, target, plane * cells, strides,
                   (pads[0] + top, pads[1]), grid, phases.shape[4])


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def fill_phase_bands(x, phases, strides, pads, workers):
    """fill_plane for every plane of x (N, C, H, W) into phases (N, C, stride_h * stride_w,
    cells_h, cells_w), conv_grid's input at strides past 1 and its padded plane at stride 1, on
    `workers` threads, each the rows of one band of the phases' cell rows: about the rows its
    share of conv_grid's chunks reads next (next_item), so that they are in its core's cache (a
    stem's phases filled by the calling thread took the loop on two threads from 90 to 199 us,
    /tmp/w/stem.py)."""
    cells_h = phases.shape[3]
    if workers == 1:
        fill_phase_rows(x, phases, strides, pads, 0, cells_h)
    else:
        for worker in numba.prange(workers):
            fill_phase_rows(x, phases, strides, pads, worker * cells_h // workers, (worker + 1) * cells_h // workers)


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def depthwise_phases(x, w, bias, residual, out, strides, dilations, pads, multiplier, activation, low, high,
                     phases, sums):
    """out[n, m] = sum over taps of w[m, 0, ky, kx] * x[n, m // multiplier] at the tap's strided,
    dilated, zero-padded offset; + bias[m]; + residual[n, m]; then Relu (activation 1) or a clip
    to [low, high] (2). bias or residual of size 0: none. NaN passes the clip as in numpy.

    Each channel is scattered into the stride phases of its zero-padded plane (phase (a, b): the
    padded elements at (a + stride_h * i, b + stride_w * j); one phase at stride 1), where every tap
    reads one phase with stride 1. The sums run over the output as rows of the phase grid's width,
    so each tap is one long vectorized multiply-add; the columns past the output's are dropped.
    3x3 kernels sum their nine taps in one pass over the sums, which reads and writes them once
    instead of nine times (a channel took x0.63-0.94 of the time of tap-by-tap passes here).
    phases and sums: buffers of phase_grid's sizes, phases zeroed once (the scatter writes the
    same interior cells on every call, so the padding stays zero)."""
    batch, channels_out, out_h, out_w = out.shape
    kernel_h, kernel_w = w.shape[2], w.shape[3]
    cells_h, cells_w, _ = phase_grid(x.shape, out.shape, (kernel_h, kernel_w), strides, dilations, pads)
    grid = cells_h * cells_w
    sums_size = out_h * cells_w
    has_bias, has_residual = bias.size > 0, residual.size > 0
    three_by_three = kernel_h == 3 and kernel_w == 3
    # The 3x3 taps' offsets (computed for any kernel, used for 3x3 only).
    b0 = tap_offset(0, 0, strides, dilations, grid, cells_w)
    b1 = tap_offset(0, 1, strides, dilations, grid, cells_w)
    b2 = tap_offset(0, 2, strides, dilations, grid, cells_w)
    b3 = tap_offset(1, 0, strides, dilations, grid, cells_w)
    b4 = tap_offset(1, 1, strides, dilations, grid, cells_w)
    b5 = tap_offset(1, 2, strides, dilations, grid, cells_w)
    b6 = tap_offset(2, 0, strides, dilations, grid, cells_w)
    b7 = tap_offset(2, 1, strides, dilations, grid, cells_w)
    b8 = tap_offset(2, 2, strides, dilations, grid, cells_w)
    for n in range(batch):
        for m in range(channels_out):
            fill_phases(x[n, m // multiplier], phases, strides, pads, grid, cells_w)
            start = bias[m] if has_bias else 0.0
            if three_by_three:
                taps = w[m, 0]
                w0, w1, w2 = taps[0, 0], taps[0, 1], taps[0, 2]
                w3, w4, w5 = taps[1, 0], taps[1, 1], taps[1, 2]
                w6, w7, w8 = taps[2, 0], taps[2, 1], taps[2, 2]
                for p in range(sums_size):
                    sums[index(p)] = start \
                        + (w0 * phases[index(b0 + p)] + w1 * phases[index(b1 + p)] + w2 * phases[index(b2 + p)]) \
                        + (w3 * phases[index(b3 + p)] + w4 * phases[index(b4 + p)] + w5 * phases[index(b5 + p)]) \
                        + (w6 * phases[index(b6 + p)] + w7 * phases[index(b7 + p)] + w8 * phases[index(b8 + p)])
            else:
                for p in range(sums_size):
                    sums[index(p)] = start
                for ky in range(kernel_h):
                    for kx in range(kernel_w):
                        base = tap_offset(ky, kx, strides, dilations, grid, cells_w)
                        weight = w[m, 0, ky, kx]
                        for p in range(sums_size):
                            sums[index(p)] += weight * phases[index(base + p)]
            for oy in range(out_h):
                target = out[n, m, oy]
                at = oy * cells_w
                if has_residual:
                    extra = residual[n, m, oy]
                    for ox in range(out_w):
                        target[index(ox)] = sums[index(at + ox)] + extra[index(ox)]
                else:
                    for ox in range(out_w):
                        target[index(ox)] = sums[index(at + ox)]
                activate(target, activation, low, high)


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def depthwise_channels_inner(x, w, bias, residual, out, strides, dilations, pads, multiplier, activation, low,
                             high, pixels, weights, sums):
    """depthwise_phases's result for small planes, where its loops over one channel's rows are a
    few elements long: the image is read into channels-last order once, and each output pixel's
    taps are multiply-adds over all its channels, one long loop each. Buffers: pixels (H, W, M),
    weights (KH, KW, M), sums (M,)."""
    batch, channels_out, out_h, out_w = out.shape
    height, width = x.shape[2], x.shape[3]
    kernel_h, kernel_w = w.shape[2], w.shape[3]
    stride_h, stride_w = strides[0], strides[1]
    dilation_h, dilation_w = dilations[0], dilations[1]
    pad_top, pad_left = pads[0], pads[1]
    for m in range(channels_out):
        for ky in range(kernel_h):
            for kx in range(kernel_w):
                weights[ky, kx, m] = w[m, 0, ky, kx]
    has_bias, has_residual = bias.size > 0, residual.size > 0
    # Flat arrays and offsets, no view a row or a tap (numba counts each view's references: x0.6 of
    # the time of zoo mobilenetv2@32's depthwise convs here).
    source, channels_last, taps = x.reshape(-1), pixels.reshape(-1), weights.reshape(-1)
    outputs, extras = out.reshape(-1), residual.reshape(-1)
    plane, out_plane = height * width, out_h * out_w
    for n in range(batch):
        for m in range(channels_out):
            at = (n * x.shape[1] + m // multiplier) * plane
            for p in range(plane):
                channels_last[index(p * channels_out + m)] = source[index(at + p)]
        for oy in range(out_h):
            for ox in range(out_w):
                for m in range(channels_out):
                    sums[index(m)] = bias[m] if has_bias else 0.0
                for ky in range(kernel_h):
                    iy = oy * stride_h + ky * dilation_h - pad_top
                    if iy < 0 or iy >= height:
                        continue
                    for kx in range(kernel_w):
                        ix = ox * stride_w + kx * dilation_w - pad_left
                        if ix < 0 or ix >= width:
                            continue
                        tap, pixel = (ky * kernel_w + kx) * channels_out, (iy * width + ix) * channels_out
                        for m in range(channels_out):
                            sums[index(m)] += taps[index(tap + m)] * channels_last[index(pixel + m)]
                at = n * channels_out * out_plane + oy * out_w + ox  # channel 0's output pixel
                if has_residual:
                    for m in range(channels_out):
                        sums[index(m)] += extras[index(at + m * out_plane)]
                activate(sums, activation, low, high)
                for m in range(channels_out):
                    outputs[index(at + m * out_plane)] = sums[index(m)]


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract", "reassoc"})
def layer_norm_rows(x, y, scale, bias, mean, inv_std, epsilon):
    """y[r] = (x[r] - its mean) / sqrt(its variance + epsilon) * scale + bias for each row of the
    2-D x (y may be x; bias of size 0: none); each row's mean and 1 / sqrt(variance + epsilon) into
    mean[r], inv_std[r]. The statistics in float64 (a float32 row far from zero, 50 +- 0.1, keeps
    its digits), the sums reassociated so that they vectorize; three passes over a row in cache
    where numpy's LayerNorm takes about fifteen calls."""
    rows, width = x.shape
    has_bias = bias.size > 0
    for r in range(rows):
        row, target = x[r], y[r]
        total = 0.0
        for i in range(width):
            total += np.float64(row[index(i)])
        centre = total / width
        squares = 0.0
        for i in range(width):
            deviation = row[index(i)] - centre
            squares += deviation * deviation
        factor = 1.0 / np.sqrt(squares / width + epsilon)
        mean[r], inv_std[r] = centre, factor
        if has_bias:
            for i in range(width):
                target[index(i)] = (row[index(i)] - centre) * factor * scale[index(i)] + bias[index(i)]
        else:
            for i in range(width):
                target[index(i)] = (row[index(i)] - centre) * factor * scale[index(i)]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def gelu_table(x, out, grid, value, slope):
    """x Phi(x) of the 1-D float32 x into out (may be x), Phi interpolated along the chords of the
    float32 table (grid, value, slope) that elementwise._gelu_float32 uses, in its order of
    operations, so that both give the same floats; NaN stays NaN, -inf gives NaN, +inf +inf."""
    step = grid[1] - grid[0]
    scale, shift = np.float32(1) / step, -grid[0] / step
    last = grid.size - 1
    for i in range(x.size):
        v = x[index(i)]
        t = v * scale + shift
        t = t if t >= 0 else np.float32(0)  # NaN too: its row is any row
        t = t if t <= last else np.float32(last)
        row = index(np.int64(t))
        d = v - grid[row]
        d = np.float32(0) if d < 0 else d
        d = step if d > step else d
        out[index(i)] = (slope[row] * d + value[row]) * v


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def attention_rows(q, k, v, mask, alpha, beta, scores, y):
    """y[b, h] = softmax(alpha * q[b, h] @ k[b, h] + beta * mask[b, h]) @ v[b, h], row by row, for
    q (B, H, Sq, D), k (B, H, D, Sk), v (B, H, Sk, Dv), a 4-D mask that broadcasts to (B, H, Sq, Sk)
    or of size 0 (none); scores: a float64 work row of Sk. Sums and the softmax in float64. A NaN
    score makes its row NaN and a row masked to -inf throughout is NaN, as numpy's max, exp and sum
    give."""
    batch, heads, rows, depth = q.shape
    keys, width = k.shape[3], v.shape[3]
    has_mask = mask.size > 0
    mask_batch, mask_heads, mask_rows, mask_keys = mask.shape
    for b in range(batch):
        for h in range(heads):
            mask_b, mask_h = (b if mask_batch > 1 else 0), (h if mask_heads > 1 else 0)
            for i in range(rows):
                mask_i = i if mask_rows > 1 else 0
                top = -np.inf
                for j in range(keys):
                    total = 0.0
                    for d in range(depth):
                        total += np.float64(q[b, h, i, d]) * k[b, h, d, j]
                    total *= alpha
                    if has_mask:
                        total += beta * mask[mask_b, mask_h, mask_i, j if mask_keys > 1 else 0]
                    scores[j] = total
                    if total > top or total != total:  # NaN stays the maximum
                        top = total
                total = 0.0
                for j in range(keys):
                    scores[j] = np.exp(scores[j] - top)
                    total += scores[j]
                for c in range(width):
                    value = 0.0
                    for j in range(keys):
                        value += scores[j] * v[b, h, j, c]
                    y[b, h, i, c] = value / total


# The direct conv's register block: DIRECT_PIXELS output pixels x DIRECT_CHANNELS output channels
# summed in a stack array that LLVM keeps in registers (4 x 16 float32: four 512-bit accumulators).
# 8 x 16 and 6 x 16 were left in memory (2-4 GFLOP/s); 8 x 8 ran 40 and 4 x 8 46 GFLOP/s against
# 4 x 16's 80-97 on a 7x7/2 stem and 3x3 convs of 16 and 32 channels (/tmp/w/direct.py).
DIRECT_PIXELS = 4
DIRECT_CHANNELS = 16
DIRECT_BLOCK = DIRECT_PIXELS * DIRECT_CHANNELS
# Output pixels per tile: a tile's sums wait in `tile` (pixel-major) until the tile's block of
# channels is done, then go to the output's rows, a contiguous store per channel.
DIRECT_TILE = 64


@intrinsic
def stack_array(typingctx, size, dtype):
    """A pointer to `size` (a literal) elements of dtype on the stack: allocated in the function's
    entry block, where LLVM promotes an array indexed by constants (fully unrolled loops) to
    registers."""
    if not isinstance(size, types.IntegerLiteral):
        return None
    item = dtype.dtype

    def codegen(context, builder, signature, args):
        element = context.get_data_type(item)
        with builder.goto_entry_block():
            array = builder.alloca(llvm_ir.ArrayType(element, size.literal_value))
        return builder.bitcast(array, element.as_pointer())

    return types.CPointer(item)(size, dtype), codegen


@numba.njit(cache=True, inline="always")
def activate_block(sums, size, activation, low, high):
    """activate() on a register block of stack sums, inlined into its loop (numba's IR), where the
    unrolled block stays in registers."""
    if activation == 1:
        for k in range(size):
            sums[k] = 0 if sums[k] < 0 else sums[k]
    elif activation == 2:
        for k in range(size):
            value = low if sums[k] < low else sums[k]
            sums[k] = high if value > high else value


@intrinsic
def claim_at(typingctx, counters, at):
    """counters[at] (an int64 array), then one added to it, as one atomic step."""
    if not (isinstance(counters, types.Array) and counters.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", builder.gep(array.data, [args[1]]), context.get_constant(types.int64, 1),
                                  "monotonic")

    return types.int64(counters, at), codegen


# A threaded loop's items (tiles, chunks, planes, blocks) fall into one contiguous share per
# worker, claimed from its own counter (counters[worker * COUNTER_STRIDE], each on its own cache
# line); a worker done with its share goes on with what is left of the next ones'. For batch 1 and
# one group a conv's share is a band of output rows, so the conv after it finds the rows it reads
# in the same core's cache: chunks claimed in turn from one counter left half of every input on
# the other core (zoo resnet@224 on two threads x0.93, mobilenetv2 x0.94 with shares; a 3x3 / 2
# stem after its phase fill on the main thread: 199 us against 90 without the fill, 134 on one
# thread, /tmp/w/stem.py).
COUNTER_STRIDE = 8


# The loops' workers call their item function with np.int64 indices on one thread and on many:
# a literal 0 and the prange index are other types, and numba compiled each loop twice (conv_direct
# and conv_grid 2.5 -> 5 s on a machine's first run, /tmp/w/ctime1.py).
@numba.njit(cache=True, nogil=True)
def next_item(counters, worker, workers, items, turn):
    """(the next of `items` work items for this worker, the share it came from: turn 0 its own,
    turn t the share of worker + t); items when none is left."""
    share = -(-items // workers)
    while turn < workers:
        owner = (worker + turn) % workers
        item = owner * share + claim_at(counters, owner * COUNTER_STRIDE)
        if item < min(items, (owner + 1) * share):
            return item, turn
        turn += 1
    return items, turn


@numba.njit(cache=True, inline="always")
def reset_counters(counters, workers):
    for worker in range(workers):
        counters[worker * COUNTER_STRIDE] = 0


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def direct_tiles(x, weights, bias, residual, out, tap_offsets, pixel_offsets, activation, low, high, tile, counter,
                 worker, workers):
    """conv_direct's work on worker `worker` of `workers`: tiles of DIRECT_TILE output pixels of one
    group of one batch entry, its share first (next_item), until none is left."""
    batch, channels_out, pixels = out.shape
    groups, blocks, taps, _ = weights.shape
    group_size = x.shape[1] // groups
    mg = channels_out // groups
    has_residual = residual.size > 0
    per_plane = -(-pixels // DIRECT_TILE)
    sums = numba.carray(stack_array(DIRECT_BLOCK, x.dtype), DIRECT_BLOCK)
    offsets = numba.carray(stack_array(DIRECT_PIXELS, np.intp), DIRECT_PIXELS)
    items = batch * groups * per_plane
    item, turn = next_item(counter, worker, workers, items, 0)
    while item < items:
        n, g = item // (groups * per_plane), item // per_plane % groups
        first = item % per_plane * DIRECT_TILE
        item, turn = next_item(counter, worker, workers, items, turn)
        source = x[n]
        base = g * group_size
        count = min(DIRECT_TILE, pixels - first)
        for block in range(blocks):
            w = weights[g, block]
            bias_at = (g * blocks + block) * DIRECT_CHANNELS
            for step in range(0, count, DIRECT_PIXELS):
                for j in range(DIRECT_PIXELS):  # past the last pixel: the last again
                    offsets[j] = base + pixel_offsets[index(min(first + step + j, pixels - 1))]
                for j in range(DIRECT_PIXELS):
                    for c in range(DIRECT_CHANNELS):
                        sums[j * DIRECT_CHANNELS + c] = bias[index(bias_at + c)]
                for t in range(taps):
                    at = tap_offsets[index(t)]
                    for j in range(DIRECT_PIXELS):
                        value = source[index(at + offsets[j])]
                        for c in range(DIRECT_CHANNELS):
                            sums[j * DIRECT_CHANNELS + c] += value * w[index(t), index(c)]
                for i in range(DIRECT_BLOCK):
                    tile[index(step * DIRECT_CHANNELS + i)] = sums[i]
            for c in range(min(DIRECT_CHANNELS, mg - block * DIRECT_CHANNELS)):
                m = g * mg + block * DIRECT_CHANNELS + c
                row = out[n, m]
                for p in range(count):
                    value = tile[index(p * DIRECT_CHANNELS + c)]
                    if has_residual:
                        value += residual[n, m, index(first + p)]
                    if activation == 1:
                        value = 0 if value < 0 else value
                    elif activation == 2:
                        value = low if value < low else value
                        value = high if value > high else value
                    row[index(first + p)] = value


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def conv_direct(x, weights, bias, residual, out, tap_offsets, pixel_offsets, activation, low, high, tiles, counter,
                workers):
    """A grouped conv from its zero-padded input, without im2col: out[n, g * mg + m, p] = bias +
    sum over taps t of weights[g, m // 16, t, m % 16] * x[n, g * group_size + tap_offsets[t] +
    pixel_offsets[p]] (+ residual[n, g * mg + m, p]), then Relu (activation 1) or a clip to
    [low, high] (2). x: (N, C * padded plane) flat per batch; weights: (G, blocks, taps, 16),
    channels past mg zero; bias: (G * blocks * 16,); residual: (N, M, P) or size 0; out: (N, M, P);
    tiles: (workers, DIRECT_TILE * DIRECT_CHANNELS); counter: work_counter's. NaN passes the clip as in
    numpy. `workers` threads share the tiles of output pixels (threads_for says how many may run).

    Each step sums 4 pixels x 16 channels over every tap: a tap costs one load of 16 weights,
    four broadcast inputs and four 16-wide multiply-adds, all in registers. Needs the SLP
    vectorizer (vectorized_loop compiles it so)."""
    reset_counters(counter, workers)
    if workers == 1:
        direct_tiles(x, weights, bias, residual, out, tap_offsets, pixel_offsets, activation, low, high, tiles[0],
                     counter, np.int64(0), workers)
    else:
        for worker in numba.prange(workers):
            direct_tiles(x, weights, bias, residual, out, tap_offsets, pixel_offsets, activation, low, high,
                         tiles[worker], counter, np.int64(worker), workers)


def vector_lanes() -> int:
    """float32 lanes of this CPU's widest vector registers: 16 with AVX-512 (32 registers), else 8
    (AVX2's 16, NEON's 32 of 4 lanes, two per vector)."""
    from llvmlite import binding

    try:
        features = binding.get_host_cpu_features().flatten().split(",")
    except RuntimeError:  # llvmlite knows no features for this host
        return 8
    return 16 if "+avx512f" in features else 8


# conv_grid's register block: GRID_CHANNELS output channels x GRID_LANES neighbouring grid pixels,
# GRID_CHANNELS vector accumulators (8 of 32 registers with AVX-512, of 16 with AVX2). Against
# the SLP-vectorized 4 x 16 block it replaces, one thread, /tmp/w/mk.py (us): 3x3 16 -> 16 at
# 56x56 156 vs 167, 32 -> 32 at 28x28 149 vs 157, 64 -> 64 at 56x56 2242 vs 2734; 8 x 32 gained
# no more, 12 x 32 and 6 x 48 lost (a block's channels past the conv's are zeros).
GRID_CHANNELS = 8
GRID_LANES = vector_lanes()
GRID_BLOCK = GRID_CHANNELS * GRID_LANES
# conv_grid's threads claim runs of this many grid pixels (a chunk).
GRID_CHUNK = 128
# Output planes of at least this many pixels take a chunk's steps block by block (8 planes
# written 128 pixels at a time), smaller ones step by step (each step's input rows reused from L1
# by every block). One thread, /tmp/w/order.py, blocks first / steps first: 1x1 16 -> 96 at
# 112x112 x0.61-0.85, 16 -> 16 x0.87-1.02, 3x3 16 -> 32 x0.88, other 3x3 at 112 x1.00-1.02; at
# 56x56 and 28x28 x0.89-1.16 (24 -> 144 at 56 x0.89-0.94, 32 -> 192 at 28 x1.13). Whole models
# against steps first everywhere (/tmp/w/abr.py, 4-7 rounds): mobilenetv2 x0.92-0.95 on two
# threads, x1.02-1.04 on one (its stem alone x0.92); unet x0.95-0.97 on one.
GRID_BLOCKS_OUTER_PIXELS = 8192
# Convs whose grid holds at least this many pixels (GRID_LANES or more) take conv_grid, the rest
# conv_direct: read by the plans only (tests move it), never inside a loop.
GRID_LOOP_PIXELS = GRID_LANES


def _splat(builder, value, width: int):
    """An LLVM vector of `width` copies of a scalar value."""
    vector = llvm_ir.VectorType(value.type, width)
    undefined = llvm_ir.Constant(vector, llvm_ir.Undefined)
    zeros = llvm_ir.Constant(llvm_ir.VectorType(llvm_ir.IntType(32), width), [0] * width)
    return builder.shuffle_vector(builder.insert_element(undefined, value, llvm_ir.IntType(32)(0)), undefined, zeros)


def _lane_mask(builder, width: int, low, high):
    """The <width x i1> mask of lanes low <= lane < high (i64 values)."""
    lanes = llvm_ir.Constant(llvm_ir.VectorType(llvm_ir.IntType(64), width), list(range(width)))
    return builder.and_(builder.icmp_signed(">=", lanes, _splat(builder, low, width)),
                        builder.icmp_signed("<", lanes, _splat(builder, high, width)))


def _prefix_mask(builder, width: int, count):
    """The <width x i1> mask of lanes j < count (an i64 from 0 to width): an integer's low bits."""
    i64 = llvm_ir.IntType(64)
    bits = builder.sub(builder.shl(i64(1), count), i64(1))
    return builder.bitcast(builder.trunc(bits, llvm_ir.IntType(width)), llvm_ir.VectorType(llvm_ir.IntType(1), width))


def _masked_access(builder, width: int):
    """LLVM's masked load and store of <width x float> (AVX-512 and AVX2 masked moves)."""
    vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
    pointer, mask = vector.as_pointer(), llvm_ir.VectorType(llvm_ir.IntType(1), width)
    alignment = llvm_ir.IntType(32)
    load = cgutils.get_or_insert_function(
        builder.module, llvm_ir.FunctionType(vector, [pointer, alignment, mask, vector]),
        f"llvm.masked.load.v{width}f32.p0v{width}f32")
    store = cgutils.get_or_insert_function(
        builder.module, llvm_ir.FunctionType(llvm_ir.VoidType(), [vector, pointer, alignment, mask]),
        f"llvm.masked.store.v{width}f32.p0v{width}f32")
    return load, store


def _plus_residual(builder, value, residual, at, width: int, mask=None):
    """value + residual[at:at + width] (masked to `mask` where given) where the residual array has
    elements, else value: a phi of both, one branch."""
    i64 = llvm_ir.IntType(64)
    vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
    has_residual = builder.icmp_signed(">", builder.extract_value(residual.shape, 0), i64(0))
    before = builder.block
    with builder.if_then(has_residual):
        # not inbounds: a masked load's lanes outside the array load nothing
        address = builder.bitcast(builder.gep(residual.data, [at], inbounds=mask is None), vector.as_pointer())
        if mask is None:
            extra = builder.load(address, align=4)
        else:
            load, _ = _masked_access(builder, width)
            extra = builder.call(load, [address, llvm_ir.IntType(32)(4), mask, llvm_ir.Constant(vector, [0.0] * width)])
        summed, with_residual = builder.fadd(value, extra), builder.block
    merged = builder.phi(vector)
    merged.add_incoming(value, before)
    merged.add_incoming(summed, with_residual)
    return merged


def _activated(builder, value, activation, low, high, width: int):
    """A float vector after Relu (activation 1: x < 0 ? 0 : x) or a clip to [low, high] (2), by
    comparisons that keep NaN (numpy's); other activations leave it."""
    i64 = llvm_ir.IntType(64)
    zero, floor, ceiling = (_splat(builder, v, width) for v in (llvm_ir.Constant(llvm_ir.FloatType(), 0.0), low, high))
    rectified = builder.select(builder.fcmp_ordered("<", value, zero), zero, value)
    clipped = builder.select(builder.fcmp_ordered("<", value, floor), floor, value)
    clipped = builder.select(builder.fcmp_ordered(">", clipped, ceiling), ceiling, clipped)
    relu, clip = builder.icmp_signed("==", activation, i64(1)), builder.icmp_signed("==", activation, i64(2))
    return builder.select(relu, rectified, builder.select(clip, clipped, value))


def _tap_accumulators(context, builder, signature, args, count: int, width: int) -> list:
    """The LLVM values of tap_sums's `count` accumulators of `width` floats after every tap (its
    arguments 0-6 are the intrinsics' first seven)."""
    arrays = {k: context.make_array(signature.args[k])(context, builder, args[k]) for k in (0, 2, 3, 5)}
    source_data, offsets_data, weights_data, bias_data = (arrays[k].data for k in (0, 2, 3, 5))
    taps = builder.extract_value(arrays[2].shape, 0)
    at, w_at, bias_at = args[1], args[4], args[6]
    i64 = llvm_ir.IntType(64)
    vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
    fma = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vector, [vector] * 3),
                                         f"llvm.fma.v{width}f32")
    # Accumulators in stack cells: LLVM promotes them to registers (SROA).
    cells = [cgutils.alloca_once(builder, vector) for _ in range(count)]
    for i, cell in enumerate(cells):
        builder.store(_splat(builder, builder.load(builder.gep(bias_data, [builder.add(bias_at, i64(i))])), width),
                      cell)
    weights_at = builder.gep(weights_data, [w_at])
    with cgutils.for_range(builder, taps) as loop:
        tap = loop.index
        offset = builder.load(builder.gep(offsets_data, [tap]))
        row = builder.gep(source_data, [builder.add(at, offset)])
        values = builder.load(builder.bitcast(row, vector.as_pointer()), align=4)
        tap_weights = builder.gep(weights_at, [builder.mul(tap, i64(count))])
        for i, cell in enumerate(cells):
            weight = _splat(builder, builder.load(builder.gep(tap_weights, [i64(i)])), width)
            builder.store(builder.call(fma, [weight, values, builder.load(cell)]), cell)
    return [builder.load(cell) for cell in cells]


@intrinsic
def tap_sums(typingctx, source, at, tap_offsets, weights, w_at, bias, bias_at, sums, channels, lanes):
    """sums[i * lanes + j] = bias[bias_at + i] + sum over taps t of weights[w_at + t * channels + i]
    * source[at + tap_offsets[t] + j], for i < channels and j < lanes (literals): the taps loop of
    conv_grid as explicit vectors, `channels` accumulators of `lanes` floats in registers, one
    vector load of the source row and one fused multiply-add per channel (its weight broadcast
    from memory) per tap. Written as LLVM vectors because LLVM's SLP vectorizer gave up on numba
    loops with larger blocks (22-62 ms instead of 0.58 for a 7x7 / 2 stem). sums: a 1-D array of
    channels * lanes."""
    if not (isinstance(channels, types.IntegerLiteral) and isinstance(lanes, types.IntegerLiteral)):
        return None
    count, width = channels.literal_value, lanes.literal_value

    def codegen(context, builder, signature, args):
        sums_data = context.make_array(signature.args[7])(context, builder, args[7]).data
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        for i, value in enumerate(_tap_accumulators(context, builder, signature, args, count, width)):
            target = builder.bitcast(builder.gep(sums_data, [llvm_ir.IntType(64)(i * width)]), vector.as_pointer())
            builder.store(value, target, align=4)
        return context.get_dummy_value()

    return types.none(source, at, tap_offsets, weights, w_at, bias, bias_at, sums, channels, lanes), codegen


@intrinsic
def tap_outputs(typingctx, source, at, tap_offsets, weights, w_at, bias, bias_at, residual, out, out_at, pixels,
                count, activation, low, high, channels, lanes):
    """tap_sums's sums for channels i < count (of `channels`, a literal) moved straight from
    registers: out[out_at + i * pixels + j] = activation(sums + residual[out_at + i * pixels + j])
    for j < lanes, the residual where it has elements, Relu (activation 1) or a clip to [low,
    high] (2) with NaN kept (numpy's). A step whose sums go through memory (tap_sums, then the
    activation and the moves) spent about a quarter of a 1x1 16 -> 96 conv's time there."""
    if not (isinstance(channels, types.IntegerLiteral) and isinstance(lanes, types.IntegerLiteral)):
        return None
    total, width = channels.literal_value, lanes.literal_value

    def codegen(context, builder, signature, args):
        residual = context.make_array(signature.args[7])(context, builder, args[7])
        out_data = context.make_array(signature.args[8])(context, builder, args[8]).data
        out_at, pixels, count, activation, low, high = args[9:15]
        i64 = llvm_ir.IntType(64)
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        values = _tap_accumulators(context, builder, signature, args, total, width)
        for i, value in enumerate(values):
            with builder.if_then(builder.icmp_signed("<", i64(i), count), likely=True):
                at = builder.add(out_at, builder.mul(i64(i), pixels))
                value = _activated(builder, _plus_residual(builder, value, residual, at, width), activation, low,
                                   high, width)
                builder.store(value, builder.bitcast(builder.gep(out_data, [at]), vector.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.none(source, at, tap_offsets, weights, w_at, bias, bias_at, residual, out, out_at, pixels, count,
                      activation, low, high, channels, lanes), codegen


@intrinsic
def move_lanes(typingctx, sums, sums_at, array, base, low, high, lanes, add):
    """For lanes low <= j < high of the vector at sums[sums_at] (`lanes` floats, a literal): with
    add (a literal True) sums[sums_at + j] += array[base + j], else array[base + j] =
    sums[sums_at + j]; the other lanes' elements of array are not touched (AVX-512's masked loads
    and stores). base may be negative where low is past it."""
    if not (isinstance(lanes, types.IntegerLiteral) and isinstance(add, types.BooleanLiteral)):
        return None
    width, adding = lanes.literal_value, add.literal_value

    def codegen(context, builder, signature, args):
        sums_data = context.make_array(signature.args[0])(context, builder, args[0]).data
        array_data = context.make_array(signature.args[2])(context, builder, args[2]).data
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        pointer = vector.as_pointer()
        mask = _lane_mask(builder, width, args[4], args[5])
        values_at = builder.bitcast(builder.gep(sums_data, [args[1]]), pointer)
        # not inbounds: base + j is outside the array for masked-off lanes j
        array_at = builder.bitcast(builder.gep(array_data, [args[3]], inbounds=False), pointer)
        values = builder.load(values_at, align=4)
        alignment = llvm_ir.IntType(32)(4)
        load, store = _masked_access(builder, width)
        if adding:
            extra = builder.call(load, [array_at, alignment, mask, llvm_ir.Constant(vector, [0.0] * width)])
            builder.store(builder.fadd(values, extra), values_at, align=4)
        else:
            builder.call(store, [values, array_at, alignment, mask])
        return context.get_dummy_value()

    return types.none(sums, sums_at, array, base, low, high, lanes, add), codegen


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def grid_segments(sums, residual, out, plane_at, pixels, count, first, cells_w, out_w, has_residual, activation, low,
                  high):
    """The end of a conv_grid step that meets several grid rows or their columns past out_w: the
    lanes of each row's output pixels (its column 0 at lane row * cells_w - first) into the flat
    out, channel i's plane at plane_at + i * pixels, by masked vector loads and stores."""
    rows = range(first // cells_w, (first + GRID_LANES - 1) // cells_w + 1)
    if has_residual:
        for row in rows:
            lane = row * cells_w - first
            for i in range(count):
                move_lanes(sums, i * GRID_LANES, residual, plane_at + i * pixels + row * out_w - lane, max(lane, 0),
                           min(GRID_LANES, lane + out_w), GRID_LANES, True)
    activate_block(sums, GRID_BLOCK, activation, low, high)
    for row in rows:
        lane = row * cells_w - first
        for i in range(count):
            move_lanes(sums, i * GRID_LANES, out, plane_at + i * pixels + row * out_w - lane, max(lane, 0),
                       min(GRID_LANES, lane + out_w), GRID_LANES, False)


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def grid_chunks(x, weights, bias, residual, out, tap_offsets, cells_w, out_w, activation, low, high, counter, worker,
                workers):
    """conv_grid's work on worker `worker` of `workers`: chunks of GRID_CHUNK grid pixels (of one
    group of one batch entry), its share first (next_item), until none is left. Output
    and residual planes are reached by offsets into the flat arrays: no view a step (numba counts
    each view's references). Where the output planes hold GRID_BLOCKS_OUTER_PIXELS or more, a
    chunk runs its steps for one block of channels after another, else every block for one step
    after another (the same sums either way)."""
    batch, channels_out, pixels = out.shape
    groups, blocks, taps, _ = weights.shape
    group_size = x.shape[1] // groups
    mg = channels_out // groups
    out_h = pixels // out_w
    total = (out_h - 1) * cells_w + out_w  # grid pixels up to the last output pixel
    chunks = -(-total // GRID_CHUNK)
    has_residual = residual.size > 0
    blocks_outer = pixels >= GRID_BLOCKS_OUTER_PIXELS
    source, outputs, extras = x.reshape(-1), out.reshape(-1), residual.reshape(-1)
    sums = numba.carray(stack_array(GRID_BLOCK, x.dtype), GRID_BLOCK)
    items = batch * groups * chunks
    item, turn = next_item(counter, worker, workers, items, 0)
    while item < items:
        n, g, chunk = item // (groups * chunks), item // chunks % groups, item % chunks
        item, turn = next_item(counter, worker, workers, items, turn)
        for outer in range(blocks if blocks_outer else 1):
            for done in range(chunk * GRID_CHUNK, min((chunk + 1) * GRID_CHUNK, total), GRID_LANES):
                first = min(done, total - GRID_LANES)  # the step's first grid pixel
                for inner in range(1 if blocks_outer else blocks):
                    block = outer + inner
                    w_at = (g * blocks + block) * GRID_CHANNELS  # the block's first bias, its weights taps x that
                    at = n * x.shape[1] + g * group_size + first
                    count = min(GRID_CHANNELS, mg - block * GRID_CHANNELS)
                    plane_at = (n * channels_out + g * mg + block * GRID_CHANNELS) * pixels  # channel m0's plane
                    row = first // cells_w
                    column = first - row * cells_w
                    if column + GRID_LANES <= out_w:
                        # The whole step in one row's output pixels (most steps): stored from registers.
                        tap_outputs(source, at, tap_offsets, weights, w_at * taps, bias, w_at, extras, outputs,
                                    plane_at + row * out_w + column, pixels, count, activation, low, high,
                                    GRID_CHANNELS, GRID_LANES)
                    else:
                        tap_sums(source, at, tap_offsets, weights, w_at * taps, bias, w_at, sums, GRID_CHANNELS,
                                 GRID_LANES)
                        grid_segments(sums, extras, outputs, plane_at, pixels, count, first, cells_w, out_w,
                                      has_residual, activation, low, high)


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def conv_grid(x, weights, bias, residual, out, tap_offsets, cells_w, out_w, activation, low, high, counter, workers):
    """A grouped conv from its input laid out as a grid of cells_w columns per row, where output
    pixel (oy, ox) of tap t reads x[n, g * group_size + tap_offsets[t] + oy * cells_w + ox]:
    out[n, g * mg + m, oy * out_w + ox] = bias + sum over taps t of weights[g, m // 8, t, m % 8]
    * that (+ residual), then Relu (activation 1) or a clip to [low, high] (2). The plan lays the
    input out so: the zero-padded plane at stride 1 (cells_w its width), a strided conv's
    stride phases (phase_grid's), a 1x1 conv's plane as one row. x: (N, C * plane) flat per batch;
    weights: (G, blocks, taps, GRID_CHANNELS), channels past mg zero; bias: (G * blocks *
    GRID_CHANNELS,); residual: (N, M, P) or size 0; out: (N, M, P), sharing no memory with x or
    residual; counter: work_counter's. NaN passes the clip as in numpy. `workers` threads share the
    chunks of the grid.

    Each step sums GRID_CHANNELS channels x GRID_LANES consecutive grid pixels over every tap in
    registers (tap_sums), then stores the pixels that are output pixels: the grid's columns past
    out_w only pad its rows (a row of out_w pixels costs cells_w / out_w, 58 / 56 at ResNet's
    3x3 stride-1 56x56, where steps along each row cost 64 / 56). The last step moves back to end
    at the grid's last output pixel and stores a few pixels again, the same values."""
    reset_counters(counter, workers)
    if workers == 1:
        grid_chunks(x, weights, bias, residual, out, tap_offsets, cells_w, out_w, activation, low, high, counter,
                    np.int64(0), workers)
    else:
        for worker in numba.prange(workers):
            grid_chunks(x, weights, bias, residual, out, tap_offsets, cells_w, out_w, activation, low, high, counter,
                        np.int64(worker), workers)


# depthwise_rows's register block: DEPTHWISE_ROWS output rows x DEPTHWISE_PIXELS pixels of one channel.
DEPTHWISE_ROWS = 4
DEPTHWISE_PIXELS = 16
DEPTHWISE_BLOCK = DEPTHWISE_ROWS * DEPTHWISE_PIXELS
# float32 depthwise convs with output rows at least this wide (DEPTHWISE_PIXELS or more) and 4+ rows
# take depthwise_rows: read by the plans only (tests move it), never inside a loop.
DEPTHWISE_ROWS_LOOP_WIDTH = DEPTHWISE_PIXELS


@intrinsic
def plane_rows(typingctx, source, plane_at, height, plane_width, weights, w_at, start, first_row, first_column,
               pad_top, pad_left, residual, out, out_at, out_w, activation, low, high, stride, rows, lanes):
    """A 3x3, undilated depthwise conv's `rows` output rows x `lanes` pixels (literals) of one
    channel at stride 1 or 2 (a literal) from output (first_row, first_column), summed in
    registers straight from the input plane (height x plane_width at plane_at in the flat source;
    weights[w_at:w_at + 9]; start: the bias). Each input row the block reads is loaded once, masked
    to the plane: at stride 1 three vectors from its columns first_column - pad_left + kx, one a
    tap; at stride 2 two pairs of vectors from columns 2 * first_column - pad_left and 2 more, whose
    even and odd lanes (two-vector shuffles) are the three taps. A row outside the plane adds
    nothing. The sums plus the residual (its elements at out's indices, where it has any), Relu
    (activation 1) or a clip to [low, high] (2), NaN kept, go to out[out_at + r * out_w + j]
    (out_at: output (first_row, first_column)'s index). No padded plane or stride phases: their
    fill moved every input element once more (one thread, /tmp/w/dwbig.py, against
    depthwise_rows through phases: 96 x 112 x 112 / 2 x0.64, 144 x 56 x 56 / 2 x0.57, 96 x 32 x 32 /
    2 x0.19; stride 1 against its padded plane, /tmp/w/dwrows1.py: 144 x 56 x 56 x0.88, 192 x 28
    x 28 x0.76, 32 x 112 x 112 x0.87, on two threads x0.72-0.90)."""
    literals = all(isinstance(v, types.IntegerLiteral) for v in (stride, rows, lanes))
    if not literals or stride.literal_value not in (1, 2):
        return None
    step, count, width = stride.literal_value, rows.literal_value, lanes.literal_value

    def codegen(context, builder, signature, args):
        source_data = context.make_array(signature.args[0])(context, builder, args[0]).data
        weights_data = context.make_array(signature.args[4])(context, builder, args[4]).data
        residual = context.make_array(signature.args[11])(context, builder, args[11])
        out_data = context.make_array(signature.args[12])(context, builder, args[12]).data
        plane_at, height, plane_w, w_at, start = args[1], args[2], args[3], args[5], args[6]
        first_row, first_column, pad_top, pad_left = args[7:11]
        out_at, out_w, activation, low, high = args[13:18]
        i64 = llvm_ir.IntType(64)
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        pointer, alignment = vector.as_pointer(), llvm_ir.IntType(32)(4)
        zeros = llvm_ir.Constant(vector, [0.0] * width)
        load, _ = _masked_access(builder, width)
        fma = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vector, [vector] * 3),
                                             f"llvm.fma.v{width}f32")
        picks = llvm_ir.VectorType(llvm_ir.IntType(32), width)
        even = llvm_ir.Constant(picks, list(range(0, 2 * width, 2)))
        odd = llvm_ir.Constant(picks, list(range(1, 2 * width, 2)))
        taps = [_splat(builder, builder.load(builder.gep(weights_data, [builder.add(w_at, i64(t))])), width)
                for t in range(9)]
        sums = [cgutils.alloca_once_value(builder, _splat(builder, start, width)) for _ in range(count)]
        # The first column a row's loads start at; lanes inside the plane only.
        column = builder.sub(builder.mul(first_column, i64(step)), pad_left)

        def lane_mask(shift):
            first = builder.add(column, i64(shift))
            return _lane_mask(builder, width, builder.sub(i64(0), first), builder.sub(plane_w, first))

        # (shift from column, mask) of each vector a row loads: the taps at stride 1, the pairs' halves at 2
        loads = [(kx, lane_mask(kx)) for kx in range(3)] if step == 1 else \
            [(shift + half * width, lane_mask(shift + half * width)) for shift in (0, 2) for half in (0, 1)]
        top = builder.sub(builder.mul(first_row, i64(step)), pad_top)
        for t in range(step * (count - 1) + 3):  # input rows step * first_row - pad_top + t
            row = builder.add(top, i64(t))
            inside = builder.and_(builder.icmp_signed(">=", row, i64(0)), builder.icmp_signed("<", row, height))
            with builder.if_then(inside):
                row_at = builder.add(plane_at, builder.mul(row, plane_w))
                vectors = []
                for shift, mask in loads:
                    # not inbounds: lanes left of column 0 or past the plane load nothing
                    at = builder.add(row_at, builder.add(column, i64(shift)))
                    at = builder.gep(source_data, [at], inbounds=False)
                    vectors.append(builder.call(load, [builder.bitcast(at, pointer), alignment, mask, zeros]))
                if step == 1:
                    columns = vectors  # taps kx = 0, 1, 2
                else:
                    columns = (builder.shuffle_vector(vectors[0], vectors[1], even),
                               builder.shuffle_vector(vectors[0], vectors[1], odd),
                               builder.shuffle_vector(vectors[2], vectors[3], even))
                for r in range(count):
                    ky = t - step * r
                    if 0 <= ky <= 2:
                        value = builder.load(sums[r])
                        for kx in range(3):
                            value = builder.call(fma, [taps[3 * ky + kx], columns[kx], value])
                        builder.store(value, sums[r])
        for r in range(count):
            at = builder.add(out_at, builder.mul(i64(r), out_w))
            value = _plus_residual(builder, builder.load(sums[r]), residual, at, width)
            value = _activated(builder, value, activation, low, high, width)
            builder.store(value, builder.bitcast(builder.gep(out_data, [at]), pointer), align=4)
        return context.get_dummy_value()

    return types.none(source, plane_at, height, plane_width, weights, w_at, start, first_row, first_column, pad_top,
                      pad_left, residual, out, out_at, out_w, activation, low, high, stride, rows, lanes), codegen


@numba.njit(cache=True, nogil=True, boundscheck=False)
def plane_blocks(source, plane_at, height, width, weights, w_at, start, pads, residual, out, out_at, out_h, out_w,
                 activation, low, high, stride):
    """One channel's output plane by plane_rows's blocks of DEPTHWISE_ROWS rows x DEPTHWISE_PIXELS
    pixels at `stride` (1 or 2), the last block of a row or column moved back to end at its end.
    A function of its own for each stride: with both strides' blocks in one loop, LLVM made the
    stride-2 ones x1.12 slower (/tmp/w/dwrows1.py)."""
    for rows_done in range(0, out_h, DEPTHWISE_ROWS):
        oy = min(rows_done, out_h - DEPTHWISE_ROWS)
        for done in range(0, out_w, DEPTHWISE_PIXELS):
            ox = min(done, out_w - DEPTHWISE_PIXELS)
            plane_rows(source, plane_at, height, width, weights, w_at, start, oy, ox, pads[0], pads[1], residual, out,
                       out_at + oy * out_w + ox, out_w, activation, low, high, numba.literally(stride), DEPTHWISE_ROWS,
                       DEPTHWISE_PIXELS)


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def depthwise_row_planes(x, w, bias, residual, out, kernel, strides, dilations, pads, multiplier, activation, low,
                         high, phases, offsets, counter, worker, workers):
    """depthwise_rows's work on worker `worker` of `workers`: output planes (one channel of one
    batch entry), its share first (next_item), until none is left, each through its own
    phases buffer."""
    batch, channels_out, out_h, out_w = out.shape
    kernel_h, kernel_w = kernel[0], kernel[1]
    taps = kernel_h * kernel_w
    cells_h, cells_w, _ = phase_grid(x.shape, out.shape, (kernel_h, kernel_w), strides, dilations, pads)
    grid = cells_h * cells_w
    has_bias, has_residual = bias.size > 0, residual.size > 0
    # 3x3 undilated convs at stride 1 or 2 in both directions: straight from the plane (plane_rows;
    # rows_read_planes_straight says the same to the plans)
    straight = (kernel_h == 3 and kernel_w == 3 and strides[0] == strides[1] and strides[0] <= 2
                and dilations[0] == 1 and dilations[1] == 1)
    height, width = x.shape[2], x.shape[3]
    source, flat_weights, outputs, extras = x.reshape(-1), w.reshape(-1), out.reshape(-1), residual.reshape(-1)
    sums = numba.carray(stack_array(DEPTHWISE_BLOCK, x.dtype), DEPTHWISE_BLOCK)
    items = batch * channels_out
    item, turn = next_item(counter, worker, workers, items, 0)
    while item < items:
        n, m = item // channels_out, item % channels_out
        item, turn = next_item(counter, worker, workers, items, turn)
        if straight:  # no padded plane, no stride phases
            plane_at = (n * x.shape[1] + m // multiplier) * height * width
            out_at = (n * channels_out + m) * out_h * out_w
            start = np.float32(bias[m]) if has_bias else np.float32(0)
            if strides[0] == 1:
                plane_blocks(source, plane_at, height, width, flat_weights, m * taps, start, pads, extras, outputs,
                             out_at, out_h, out_w, activation, low, high, 1)
            else:
                plane_blocks(source, plane_at, height, width, flat_weights, m * taps, start, pads, extras, outputs,
                             out_at, out_h, out_w, activation, low, high, 2)
            continue
        fill_phases(x[n, m // multiplier], phases, strides, pads, grid, cells_w)
        weights, target = w[m], out[n, m]
        extra = residual[n, m] if has_residual else target  # (views a plane, not a step: numba counts their references)
        start = bias[m] if has_bias else 0
        for rows_done in range(0, out_h, DEPTHWISE_ROWS):
            oy = min(rows_done, out_h - DEPTHWISE_ROWS)
            for done in range(0, out_w, DEPTHWISE_PIXELS):
                ox = min(done, out_w - DEPTHWISE_PIXELS)
                at = oy * cells_w + ox
                for k in range(DEPTHWISE_BLOCK):
                    sums[k] = start
                for t in range(taps):
                    first = at + offsets[t]
                    weight = weights[index(t)]
                    for i in range(DEPTHWISE_ROWS):
                        for j in range(DEPTHWISE_PIXELS):
                            sums[i * DEPTHWISE_PIXELS + j] += weight * phases[index(first + i * cells_w + j)]
                if has_residual:
                    for i in range(DEPTHWISE_ROWS):
                        for j in range(DEPTHWISE_PIXELS):
                            sums[i * DEPTHWISE_PIXELS + j] += extra[index(oy + i), index(ox + j)]
                activate_block(sums, DEPTHWISE_BLOCK, activation, low, high)
                for i in range(DEPTHWISE_ROWS):
                    for j in range(DEPTHWISE_PIXELS):
                        target[index(oy + i), index(ox + j)] = sums[i * DEPTHWISE_PIXELS + j]


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def depthwise_rows(x, w, bias, residual, out, kernel, strides, dilations, pads, multiplier, activation, low, high,
                   phases, offsets, counter, workers):
    """depthwise_phases's conv (same arguments but w: (M, taps) and kernel: (kh, kw)) on output
    planes of at least 4 rows of 16 pixels, without its sums: each step sums 4 rows x 16 pixels
    of one channel over every tap in registers and stores them with the bias, residual and
    activation, one pass over the output. A plane's last steps move back to end at its edges and
    store a few pixels again, the same values (out shares no memory with x or residual). phases:
    (workers, phase_grid's size), zeroed once; offsets: a buffer of kh * kw; counter: work_counter's.
    `workers` threads share the output planes. Needs the SLP vectorizer (vectorized_loop compiles
    it so)."""
    cells_h, cells_w, _ = phase_grid(x.shape, out.shape, (kernel[0], kernel[1]), strides, dilations, pads)
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            offsets[ky * kernel[1] + kx] = tap_offset(ky, kx, strides, dilations, cells_h * cells_w, cells_w)
    reset_counters(counter, workers)
    if workers == 1:
        depthwise_row_planes(x, w, bias, residual, out, kernel, strides, dilations, pads, multiplier, activation,
                             low, high, phases[0], offsets, counter, np.int64(0), workers)
    else:
        for worker in numba.prange(workers):
            depthwise_row_planes(x, w, bias, residual, out, kernel, strides, dilations, pads, multiplier,
                                 activation, low, high, phases[worker], offsets, counter, np.int64(worker), workers)


# depthwise_channel_blocks: float32 depthwise convs take it but where depthwise_rows's steps of
# DEPTHWISE_PIXELS fill most of an output row: rows of at least DEPTHWISE_ROWS_LOOP_WIDTH pixels,
# DEPTHWISE_ROWS_STRIDED_WIDTH where depthwise_rows reads stride phases (strided convs but 3x3 /
# 2, filled each run), whose steps cover at most DEPTHWISE_ROWS_COVER times the row. Read by the
# plans only. One thread, /tmp/w/dwbig.py, channel blocks / rows, 3x3 convs since plane_rows
# reads their planes straight: 96 x 36 x 36 x1.39 (steps cover 1.33x the row), 384 x 16 x 16
# x1.32, 32 x 16 x 16 x1.19, 128 x 18 x 18 x1.01 (1.78x), 64 x 20 x 20 x1.03 (1.6x); stride 2:
# 96 x 40 x 40 x1.14 (1.6x), 64 x 36 x 36 x0.92 (1.78x), 96 x 32 x 32 x2.56, 144 x 56 x 56 x1.60.
# Before plane_rows (both through a padded plane or stride phases): 192 x 28 x 28 x1.36,
# 144 x 56 x 56 x1.61, 128 x 18 x 18 x0.75, 64 x 20 x 20 x0.78; stride 2 96 x 32 x 32 x0.49,
# 96 x 112 x 112 x1.03, 32 x 224 x 224 x1.44.
DEPTHWISE_ROWS_STRIDED_WIDTH = 28
DEPTHWISE_ROWS_COVER = 1.5


def rows_read_planes_straight(kernel, strides, dilations) -> bool:
    """Whether depthwise_rows sums a conv straight from its input planes (plane_rows: 3x3,
    undilated, stride 1 or 2 both ways; depthwise_row_planes tests the same) rather than through
    a phases buffer it fills."""
    return (tuple(kernel) == (3, 3) and tuple(dilations) == (1, 1) and strides[0] == strides[1]
            and strides[0] in (1, 2))
# Whether float32 depthwise convs of channel multiplier 1 take depthwise_channel_blocks (tests
# turn it off to reach the other loops with them).
DEPTHWISE_CHANNEL_BLOCKS = True


def _transposed(builder, rows: list, width: int) -> list:
    """The columns of a width x width block given as its row vectors (width a power of two): stage
    b swaps bit b of each element's row and lane, two-vector shuffles of row pairs i, i + b;
    log2(width) stages move every element to (lane, row)."""
    picks = llvm_ir.VectorType(llvm_ir.IntType(32), width)
    rows = list(rows)
    b = 1
    while b < width:
        stay = llvm_ir.Constant(picks, [j if not j & b else width + j - b for j in range(width)])
        move = llvm_ir.Constant(picks, [j + b if not j & b else width + j for j in range(width)])
        for i in range(width):
            if not i & b:
                rows[i], rows[i + b] = (builder.shuffle_vector(rows[i], rows[i + b], stay),
                                        builder.shuffle_vector(rows[i], rows[i + b], move))
        b *= 2
    return rows


@intrinsic
def transpose_lanes(typingctx, source, source_at, source_stride, load_rows, load_lanes, target, target_at, places,
                    places_at, store_vectors, store_lanes, residual, activation, low, high, lanes):
    """One lanes x lanes block (lanes a literal) moved across: row i is source[source_at + i *
    source_stride + j] for j < load_lanes (zeros for i >= load_rows or j >= load_lanes), and its
    column j goes to target[target_at + places[places_at + j] + i] for j < store_vectors and i <
    store_lanes, plus the residual at the same index where it has elements, then Relu
    (activation 1) or a clip to [low, high] (2), NaN kept. Masked loads and stores, one
    log2(lanes)-stage shuffle transpose in registers. source, target, residual: flat float32."""
    if not isinstance(lanes, types.IntegerLiteral):
        return None
    width = lanes.literal_value

    def codegen(context, builder, signature, args):
        source_data = context.make_array(signature.args[0])(context, builder, args[0]).data
        target_data = context.make_array(signature.args[5])(context, builder, args[5]).data
        places_data = context.make_array(signature.args[7])(context, builder, args[7]).data
        residual = context.make_array(signature.args[11])(context, builder, args[11])
        source_at, source_stride, load_rows, load_lanes = args[1:5]
        target_at, places_at, store_vectors, store_lanes = args[6], args[8], args[9], args[10]
        activation, low, high = args[12:15]
        i64 = llvm_ir.IntType(64)
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        pointer, alignment = vector.as_pointer(), llvm_ir.IntType(32)(4)
        zeros = llvm_ir.Constant(vector, [0.0] * width)
        load, store = _masked_access(builder, width)
        rows = []
        for i in range(width):
            count = builder.select(builder.icmp_signed("<", i64(i), load_rows), load_lanes, i64(0))
            # not inbounds: rows past load_rows may lie outside the array (they load nothing)
            at = builder.gep(source_data, [builder.add(source_at, builder.mul(i64(i), source_stride))], inbounds=False)
            mask = _prefix_mask(builder, width, count)
            rows.append(builder.call(load, [builder.bitcast(at, pointer), alignment, mask, zeros]))
        for j, value in enumerate(_transposed(builder, rows, width)):
            count = builder.select(builder.icmp_signed("<", i64(j), store_vectors), store_lanes, i64(0))
            mask = _prefix_mask(builder, width, count)
            at = builder.add(target_at, builder.load(builder.gep(places_data, [builder.add(places_at, i64(j))])))
            value = _plus_residual(builder, value, residual, at, width, mask)
            value = _activated(builder, value, activation, low, high, width)
            builder.call(store, [value, builder.bitcast(builder.gep(target_data, [at], inbounds=False), pointer),
                                 alignment, mask])
        return context.get_dummy_value()

    return types.none(source, source_at, source_stride, load_rows, load_lanes, target, target_at, places, places_at,
                      store_vectors, store_lanes, residual, activation, low, high, lanes), codegen


@intrinsic
def block_taps(typingctx, padded, at, pixel_step, tap_offsets, weights, w_at, bias, bias_at, sums, sums_at, pixels,
               lanes):
    """sums[sums_at + k * lanes + c] = bias[bias_at + c] + sum over taps t of weights[w_at + t *
    lanes + c] * padded[at + k * pixel_step + tap_offsets[t] + c] for pixels k < `pixels` and
    channels c < lanes (literals): `pixels` vector accumulators of one block of channels in
    registers, independent chains of multiply-adds (one accumulator waits 4 cycles for each)."""
    if not (isinstance(lanes, types.IntegerLiteral) and isinstance(pixels, types.IntegerLiteral)):
        return None
    width, count = lanes.literal_value, pixels.literal_value

    def codegen(context, builder, signature, args):
        arrays = {k: context.make_array(signature.args[k])(context, builder, args[k]) for k in (0, 3, 4, 6, 8)}
        padded_data, offsets_data, weights_data, bias_data, sums_data = (arrays[k].data for k in (0, 3, 4, 6, 8))
        at, pixel_step, w_at, bias_at, sums_at = args[1], args[2], args[5], args[7], args[9]
        i64 = llvm_ir.IntType(64)
        vector = llvm_ir.VectorType(llvm_ir.FloatType(), width)
        pointer = vector.as_pointer()
        fma = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vector, [vector] * 3),
                                             f"llvm.fma.v{width}f32")
        taps = builder.extract_value(arrays[3].shape, 0)
        start = builder.load(builder.bitcast(builder.gep(bias_data, [bias_at]), pointer), align=4)
        cells = [cgutils.alloca_once(builder, vector) for _ in range(count)]  # registers after SROA
        for cell in cells:
            builder.store(start, cell)
        bases = [builder.gep(padded_data, [builder.add(at, builder.mul(i64(k), pixel_step))]) for k in range(count)]
        weights_at = builder.gep(weights_data, [w_at])
        with cgutils.for_range(builder, taps) as loop:
            offset = builder.load(builder.gep(offsets_data, [loop.index]))
            weight = builder.load(builder.bitcast(builder.gep(weights_at, [builder.mul(loop.index, i64(width))]),
                                                  pointer), align=4)
            for base, cell in zip(bases, cells):
                values = builder.load(builder.bitcast(builder.gep(base, [offset]), pointer), align=4)
                builder.store(builder.call(fma, [weight, values, builder.load(cell)]), cell)
        for k, cell in enumerate(cells):
            target = builder.gep(sums_data, [builder.add(sums_at, i64(k * width))])
            builder.store(builder.load(cell), builder.bitcast(target, pointer), align=4)
        return context.get_dummy_value()

    return types.none(padded, at, pixel_step, tap_offsets, weights, w_at, bias, bias_at, sums, sums_at, pixels,
                      lanes), codegen


# Output pixels a block_taps call sums in rows at least this wide (else 4, else 1): 8 accumulators
# keep both multiply-add units busy (144 x 8 x 8: 7.2 us against 8.8 with 4).
BLOCK_PIXELS = 8


@numba.njit(cache=True, nogil=True, boundscheck=False)
def depthwise_block_items(x, weights, bias, residual, out, strides, activation, low, high, padded, padded_w,
                          tap_offsets, places, planes, sums, counter, worker, workers):
    """depthwise_channel_blocks's work on worker `worker` of `workers`: blocks of GRID_LANES
    channels of one batch entry, its share first (next_item), until none is left, each through
    its own padded and sums buffers."""
    batch, channels_out, out_h, out_w = out.shape
    channels, plane = x.shape[1], x.shape[2] * x.shape[3]
    blocks, taps = weights.shape[0], weights.shape[1]
    stride_h, stride_w = strides[0], strides[1]
    pixels = out_h * out_w
    lanes = GRID_LANES
    source, outputs, extras = x.reshape(-1), out.reshape(-1), residual.reshape(-1)
    flat_weights, flat_bias = weights.reshape(-1), bias.reshape(-1)
    no_residual = extras[:0]
    step = (BLOCK_PIXELS if out_w >= BLOCK_PIXELS else 4 if out_w >= 4 else 1)
    items = batch * blocks
    item, turn = next_item(counter, worker, workers, items, 0)
    while item < items:
        n, block = item // blocks, item % blocks
        item, turn = next_item(counter, worker, workers, items, turn)
        first = block * lanes
        count = min(lanes, channels_out - first)
        # The block's input planes into the padded channels-last buffer, 16 pixels a transpose.
        for p in range(0, plane, lanes):
            columns = min(lanes, plane - p)
            transpose_lanes(source, (n * channels + first) * plane + p, plane, count, columns, padded, 0, places, p,
                            columns, lanes, no_residual, 0, low, high, GRID_LANES)
        w_at = block * taps * lanes
        for oy in range(out_h):
            row_at = oy * stride_h * padded_w
            # The last call of a row moves back to end at its end and sums a few pixels again.
            for done in range(0, out_w, step):
                ox = min(done, out_w - step)
                at, sums_at = (row_at + ox * stride_w) * lanes, (oy * out_w + ox) * lanes
                if step == BLOCK_PIXELS:
                    block_taps(padded, at, stride_w * lanes, tap_offsets, flat_weights, w_at, flat_bias, first, sums,
                               sums_at, BLOCK_PIXELS, GRID_LANES)
                elif step == 4:
                    block_taps(padded, at, stride_w * lanes, tap_offsets, flat_weights, w_at, flat_bias, first, sums,
                               sums_at, 4, GRID_LANES)
                else:
                    block_taps(padded, at, stride_w * lanes, tap_offsets, flat_weights, w_at, flat_bias, first, sums,
                               sums_at, 1, GRID_LANES)
        # The sums (pixel-major) back across into the output planes, with the residual and activation.
        for p in range(0, pixels, lanes):
            rows = min(lanes, pixels - p)
            transpose_lanes(sums, p * lanes, lanes, rows, count, outputs, (n * channels_out + first) * pixels + p,
                            planes, 0, count, rows, extras, activation, low, high, GRID_LANES)


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def depthwise_channel_blocks(x, weights, bias, residual, out, strides, activation, low, high, padded, padded_w,
                             tap_offsets, places, planes, sums, counter, workers):
    """A float32 depthwise conv (channel multiplier 1) by blocks of GRID_LANES channels laid out
    channels-last: each block's input planes go across (a shuffle transpose) into a zero-padded
    (padded_h, padded_w, GRID_LANES) buffer, where every tap of every output pixel, at any stride,
    dilation or padding, is one vector load of the block's channels; an output pixel's sums over
    the taps stay in registers (block_taps), and the pixel-major sums go back across into the
    output planes with the residual and the activation (Relu 1 or a clip to [low, high] 2, NaN
    kept). No stride phases, no short rows, no edge cases.

    weights: (blocks, taps, GRID_LANES) and bias (blocks, GRID_LANES), zeros past the channels;
    tap_offsets: where tap (ky, kx) reads in the padded buffer from its output pixel's window,
    (ky * dilation_h * padded_w + kx * dilation_w) * GRID_LANES; places: (H * W + GRID_LANES,)
    input pixel (iy, ix)'s place there, ((iy + pad_top) * padded_w + ix + pad_left) *
    GRID_LANES; planes: (GRID_LANES,) c * out_h * out_w; padded: (workers, its size), zeroed
    once (only the interior is written); sums: (workers, out_h * out_w * GRID_LANES); counter:
    work_counter's. `workers` threads share the blocks."""
    reset_counters(counter, workers)
    if workers == 1:
        depthwise_block_items(x, weights, bias, residual, out, strides, activation, low, high, padded[0], padded_w,
                              tap_offsets, places, planes, sums[0], counter, np.int64(0), workers)
    else:
        for worker in numba.prange(workers):
            depthwise_block_items(x, weights, bias, residual, out, strides, activation, low, high, padded[worker],
                                  padded_w, tap_offsets, places, planes, sums[worker], counter, np.int64(worker),
                                  workers)


@numba.njit(cache=True, inline="always")
def nan_max(a, b):
    """np.maximum of two scalars: NaN where either is NaN. Branch-free (both conditions evaluated),
    so that LLVM vectorizes the loops it sits in."""
    return a if (a > b) | (a != a) else b


@numba.njit(cache=True, inline="always")
def window_span(out_size, kernel, stride, dilation):
    """The padded input extent a pool's windows read along one axis."""
    return (out_size - 1) * stride + (kernel - 1) * dilation + 1


def max_pool_line_size(out_w: int, kernel_w: int, stride_w: int, dilation_w: int) -> int:
    """The size of one thread's row buffer of max_pool_rows: the padded input row its windows read,
    then that row's two column phases (used at column stride 2)."""
    span = window_span(out_w, kernel_w, stride_w, dilation_w)
    return span + 2 * (span // 2 + 1)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def max_pool_planes(x, out, kernel, strides, dilations, pads, line, counter, worker, workers):
    """max_pool_rows's work on worker `worker` of `workers`: (N, C) planes, its share first
    (next_item), until none is left."""
    batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    kernel_h, kernel_w = kernel[0], kernel[1]
    stride_h, stride_w = strides[0], strides[1]
    dilation_h, dilation_w = dilations[0], dilations[1]
    top, left = pads[0], pads[1]
    span = window_span(out_w, kernel_w, stride_w, dilation_w)
    columns = max(0, min(width, span - left))  # input columns they read
    halves = span // 2 + 1
    lowest = -np.inf
    for i in range(line.size):  # the padding: never written again
        line[i] = lowest
    # The padded row at line[0:span], its even and odd columns at the line's end; the planes and
    # rows by offsets into the flat arrays (no view a row: numba counts each view's references).
    padded = line
    even_at, odd_at = line.size - 2 * halves, line.size - halves
    source, target = x.reshape(-1), out.reshape(-1)
    items = batch * channels
    item, turn = next_item(counter, worker, workers, items, 0)
    while item < items:
        plane_at, out_at = item * height * width, item * out_h * out_w
        item, turn = next_item(counter, worker, workers, items, turn)
        for oy in range(out_h):
            # The window rows' maximum into the padded row, rows in the padding skipped.
            first = True
            for ky in range(kernel_h):
                iy = oy * stride_h - top + ky * dilation_h
                if iy >= 0 and iy < height:
                    row_at = plane_at + iy * width
                    if first:
                        for ix in range(columns):
                            padded[index(left + ix)] = source[index(row_at + ix)]
                        first = False
                    else:
                        for ix in range(columns):
                            padded[index(left + ix)] = nan_max(padded[index(left + ix)], source[index(row_at + ix)])
            if first:  # every row of these windows is padding
                for ix in range(columns):
                    padded[index(left + ix)] = lowest
            row = out_at + oy * out_w
            if stride_w == 2 and dilation_w == 1:
                # Column phases first (the phase fill's scatter_pairs, the odd columns halves past
                # the even ones): every tap then reads a contiguous run (a strided read of the
                # padded row stays scalar).
                scatter_pairs(padded, 0, span, line, even_at, halves, 0)
                for ox in range(out_w):
                    target[index(row + ox)] = line[index(even_at + ox)]
                for kx in range(1, kernel_w):
                    phase_at = (odd_at if kx % 2 else even_at) + kx // 2
                    for ox in range(out_w):
                        target[index(row + ox)] = nan_max(target[index(row + ox)], line[index(phase_at + ox)])
            elif stride_w == 1:
                for ox in range(out_w):
                    target[index(row + ox)] = padded[index(ox)]
                for kx in range(1, kernel_w):
                    shift = kx * dilation_w
                    for ox in range(out_w):
                        target[index(row + ox)] = nan_max(target[index(row + ox)], padded[index(ox + shift)])
            else:
                for ox in range(out_w):
                    value = padded[index(ox * stride_w)]
                    for kx in range(1, kernel_w):
                        value = nan_max(value, padded[index(ox * stride_w + kx * dilation_w)])
                    target[index(row + ox)] = value


@numba.njit(cache=True, nogil=True, boundscheck=False, parallel=True)
def max_pool_rows(x, out, kernel, strides, dilations, pads, lines, counter, workers):
    """A 2-D max pool, (N, C, H, W) into (N, C, OH, OW): out[n, c, oy, ox] = the maximum of x over
    the window's taps (oy * stride_h - top + ky * dilation_h, ox * stride_w - left + kx *
    dilation_w) inside the input (the padding counts as -inf; ceil_mode's windows past the end
    read padding), NaN where any tap is NaN, as np.maximum. Row by row: the maximum over the
    window's rows into a padded row, then over its columns, all contiguous passes (zoo resnet@224's
    3x3 / 2 pool, wgnn bench --per-op: 0.067 ms against 0.158 for the numpy passes on one thread,
    0.045 on two; the whole model x0.95 and x0.89). lines: (workers,
    max_pool_line_size(...)); counter: work_counter's; `workers` threads share the planes."""
    reset_counters(counter, workers)
    if workers == 1:
        max_pool_planes(x, out, kernel, strides, dilations, pads, lines[0], counter, np.int64(0), workers)
    else:
        for worker in numba.prange(workers):
            max_pool_planes(x, out, kernel, strides, dilations, pads, lines[worker], counter, np.int64(worker), workers)


@numba.njit(cache=True, nogil=True, boundscheck=False, fastmath={"contract"})
def pool_matmul_rows(x, b, bias, pooled, out, options, scalars):
    """A classifier head (GlobalPoolMatMul) in one pass: out[n] = act(alpha * pool(x[n]) @ op(b) +
    beta * bias). x (N, C, spatial...) C-contiguous; b (C, K), or (K, C) with trans_b; bias flat, of
    1 or K values, or empty for none; pooled (N, C), the pool's result. options: pool_max, trans_b,
    activation (compiled.ACTIVATIONS); scalars: alpha, beta and the activation's low and high (two
    arrays rather than seven arguments: numba's call took 0.8 us with them, 0.5 without). An
    average sums in float64; a NaN in a max propagates as numpy's maximum does."""
    rows, channels = x.shape[0], x.shape[1]
    size = x.size // (rows * channels) if rows * channels else 0
    planes = x.reshape((rows, channels, size))
    pool_max, trans_b, activation = options[0], options[1], options[2]
    alpha, beta, low, high = scalars[0], scalars[1], scalars[2], scalars[3]
    classes = out.shape[1]
    bias_step = 1 if bias.size > 1 else 0
    for n in range(rows):
        for c in range(channels):
            if pool_max:
                best = planes[n, c, 0]
                for s in range(1, size):
                    value = planes[n, c, s]
                    if value > best or value != value:
                        best = value
                pooled[n, c] = best
            else:
                total = 0.0
                for s in range(size):
                    total += planes[n, c, s]
                pooled[n, c] = total / size
        if trans_b:
            for k in range(classes):
                dot = np.float32(0)
                for c in range(channels):
                    dot += pooled[n, c] * b[k, c]
                out[n, k] = dot
        else:  # along b's rows, each read in order, into out's row
            for k in range(classes):
                out[n, k] = 0
            for c in range(channels):
                weight = pooled[n, c]
                for k in range(classes):
                    out[n, k] += weight * b[c, k]
        for k in range(classes):
            value = alpha * out[n, k]
            if bias.size:
                value += beta * bias[k * bias_step]
            if activation == 1:
                value = 0 if value < 0 else value
            elif activation == 2:
                value = low if value < low else value
                value = high if value > high else value
            out[n, k] = value


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def resize_rows(source, index, weight, target):
    """target[i] = sum over taps t of weight[i, t] * source[index[i, t]] (whole rows)."""
    for i in range(target.shape[0]):
        first, scale = index[i, 0], weight[i, 0]
        for j in range(target.shape[1]):
            target[i, j] = scale * source[first, j]
        for t in range(1, index.shape[1]):
            row, scale = index[i, t], weight[i, t]
            for j in range(target.shape[1]):
                target[i, j] += scale * source[row, j]


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def resize_columns(source, index, weight, target):
    """target[:, i] = sum over taps t of weight[i, t] * source[:, index[i, t]]."""
    for y in range(target.shape[0]):
        for i in range(target.shape[1]):
            total = weight[i, 0] * source[y, index[i, 0]]
            for t in range(1, index.shape[1]):
                total += weight[i, t] * source[y, index[i, t]]
            target[y, i] = total


@numba.njit(cache=True, nogil=True, boundscheck=False)
def resize_planes(x, w_index, w_weight, h_index, h_weight, width_first, between, out):
    """A separable resize of planes, x (P, H, W) -> out (P, OH, OW), one plane at a time: along W
    into `between` (H, OW), then along H, or with width_first False along H into `between`
    (OH, W), then along W. Output i of an axis is the sum over its taps t of weight[i, t] *
    input[index[i, t]], products and sums float32 in tap order and never fused (no "contract"),
    as numpy's passes compute them (backends/numpy/resize.py): the same floats."""
    for p in range(x.shape[0]):
        if width_first:
            resize_columns(x[p], w_index, w_weight, between)
            resize_rows(between, h_index, h_weight, out[p])
        else:
            resize_rows(x[p], h_index, h_weight, between)
            resize_columns(between, w_index, w_weight, out[p])


_F32, _I64 = types.float32, types.int64


def _read(dtype, ndim: int):
    """A C-contiguous array type the loop only reads: read-only arrays (constants) match it, and
    so do writable ones."""
    return types.Array(dtype, ndim, "C", readonly=True)


# The one signature each register-blocked loop is compiled for.
VECTORIZED_SIGNATURES = {
    "conv_direct": (_read(_F32, 2), _read(_F32, 4), _read(_F32, 1), _read(_F32, 3), _F32[:, :, ::1],
                    _read(types.intp, 1), _read(types.intp, 1), _I64, _F32, _F32, _F32[:, ::1], _I64[::1], _I64),
    "conv_grid": (_read(_F32, 2), _read(_F32, 4), _read(_F32, 1), _read(_F32, 3), _F32[:, :, ::1],
                  _read(types.intp, 1), _I64, _I64, _I64, _F32, _F32, _I64[::1], _I64),
    "depthwise_rows": (_read(_F32, 4), _read(_F32, 2), _read(_F32, 1), _read(_F32, 4), _F32[:, :, :, ::1],
                       _read(_I64, 1), _read(_I64, 1), _read(_I64, 1), _read(_I64, 1), _I64, _I64, _F32, _F32,
                       _F32[:, ::1], _I64[::1], _I64[::1], _I64),
}


def can_vectorize() -> bool:
    """Whether this numba has the SLP switch vectorized_loop needs (asking compiles nothing)."""
    from numba.core import config

    return getattr(config, "SLP_VECTORIZE", None) is not None


def vectorized_loop(name: str):
    """conv_direct, conv_grid or depthwise_rows compiled for float32 with LLVM's SLP vectorizer on, which numba
    leaves off by default (without it their stack sums stay scalar: 8 ms instead of 0.5 ms for a
    7x7/2 stem), and closed to other signatures, so that no call compiles it again without. None
    where this numba has no such switch."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    if not can_vectorize():
        return None
    loop = globals()[name]
    with global_compiler_lock:  # no other compile sees the switch
        if not loop.signatures:
            saved, config.SLP_VECTORIZE = config.SLP_VECTORIZE, 1
            try:
                loop.compile(VECTORIZED_SIGNATURES[name])
            finally:
                config.SLP_VECTORIZE = saved
            loop.disable_compile()
    return loop
