"""Pool family on numpy.

Pool builds at resize (the kernel's prepare hook) what a run needs, as Conv does: where windows
reach into padding, or the input must be cast (float16 averages accumulate in float32) or
transformed (Lp's |x|^p), a padded buffer whose border holds the pad value (the lowest value for
max, 0 otherwise) written once; a run copies only the interior. Windows are boxes, so the
reduction is separable: one pass per spatial axis with a kernel of more than one tap, outermost
axis first, each pass reducing that axis's taps (strided views built once) with one ufunc call per
tap into a prepared buffer, the last pass into the output. A 3x3 max pool is then 4 np.maximum
calls instead of 8 over a freshly padded copy. Without a buffer the views look into the input
itself and are rebuilt only when the input array changes (the session passes the same arena view
on every run).

Lp pooling sums |x|^p (padding contributes 0) and takes the p-th root. Max pooling with indices
keeps, per output, the first tap holding the window's maximum (strictly greater replaces: the
ONNX reference and onnxruntime pick the first in row-major tap order) and turns it into a flat
input position.

Average pooling divides by a per-axis count (a window is a box, so its count of counted elements
is the product of per-axis counts): with count_include_pad the padding up to the declared border
counts, never the extra room ceil_mode adds past it.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.errors import InputError
from ...engine.ops.pool import pool_geometry
from . import compiled
from .conv import infer_context
from .kernel import numpy_kernel, thread_rows, work_counter


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _divisor(sizes, kernel, strides, dilations, begin, end, out, include_pad: bool) -> np.ndarray:
    """Number of counted elements in each window, shape (*out)."""
    divisor = np.ones((), np.int64)
    per_axis = zip(sizes, kernel, strides, dilations, begin, end, out, strict=True)
    for axis, (n, k, s, d, b, e, o) in enumerate(per_axis):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - b  # input index of each tap
        low, high = (-b, n + e) if include_pad else (0, n)
        count = ((pos >= low) & (pos < high)).sum(axis=1)
        divisor = divisor[..., None] * count.reshape((1,) * axis + (o,))
    return np.maximum(divisor, 1)


def _window_origins(sizes, out, strides, begin, order) -> tuple[np.ndarray, list[int]]:
    """Flat input position of each window's first tap, shape (*out), and the flat step of each
    spatial axis, for axes numbered in order (fastest first)."""
    rank = len(sizes)
    flat = np.zeros(tuple(out), np.int64)
    steps = [0] * rank
    step = 1
    for axis in order:
        o = np.arange(out[axis]).reshape((-1,) + (1,) * (rank - 1 - axis))
        flat += (o * strides[axis] - begin[axis]) * step
        steps[axis] = step
        step *= sizes[axis]
    return flat, steps


def _inside(sizes, out, strides, dilations, begin, tap) -> np.ndarray:
    """Whether the tap of each output window lies in the input (not in padding), shape (*out)."""
    inside = np.ones((), bool)
    for n, o, s, d, b, t in zip(sizes, out, strides, dilations, begin, tap, strict=True):
        pos = np.arange(o) * s - b + t * d
        inside = inside[..., None] & ((pos >= 0) & (pos < n))
    return inside


_FINAL = object()  # a pass target resolved on each run: the output, or the accumulator


class _PoolPlan:
    """What a Pool step reuses on every run (see the module docstring)."""

    def __init__(self, ex):
        step = ex.step
        kernel, strides, dilations, begin, end, out = pool_geometry(infer_context(ex))
        self.geometry = kernel, strides, dilations, begin, out
        n, c, *sizes = step.input_specs[0].shape
        self.out_shape = (n, c, *out)
        self.kind = kind = ex.attrs["kind"]
        self.p = float(ex.attrs["p"])
        dtype = np.dtype(step.input_specs[0].dtype)
        self.work = work = dtype if kind == "max" else np.promote_types(dtype, np.float32)
        self.indices = kind == "max" and len(step.output_specs) > 1
        self.empty = n * c == 0
        # Padded extent each axis's windows read (ceil_mode may need room past the end padding).
        self.need = need = [(o - 1) * s + (k - 1) * d + 1 for k, s, d, o in zip(kernel, strides, dilations, out)]
        padded = [max(m, b + size) for m, b, size in zip(need, begin, sizes)]
        self.buffered = any(begin) or padded != sizes or work != dtype or kind == "lp"
        self.source = None  # the input the views look into, when there is no buffer
        self.temps: list[np.ndarray] = []  # the results of all passes but the last
        self.acc = None if work == dtype else np.empty(self.out_shape, work)
        self.divisor = None
        if kind == "avg":
            divisor = _divisor(sizes, kernel, strides, dilations, begin, end, out, bool(ex.attrs["count_include_pad"]))
            # One count for every window (no padding, or padding that counts) is a scalar.
            self.divisor = (work.type(divisor.flat[0]) if divisor.min() == divisor.max()
                            else divisor.astype(work))
        if self.indices:
            self._prepare_indices(ex, sizes, kernel, strides, dilations, begin, out)
        self.compiled = None  # (loop, its arguments after x and out) where a compiled loop runs it
        if (kind == "max" and not self.indices and math.prod(self.out_shape) > 0 and len(sizes) in (1, 2)
                and dtype in (np.float32, np.float64) and compiled.enabled()):
            self._prepare_compiled(ex, dtype, kernel, strides, dilations, begin, out)
        elif self.buffered:
            self.buffer = np.full((n, c, *padded), _lowest(dtype) if kind == "max" else 0, work)
            self.interior = self.buffer[(slice(None), slice(None), *(slice(b, b + s) for b, s in zip(begin, sizes)))]
            self._build(self.buffer)

    def _prepare_compiled(self, ex, dtype, kernel, strides, dilations, begin, out) -> None:
        """compiled_loops.max_pool_rows's geometry (1-D as rows of one) and work buffers."""
        loops = compiled.loops()
        row = [1] if len(kernel) == 1 else []  # a 1-D pool's one row: kernel, stride, dilation, output 1
        kernel, strides, dilations, out = ([*row, *v] for v in (kernel, strides, dilations, out))
        begin = [0] * len(row) + list(begin)
        comparisons = math.prod(self.out_shape) * math.prod(kernel)
        # A tap's comparison costs about what a depthwise conv's multiply-add does: the same threshold.
        threads = compiled.loop_threads(ex, comparisons, compiled.THREADED_DEPTHWISE_MULTIPLY_ADDS)
        lines = thread_rows(threads, loops.max_pool_line_size(out[1], kernel[1], strides[1], dilations[1]), dtype)
        geometry = tuple(np.array(v, np.int64) for v in (kernel, strides, dilations, begin))
        self.compiled = (loops.max_pool_rows, (*geometry, lines, work_counter(threads)), threads)

    def run_compiled(self, ex, x: np.ndarray, out: np.ndarray) -> None:
        loop, arguments, threads = self.compiled
        if x.ndim == 3:  # (N, C, L) as (N, C, 1, L)
            x, out = x[:, :, None], out[:, :, None]
        loop(np.ascontiguousarray(x), out, *arguments, compiled.run_workers(threads, ex.backend))

    def _prepare_indices(self, ex, sizes, kernel, strides, dilations, begin, out) -> None:
        """Per tap: its flat offset from the window's origin, and where it lies inside the input
        (None when every window is inside)."""
        rank = len(sizes)
        order = range(rank) if ex.attrs["storage_order"] else reversed(range(rank))
        self.origins, axis_steps = _window_origins(sizes, out, strides, begin, order)
        taps = list(np.ndindex(*kernel))
        self.tap_offsets = np.array([sum(t * d * st for t, d, st in zip(tap, dilations, axis_steps)) for tap in taps],
                                    np.int64)
        masks = [_inside(sizes, out, strides, dilations, begin, tap) for tap in taps]
        self.masks = [None if m.all() else m for m in masks]
        n, c = self.out_shape[:2]
        self.planes = np.arange(n * c, dtype=np.int64).reshape((n, c) + (1,) * rank) * math.prod(sizes)
        self.found = np.empty(self.out_shape, bool)
        self.take = np.empty(self.out_shape, bool)
        self.best = np.empty(self.out_shape, np.intp)

    def _build(self, src: np.ndarray) -> None:
        """The passes' views over src (the buffer, or the input when there is none)."""
        kernel, strides, dilations, _, out = self.geometry
        rank = len(kernel)
        # Axes with one tap are only sliced (a view); the others each take one pass.
        cur = src[(slice(None), slice(None),
                   *(slice(0, (o - 1) * s + 1, s) if k == 1 else slice(0, m)
                     for k, s, o, m in zip(kernel, strides, out, self.need)))]
        self.window = cur
        if self.indices:
            self.tap_views = [src[(slice(None), slice(None), *(slice(t * d, t * d + (o - 1) * s + 1, s)
                                                               for t, d, s, o in zip(tap, dilations, strides, out)))]
                              for tap in np.ndindex(*kernel)]
            return
        # Outer axes first: their taps are rows read whole (contiguous inner loops), and each pass
        # shrinks what the strided pass along the last axis reads (3x3 / 2 max pools x0.76-0.80).
        axes = [a for a in range(rank) if kernel[a] > 1]
        self.passes = []
        for number, a in enumerate(axes):
            k, s, d, o = kernel[a], strides[a], dilations[a], out[a]
            before = (slice(None),) * (2 + a)
            taps = [cur[(*before, slice(t * d, t * d + (o - 1) * s + 1, s))] for t in range(k)]
            if number == len(axes) - 1:
                target = _FINAL
            else:  # kept across rebuilds: the shapes are those of this resize
                if len(self.temps) == number:
                    self.temps.append(np.empty(taps[0].shape, self.work))
                target = self.temps[number]
            self.passes.append((taps, target))
            cur = target

    def bind(self, x: np.ndarray) -> None:
        self.source = x
        self._build(x)


