"""Resize on numpy, separable: each resampled axis gets an (index, weight) table of shape
(out_len, taps) and is resampled by one pass. Tables, passes and their buffers are built once per
resize (the kernel's prepare hook: roi / scales / sizes are known then); the last pass writes
into the output.

- Nearest upsampling by whole factors (output i reads input i // factor on every resampled axis)
  is a broadcasting copy of the input into the output seen as (..., in_len, factor, ...).
- Upsampling by a whole factor whose taps repeat from one input element to the next (linear or
  cubic with the usual coordinate modes) is a phase pass: products of the edge-padded input with
  each distinct weight, then shifted slices added per output phase (_PhasePass). No gather.
- Anything else is a gather pass: all taps gathered with one np.take, weighted with one multiply
  and added tap after tap; nearest is the np.take alone.
Both weighted passes sum the same products in the same order, so they give the same values.

A small float32 resize along the last two axes (linear or cubic) runs instead as one compiled loop
where numba is running (compiled_loops.resize_planes): the same products and sums, the same values,
without a numpy call per pass and tap (COMPILED_RESIZE_SIZE says how small).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...engine.ops.resize import AxisResize, normalize_values, plan_resize
from . import compiled
from .kernel import numpy_kernel


@dataclass
class AxisTable:
    axis: int
    index: np.ndarray  # (out_len, taps) intp, already clamped into [0, in_len)
    weight: np.ndarray | None  # (out_len, taps) float64; None = plain gather (nearest)
    outside: np.ndarray | None  # (out_len,) bool: tf_crop_and_resize extrapolated positions


def source_coordinates(attrs: dict, step: AxisResize) -> np.ndarray:
    """x_original (float64) of every output position along one axis."""
    mode = attrs["coordinate_transformation_mode"]
    n, scale = step.in_len, step.scale
    y = np.arange(step.out_len, dtype=np.float64)
    width = scale * n  # the fractional output width, as onnx.reference uses it
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        # Centres the sampled window when floor(width) cut the output short.
        offset = n / 2 * (1 - step.out_len / width)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return np.full_like(y, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "align_corners":
        return np.zeros_like(y) if width == 1 else y * (n - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    # tf_crop_and_resize. start/end keep the roi's type (float32 usually), so (end - start) and
    # start * (n - 1) round in that type, exactly as onnx.reference computes them.
    start, end = step.roi
    if width == 1:
        return np.full_like(y, (end - start) * (n - 1) / 2 + start * (n - 1))
    return y * (end - start) * (n - 1) / (width - 1) + start * (n - 1)


def _nearest_index(attrs: dict, x: np.ndarray, scale: float) -> np.ndarray:
    base = np.floor(x)
    frac = x - base
    rule = attrs["nearest_mode"]
    if rule == "round_prefer_floor":
        up = frac > 0.5
    elif rule == "round_prefer_ceil":
        up = frac >= 0.5
    elif rule == "floor":
        up = np.zeros_like(frac, dtype=bool)
    elif rule == "ceil":
        up = frac > 0
    else:  # simple: ceil when downsampling, truncate otherwise
        return (np.ceil(x) if scale < 1 else np.trunc(x)).astype(np.int64)
    return (base + up).astype(np.int64)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter a."""
    t = np.abs(t)
    inner = ((a + 2) * t - (a + 3)) * t * t + 1
    outer = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, inner, np.where(t < 2, outer, 0.0))