def _prepare(ex) -> None:
    ex.state["pool"] = _PoolPlan(ex)


def _describe(ex) -> str:
    plan = ex.state.get("pool")
    return "compiled loop (max_pool_rows)" if plan is not None and plan.compiled is not None else "numpy"


@numpy_kernel("Pool", writes_outputs=True, prepare=_prepare, describe=_describe)
def pool(ex, inputs, outputs):
    plan = ex.state.get("pool")
    if plan is None:  # a direct call without prepare
        _prepare(ex)
        plan = ex.state["pool"]
    x, out = inputs[0], outputs[0]
    if plan.empty:
        return
    if plan.compiled is not None:
        plan.run_compiled(ex, x, out)
        return
    if plan.buffered:
        interior = plan.interior
        if plan.kind == "lp":
            _lp_terms(x, interior, plan.p)
        else:
            np.copyto(interior, x)
    elif x is not plan.source:
        plan.bind(x)
    if plan.indices:
        _max_with_indices(plan, out, outputs[1])
        return
    final = out if plan.acc is None else plan.acc
    reduce = np.maximum if plan.kind == "max" else np.add
    if not plan.passes:  # every kernel axis has one tap
        np.copyto(final, plan.window)
    for taps, target in plan.passes:
        if target is _FINAL:
            target = final
        reduce(taps[0], taps[1], out=target)
        for tap in taps[2:]:
            reduce(target, tap, out=target)
    if plan.kind == "avg":
        np.divide(final, plan.divisor, out=final)
    elif plan.kind == "lp":
        _lp_root(final, plan.p)
    if final is not out:
        np.copyto(out, final, casting="unsafe")


def _lp_terms(x: np.ndarray, interior: np.ndarray, p: float) -> None:
    """|x|^p into the padded buffer's interior (in the accumulation dtype)."""
    if x.dtype != interior.dtype:
        np.copyto(interior, x)
        x = interior
    if p == 1:
        np.abs(x, out=interior)
    elif p == 2:
        np.multiply(x, x, out=interior)
    else:
        np.abs(x, out=interior)
        np.power(interior, p, out=interior)


def _lp_root(total: np.ndarray, p: float) -> None:
    if p == 2:
        np.sqrt(total, out=total)
    elif p != 1:
        np.power(total, 1 / p, out=total)


def _max_with_indices(plan: _PoolPlan, y: np.ndarray, indices: np.ndarray) -> None:
    """Maximum and flat input index per window: the first tap inside the input, then any tap
    strictly greater (padding never wins, even over -inf or NaN inputs). A window with no tap
    inside the input (dilated taps can all miss it) gives the lowest value and index -1."""
    found, take, best = plan.found, plan.take, plan.best
    y.fill(_lowest(y.dtype))
    found.fill(False)
    best.fill(0)
    for number, (view, inside) in enumerate(zip(plan.tap_views, plan.masks)):
        np.greater(view, y, out=take)
        take |= ~found
        if inside is not None:
            take &= inside
        np.copyto(y, view, where=take)
        np.copyto(best, number, where=take)
        found |= take
    np.take(plan.tap_offsets, best, out=indices, mode="clip")  # clip: no buffered copy
    indices += plan.origins
    indices += plan.planes
    np.copyto(indices, -1, where=~found)


@numpy_kernel("GlobalPool", writes_outputs=True)
def global_pool(ex, inputs, outputs):
    x, out = inputs[0], outputs[0]
    flat = x.reshape(x.shape[:2] + (math.prod(x.shape[2:]),))  # one reduction axis (a view when contiguous)
    if ex.attrs["kind"] == "max":
        np.maximum.reduce(flat, axis=2, out=out.reshape(out.shape[:2]))
        return
    work = np.promote_types(x.dtype, np.float32)  # float16 sums accumulate in float32
    target = out.reshape(out.shape[:2])
    total = np.add.reduce(flat, axis=2, dtype=work, out=target if work == out.dtype else None)
    np.divide(total, flat.shape[2], out=target, casting="unsafe")


@numpy_kernel("MaxUnpool")
def max_unpool(ex, x, indices, output_shape=None):
    shape = ex.step.output_specs[0].shape
    size = int(np.prod(shape, dtype=np.int64))
    flat = indices.reshape(-1).astype(np.int64, copy=False)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        bad = flat[(flat < 0) | (flat >= size)][0]
        raise InputError(f"{ex.step.label}: index {bad} is outside the output's {size} elements {list(shape)}")
    y = np.zeros(size, x.dtype)
    y[flat] = x.reshape(-1)
    return y.reshape(shape)