def _filter_taps(attrs: dict, x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices and weights of linear / cubic interpolation (stretched by 1/scale with antialias)."""
    cubic = attrs["mode"] == "cubic"
    radius = 2 if cubic else 1
    # Antialias widens the filter when downsampling, so every input element contributes.
    stretch = min(scale, 1.0) if attrs["antialias"] else 1.0
    first = math.floor(-radius / stretch) + 1
    offsets = np.arange(first, 1 - first + 1)
    index = np.floor(x).astype(np.int64)[:, None] + offsets[None, :]
    t = (index - x[:, None]) * stretch
    weight = _cubic(t, attrs["cubic_coeff_a"]) if cubic else np.maximum(0.0, 1 - np.abs(t))
    if attrs["antialias"]:
        weight = weight / weight.sum(axis=1, keepdims=True)
    return index, weight


def axis_table(attrs: dict, step: AxisResize) -> AxisTable:
    """The (index, weight) table of one resampled axis."""
    x = source_coordinates(attrs, step)
    if attrs["mode"] == "nearest":
        index = _nearest_index(attrs, x, step.scale)[:, None]
        weight = np.ones(index.shape)
    else:
        index, weight = _filter_taps(attrs, x, step.scale)
    if attrs["exclude_outside"]:
        weight = np.where((index < 0) | (index >= step.in_len), 0.0, weight)
        total = weight.sum(axis=1, keepdims=True)
        weight = weight / np.where(total == 0, 1.0, total)
    if attrs["mode"] == "nearest" and np.all(weight == 1):
        weight = None
    outside = None
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = (x < 0) | (x > step.in_len - 1)
        if not outside.any():
            outside = None
    # Indices past the edges read the edge element (ONNX pads by replicating the border).
    index = np.clip(index, 0, step.in_len - 1).astype(np.intp)
    return AxisTable(step.axis, index, weight, outside)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    if dtype == np.float64 or not np.issubdtype(dtype, np.floating):
        return np.dtype(np.float64)  # integers are rounded once at the end, from float64
    return np.dtype(np.float32)


def _to_dtype(result: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if result.dtype == dtype:
        return result
    if np.issubdtype(dtype, np.integer):
        # Interpolated integers round to nearest and saturate, as onnx.reference does.
        info = np.iinfo(dtype)
        return np.clip(np.round(result), info.min, info.max).astype(dtype)
    return result.astype(dtype)


def _whole_factors(tables: list[AxisTable], x_shape) -> bool:
    """Whether every pass is a nearest upsampling by a whole factor: index i reads i // factor."""
    for table in tables:
        out_len, in_len = table.index.shape[0], x_shape[table.axis]
        if table.weight is not None or table.outside is not None or out_len % in_len:
            return False
        if not np.array_equal(table.index[:, 0], np.arange(out_len) // (out_len // in_len)):
            return False
    return True


def _phases(table: AxisTable, in_len: int, work: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """For an upsampling by a whole factor r whose taps repeat with period r (linear or cubic
    with half_pixel / asymmetric coordinates, say): offsets c (r, taps) and weights w (r, taps)
    such that output r * k + p reads input clip(k + c[p, t]) with weight w[p, t] for every k.
    None when the table has no such form. Weights are compared in the computation dtype, the
    one they are multiplied in."""
    out_len, taps = table.index.shape
    if table.weight is None or table.outside is not None or out_len % in_len:
        return None
    r = out_len // in_len
    index = table.index.reshape(in_len, r, taps)
    weight = table.weight.astype(work).reshape(in_len, r, taps)
    if not np.all(weight == weight[:1]):
        return None
    k = np.arange(in_len)
    offsets = np.empty((r, taps), np.int64)
    for p, t in np.ndindex(r, taps):
        column = index[:, p, t]
        # Clamped entries hide the offset: try the middle entry's first, then the others.
        candidates = [column[in_len // 2] - in_len // 2, *np.unique(column - k)]
        offset = next((c for c in candidates if np.array_equal(column, np.clip(k + c, 0, in_len - 1))), None)
        if offset is None:
            return None
        offsets[p, t] = offset
    return offsets, weight[0]


def _axis_index(rank: int, axis: int, index) -> tuple:
    return (slice(None),) * axis + (index,) + (slice(None),) * (rank - axis - 1)


class _GatherPass:
    """Any resampled axis: the taps gathered with one np.take (tap-major), weighted with one
    multiply and summed tap after tap (the order of the unprepared code: exact same values); a
    nearest pass is the np.take alone."""

    def __init__(self, table: AxisTable, shape: list[int], dtype: np.dtype, work: np.dtype):
        axis, (out_len, taps) = table.axis, table.index.shape
        rank = len(shape)
        trailing = (1,) * (rank - axis - 1)
        self.axis, self.weighted = axis, table.weight is not None
        if not self.weighted:
            self.index = table.index[:, 0].astype(np.intp)
            return
        self.cast = np.empty(shape, work) if work != dtype else None
        self.index = np.ascontiguousarray(table.index.T).reshape(-1).astype(np.intp)
        gathered = np.empty(shape[:axis] + [taps * out_len] + shape[axis + 1:], work)
        self.gathered = gathered
        split = gathered.reshape(shape[:axis] + [taps, out_len] + shape[axis + 1:])
        self.taps = [split[_axis_index(rank, axis, t)] for t in range(taps)]
        self.weight = np.ascontiguousarray(table.weight.T, work).reshape((taps, out_len) + trailing)
        self.split = split

    def run(self, data: np.ndarray, target: np.ndarray) -> None:
        if not self.weighted:
            np.take(data, self.index, axis=self.axis, out=target, mode="clip")  # indices are in range
            return
        if self.cast is not None:
            np.copyto(self.cast, data)
            data = self.cast
        np.take(data, self.index, axis=self.axis, out=self.gathered, mode="clip")
        np.multiply(self.split, self.weight, out=self.split)
        taps = self.taps
        if len(taps) == 1:
            np.copyto(target, taps[0])
            return
        np.add(taps[0], taps[1], out=target)
        for tap in taps[2:]:
            np.add(target, tap, out=target)


class _PhasePass:
    """Upsampling by a whole factor r with taps that repeat every r outputs (see _phases): the
    input goes into a buffer padded by repeating its edge elements (what clamped indices read),
    and output phase p (every r-th element from p) is sum_t w[p, t] * buffer[k + c[p, t]]. The
    few distinct weights multiply the whole buffer once (one call: products[j] = weight j *
    buffer), and each phase adds shifted slices of those products in tap order: the same products
    summed in the same order as the gather pass, with no gather and fewer calls (linear 2x: one
    multiply and two adds instead of two gathers, two multiplies and two adds). On an axis that is
    not the innermost, where weights and offsets step evenly from phase to phase, one strided view
    per tap covers all phases."""

    def __init__(self, table: AxisTable, shape: list[int], work: np.dtype, phases):
        offsets, weight = phases
        axis, n = table.axis, shape[table.axis]
        rank = len(shape)
        self.axis, r = axis, offsets.shape[0]
        low, high = max(0, -int(offsets.min())), max(0, int(offsets.max()))
        # Distinct weights by bit pattern (0.0 and -0.0 give products of different signs).
        bits = weight.view(np.dtype(f"u{work.itemsize}"))
        distinct, which = np.unique(bits, return_inverse=True)
        which = which.reshape(r, -1)
        self.weights = distinct.view(work).reshape((-1,) + (1,) * rank)
        padded_shape = shape[:axis] + [n + low + high] + shape[axis + 1:]
        self.padded = np.empty(padded_shape, work)
        self.products = np.empty([len(distinct), *padded_shape], work)
        self.interior = self.padded[_axis_index(rank, axis, slice(low, low + n))]
        # (destination, source) of the edge copies: the first / last input element, repeated
        edges = [(slice(0, low), slice(0, 1))] if low else []
        if high:
            edges.append((slice(low + n, None), slice(n - 1, n)))
        self.edges = [(self.padded[_axis_index(rank, axis, dst)], _axis_index(rank, axis, src)) for dst, src in edges]
        self.split_shape = tuple(shape[:axis] + [n, r] + shape[axis + 1:])
        products = self.products
        offset_steps, weight_steps = np.diff(offsets, axis=0), np.diff(which, axis=0)
        self.grouped = (axis < rank - 1 and r > 1 and np.all(offset_steps == offset_steps[:1])
                        and np.all(weight_steps == weight_steps[:1]))
        if self.grouped:
            step = products.strides[axis + 1]
            self.groups = [[as_strided(products[which[0, t]][_axis_index(rank, axis, slice(low + c, None))],
                                       self.split_shape,
                                       products.strides[1:axis + 1]
                                       + (step, int(offset_steps[0, t]) * step
                                          + int(weight_steps[0, t]) * products.strides[0])
                                       + products.strides[axis + 2:], writeable=False)
                            for t, c in enumerate(offsets[0])]]
        else:
            self.groups = [[products[which[p, t]][_axis_index(rank, axis, slice(low + c, low + c + n))]
                            for t, c in enumerate(offsets[p])] for p in range(r)]
        self.filled = False  # True when the previous pass writes straight into the interior
        self.target = self.views = None

    def run(self, data: np.ndarray, target: np.ndarray) -> None:
        if not self.filled:
            np.copyto(self.interior, data)
        interior = self.interior
        for dst, src in self.edges:
            np.copyto(dst, interior[src])
        np.multiply(self.padded, self.weights, out=self.products)
        if target is not self.target:  # the output's phase views, built again when it changes
            # A view (never a copy, as reshape could give for a view of the next padded buffer):
            # the resampled axis of stride s as (k, phase) with strides (r * s, s).
            axis, r = self.axis, self.split_shape[self.axis + 1]
            stride = target.strides[axis]
            split = as_strided(target, self.split_shape,
                               target.strides[:axis] + (stride * r, stride) + target.strides[axis + 1:])
            self.target = target
            self.views = [split] if self.grouped else [split[_axis_index(split.ndim, self.axis + 1, p)]
                                                       for p in range(self.split_shape[self.axis + 1])]
        for out, terms in zip(self.views, self.groups):
            if len(terms) == 1:
                np.copyto(out, terms[0])
                continue
            np.add(terms[0], terms[1], out=out)
            for term in terms[2:]:
                np.add(out, term, out=out)


class _ResizePlan:
    compiled = None  # compiled_loops.resize_planes and its arguments but x and out, where it runs the plan

    def __init__(self, ex, x_shape: tuple[int, ...], dtype: np.dtype, roi, scales, sizes):
        arrays = normalize_values(roi, scales, sizes)

        def fail(message: str) -> Exception:
            return ValueError(f"{ex.step.label}: {message}")

        out_shape, plan = plan_resize(ex.attrs, tuple(x_shape), *arrays, fail)
        # Shrinking axes first leaves less data for the axes after them; among equal ratios the
        # innermost axis first, where each element costs most (short strided runs).
        plan = sorted(plan, key=lambda s: (s.out_len / s.in_len, -s.axis))
        tables = [axis_table(ex.attrs, s) for s in plan]
        self.shape, self.dtype = out_shape, dtype
        self.empty = 0 in out_shape
        self.repeat = None
        self.passes: list = []  # (pass, result buffer or None for the last pass, outside mask, fill)
        self.final = None
        if self.empty or not tables:
            return
        if _whole_factors(tables, x_shape):
            rank = len(x_shape)
            factors = {t.axis: t.index.shape[0] // x_shape[t.axis] for t in tables}
            split = [d for a in range(rank) for d in ((x_shape[a], factors[a]) if a in factors else (x_shape[a],))]
            spread = [d for a in range(rank) for d in ((x_shape[a], 1) if a in factors else (x_shape[a],))]
            # One copy per element of the innermost axis's factor: a single broadcasting copy
            # would run numpy's inner loop over that factor alone (2 elements), 3x slower.
            self.repeat = (split, spread, factors.get(rank - 1, 1))
            return
        shape, current = list(x_shape), dtype
        extrapolation = ex.attrs["extrapolation_value"]
        for table in tables:
            axis, out_len = table.axis, table.index.shape[0]
            work = current if table.weight is None else _compute_dtype(current)
            phases = _phases(table, shape[axis], work)
            step = (_GatherPass(table, shape, current, work) if phases is None
                    else _PhasePass(table, shape, work, phases))
            current = work
            shape[axis] = out_len
            outside = fill = None
            if table.outside is not None:
                outside = table.outside.reshape((-1,) + (1,) * (len(shape) - axis - 1))
                fill = np.asarray(extrapolation).astype(current)
            self.passes.append([step, np.empty(shape, current), outside, fill])
        self.passes[-1][1] = None  # the last pass writes into the output (or `final`)
        for before, (after, *_) in zip(self.passes, self.passes[1:]):
            if isinstance(after, _PhasePass) and after.interior.dtype == before[1].dtype:
                before[1], after.filled = after.interior, True  # straight into the next padded buffer
        # The last pass writes into the output unless its values need converting first.
        self.final = np.empty(shape, current) if current != dtype else None
        self.compiled = _compiled_planes(tables, x_shape, dtype, out_shape)


# Resizes of up to this many output elements take the compiled loop, once another step has started
# numba (about 0.3 s in a process's first run, more than a small resize saves). Linear 2x of 8
# planes alone (/tmp/w/rs2.py, whole one-node runs): 16x16 x0.56-0.65 of the numpy passes' time,
# 24x24 x0.79, 32x32 (32 768 outputs) x0.74-0.91, 44x44 x0.94-0.99, 56x56 x1.07-1.35: the loop's
# gathers along W are scalar, where the passes' few large numpy calls run vectorized.
COMPILED_RESIZE_SIZE = 32768


def _compiled_planes(tables: list[AxisTable], x_shape, dtype: np.dtype, out_shape) -> tuple | None:
    """(compiled_loops.resize_planes, its arguments after x and before out) where it gives the
    passes' floats (float32 throughout: every pass, and no final conversion) and runs faster:
    linear or cubic along the last two axes in the plan's order, the axes before them untouched,
    nothing outside the input (tf_crop_and_resize), a small output; else None."""
    rank = len(x_shape)
    if (dtype != np.float32 or rank < 3 or sorted(t.axis for t in tables) != [rank - 2, rank - 1]
            or any(t.weight is None or t.outside is not None for t in tables)
            or math.prod(out_shape) > COMPILED_RESIZE_SIZE or not (compiled.started() and compiled.enabled())):
        return None
    width_first = tables[0].axis == rank - 1
    height, width = sorted(tables, key=lambda t: t.axis)
    between = (x_shape[-2], out_shape[-1]) if width_first else (out_shape[-2], x_shape[-1])
    return (compiled.loops().resize_planes, width.index, width.weight.astype(np.float32), height.index,
            height.weight.astype(np.float32), width_first, np.empty(between, np.float32))


def _prepare(ex) -> None:
    """Build the plan now when roi / scales / sizes are known (they are in a planned session);
    otherwise the first run builds it from the given inputs."""
    step = ex.step
    values = list(step.input_values or []) + [None] * 4
    names = list(step.inputs) + [""] * 4
    if any(names[i] and values[i] is None for i in (1, 2, 3)):
        return
    ex.state["plan"] = _ResizePlan(ex, step.input_specs[0].shape, np.dtype(step.input_specs[0].dtype),
                                   *values[1:4])


def _describe(ex) -> str:
    plan = ex.state.get("plan")
    return "compiled loop (resize_planes)" if plan is not None and plan.compiled is not None else "numpy"


@numpy_kernel("Resize", writes_outputs=True, prepare=_prepare, describe=_describe)
def resize(ex, inputs, outputs):
    x, roi, scales, sizes = (list(inputs) + [None] * 4)[:4]
    out = outputs[0]
    plan = ex.state.get("plan")
    if plan is None:  # built once: the sampling grid depends on shapes and roi / scales / sizes only
        plan = ex.state["plan"] = _ResizePlan(ex, x.shape, x.dtype, roi, scales, sizes)
    if plan.empty:
        return
    if plan.compiled is not None:
        loop, *arguments = plan.compiled
        planes = math.prod(x.shape[:-2])
        loop(np.ascontiguousarray(x).reshape(planes, *x.shape[-2:]), *arguments, out.reshape(planes, *out.shape[-2:]))
        return
    if plan.repeat is not None:
        split, spread, factor = plan.repeat
        split, spread = out.reshape(split), x.reshape(spread)
        if factor == 1:
            np.copyto(split, spread)
        else:
            for phase in range(factor):
                np.copyto(split[..., phase], spread[..., 0])
        return
    if not plan.passes:  # nothing resampled
        np.copyto(out, x)
        return
    data = x
    for step, target, outside, fill in plan.passes:
        if target is None:
            target = out if plan.final is None else plan.final
        step.run(data, target)
        if outside is not None:
            np.copyto(target, fill, where=outside)
        data = target
    if plan.final is not None:
        np.copyto(out, _to_dtype(plan.final, out.dtype))
