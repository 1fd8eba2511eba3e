"""Norm family on numpy. Statistics are computed in at least float32 (float16 sums drift)."""
from __future__ import annotations

import math

import numpy as np

from . import compiled
from .kernel import numpy_kernel


def _channel(param: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) parameter shaped to broadcast over (N, C, *spatial); (C, *spatial) stays as is."""
    return param.reshape((-1,) + (1,) * (ndim - 2)) if param.ndim == 1 else param


def _target(out: np.ndarray, work: np.dtype) -> np.ndarray | None:
    """The step's output as the kernel's working array where it can be (the statistics' type, and
    contiguous for the reshaped views): the result is then computed there, not copied there."""
    return out if out.dtype == work and out.flags.c_contiguous else None


def _deliver(result: np.ndarray, out: np.ndarray) -> None:
    if result is not out:
        np.copyto(out, result, casting="unsafe")


@numpy_kernel("BatchNorm", writes_outputs=True)
def batch_norm(ex, inputs, outputs):
    x, scale, bias, mean, var = inputs
    # y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a: two ops per element.
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + ex.attrs["epsilon"])
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    work = np.promote_types(x.dtype, np.float32)
    y = np.multiply(x.astype(work, copy=False), _channel(a, x.ndim).astype(work), out=_target(outputs[0], work))
    y += _channel(b, x.ndim).astype(work)
    _deliver(y, outputs[0])


def _centre(xs: np.ndarray, axes: tuple, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """xs minus its mean over `axes`, and that mean. Taken as deviations from each row's first
    element: a row far from zero (50 +- 0.1) then loses nothing to the float32 mean, which alone
    puts 1e-4 of a unit into every output (the GPU kernels shift their sums alike)."""
    first = xs[tuple(slice(0, 1) if axis in axes else slice(None) for axis in range(xs.ndim))]
    shifted = np.subtract(xs, first, out=out)
    offset = shifted.mean(axis=axes, keepdims=True)
    shifted -= offset
    return shifted, first + offset


def _mean_square(centred: np.ndarray, axes: tuple) -> np.ndarray:
    """The mean of centred's squares over axes (keepdims): over trailing axes a row-wise dot
    product, without a squared copy of centred's size."""
    if centred.size and axes == tuple(range(centred.ndim - len(axes), centred.ndim)) and centred.flags.c_contiguous:
        kept = centred.shape[:centred.ndim - len(axes)]
        rows = centred.reshape(math.prod(kept), -1)
        total = _row_dot(rows, rows).reshape(*kept, *(1,) * len(axes))
        return total / centred.dtype.type(rows.shape[1])
    return np.mean(np.square(centred), axis=axes, keepdims=True)


def _normalize(x: np.ndarray, axes: tuple, epsilon: float, work,
               out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x - mean) / sqrt(var + epsilon), mean and 1 / sqrt(var + epsilon): one array of x's size,
    out when given (whole-array temporaries are fresh mappings on every run: docs/performance.md)."""
    centred, mean = _centre(x.astype(work, copy=False), axes, out)
    inv_std = 1 / np.sqrt(_mean_square(centred, axes) + work.type(epsilon))
    centred *= inv_std
    return centred, mean, inv_std


@numpy_kernel("InstanceNorm", writes_outputs=True)
def instance_norm(ex, inputs, outputs):
    x, scale, bias = inputs
    n, c = x.shape[:2]
    views = _row_path(x, outputs[0], n * c)
    if views is not None:  # five passes: sum, centre, squares, scale, bias
        x2, y2 = views
        mean, inv_std = np.empty((n * c, 1), x.dtype), np.empty((n * c, 1), x.dtype)
        _centre_rows(x2, y2, mean, inv_std, ex.attrs["epsilon"])
        factor = inv_std.reshape(n, c)  # one per row: (image, channel)
        factor *= scale.astype(x.dtype, copy=False)
        y2 *= inv_std
        y3 = y2.reshape(n, c, -1)
        y3 += bias.astype(x.dtype, copy=False)[:, None]
        return
    work = np.promote_types(x.dtype, np.float32)
    y, _, _ = _normalize(x, tuple(range(2, x.ndim)), ex.attrs["epsilon"], work, _target(outputs[0], work))
    y *= _channel(scale, x.ndim).astype(work)
    y += _channel(bias, x.ndim).astype(work)
    _deliver(y, outputs[0])


# Row-wise dot product: the np.vecdot ufunc (numpy >= 2) is one call; einsum where it is missing.
_row_dot = getattr(np, "vecdot", None) or (lambda a, b, out=None: np.einsum("ij,ij->i", a, b, out=out))


def _compiled_rows(x, y, scale, bias, axis: int) -> bool:
    """Whether LayerNorm runs as compiled_loops.layer_norm_rows (backends/numpy/compiled.py), from
    shapes and dtypes (tensor specs at resize, or arrays): float32 throughout, a scale and bias of a
    row's size each (not broadcast within a row); zoo bert's LayerNorm at one token x0.3 of the
    numpy calls' time."""
    width = math.prod(x.shape[axis % len(x.shape):])
    return (width > 0 and all(np.dtype(t.dtype) == np.float32 for t in (x, y, scale, bias) if t is not None)
            and all(math.prod(t.shape) == width for t in (scale, bias) if t is not None) and compiled.enabled())


def _prepare_layer_norm(ex) -> None:
    specs = list(ex.step.input_specs) + [None] * 3
    ex.state["compiled_rows"] = _compiled_rows(specs[0], ex.step.output_specs[0], specs[1], specs[2],
                                               ex.attrs["axis"])
    # The loop itself, looked up once here, not on every run.
    ex.state["rows_loop"] = compiled.loops().layer_norm_rows if ex.state["compiled_rows"] else None


def _describe_layer_norm(ex) -> str:
    return "compiled loop" if ex.state.get("compiled_rows") else "numpy"


@numpy_kernel("LayerNorm", writes_outputs=True, prepare=_prepare_layer_norm, describe=_describe_layer_norm)
def layer_norm(ex, inputs, outputs):
    if "compiled_rows" not in ex.state:  # run without prepare (a direct call)
        _prepare_layer_norm(ex)
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    y = outputs[0]
    if len(inputs) > 3 and inputs[3] is not None:  # the skip input: normalize X + Skip
        skip = inputs[3]
        # The sum in the output itself where it fits there (the steps below work in place on it).
        # (shape inference admits only skips that broadcast to X, so X + Skip has X's shape)
        if (y.shape == x.shape and y.dtype == np.result_type(x, skip)
                and y.flags.c_contiguous and not np.may_share_memory(y, x) and not np.may_share_memory(y, skip)):
            x = np.add(x, skip, out=y)
        else:
            x = x + skip
    axis = ex.attrs["axis"] % x.ndim
    work = np.dtype(ex.attrs["stash_dtype"])
    if x.dtype != work or y.dtype != work or x.size == 0:
        _layer_norm_cast(ex, x, scale, bias, axis, work, outputs)
        return
    rows = math.prod(x.shape[:axis])
    y2 = y.reshape(rows, -1)
    stats = (rows, 1)
    mean = outputs[1].reshape(stats) if len(outputs) > 1 else np.empty(stats, work)
    inv_std = outputs[2].reshape(stats) if len(outputs) > 2 else np.empty(stats, work)
    if ex.state["compiled_rows"] and x.flags.c_contiguous and y.flags.c_contiguous:
        no_bias = scale[:0].reshape(0)
        ex.state["rows_loop"](x.reshape(rows, -1), y2, scale.reshape(-1), no_bias if bias is None else bias.reshape(-1),
                              mean[:, 0], inv_std[:, 0], ex.attrs["epsilon"])
        return
    _centre_rows(x.reshape(rows, -1), y2, mean, inv_std, ex.attrs["epsilon"])
    y2 *= inv_std
    y *= scale
    if bias is not None:
        y += bias


def _centre_rows(x2: np.ndarray, y2: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, epsilon: float) -> None:
    """y2 = x2 minus its row means, written in place (about ten numpy calls, no temporaries of
    x2's size), the means in mean and 1 / sqrt(variance + epsilon) in inv_std (both (rows, 1), of
    x2's dtype, which y2 shares)."""
    work = x2.dtype
    count = work.type(x2.shape[1])
    np.add.reduce(x2, axis=1, keepdims=True, out=mean)
    mean /= count
    np.subtract(x2, mean, out=y2)
    _row_dot(y2, y2, out=inv_std[:, 0])  # sum of squares of the centred rows
    inv_std /= count
    inv_std += work.type(epsilon)
    np.sqrt(inv_std, out=inv_std)
    np.reciprocal(inv_std, out=inv_std)
    # The float32 mean is off by up to half its ulp. Within a standard deviation of zero that is
    # below the outputs' own rounding; further out (rows of 50 +- 0.1: 1e-4 of a unit) the centred
    # rows' own mean, that rounding, comes off too. Two passes more, only for such rows (_centre
    # shifts every row instead, which costs this fast path a pass on every run: x1.19).
    if (np.abs(mean) * inv_std).max() > 1:
        residual = np.add.reduce(y2, axis=1, keepdims=True) / count
        y2 -= residual
        mean += residual


def _row_path(x: np.ndarray, out: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, out) as (rows, row length) views for _centre_rows, where x and out are float32 or
    float64 alike, out contiguous and x a view of whole rows (feeds may be strided); else None."""
    if x.dtype != out.dtype or x.dtype.kind != "f" or x.dtype.itemsize < 4 or not x.size \
            or not out.flags.c_contiguous or not x.flags.c_contiguous or np.may_share_memory(x, out):
        return None
    return x.reshape(rows, -1), out.reshape(rows, -1)


def _layer_norm_cast(ex, x, scale, bias, axis, work, outputs) -> None:
    """LayerNorm where the statistics' type differs from x's (float16 inputs, float64 stash)."""
    y, mean, inv_std = _normalize(x, tuple(range(axis, x.ndim)), ex.attrs["epsilon"], work)
    y = y * scale.astype(work)
    if bias is not None:
        y += bias.astype(work)
    for out, result in zip(outputs, (y, mean, inv_std)):
        np.copyto(out, result, casting="unsafe")


@numpy_kernel("RMSNorm")
def rms_norm(ex, x, scale):
    axis = ex.attrs["axis"] % x.ndim
    work = np.dtype(ex.attrs["stash_dtype"])
    xs = x.astype(work, copy=False)
    mean_square = np.mean(xs * xs, axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xs / np.sqrt(mean_square + work.type(ex.attrs["epsilon"])) * scale.astype(work)
    return y.astype(x.dtype, copy=False)


@numpy_kernel("GroupNorm", writes_outputs=True)
def group_norm(ex, inputs, outputs):
    x, scale, bias = inputs
    n, c = x.shape[:2]
    groups = ex.attrs["num_groups"]
    work = np.promote_types(np.dtype(ex.attrs["stash_dtype"]), np.float32)
    # A group is C / G consecutive channels: with the spatial axes, one contiguous row.
    if x.size == 0:
        return
    if ex.attrs["per_group"]:  # one value per group, shared by its channels
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    views = _row_path(x, outputs[0], n * groups) if x.dtype == work else None
    if views is not None:  # five passes, as InstanceNorm: the factor is per (image, channel)
        x2, y2 = views
        mean, inv_std = np.empty((n * groups, 1), work), np.empty((n * groups, 1), work)
        _centre_rows(x2, y2, mean, inv_std, ex.attrs["epsilon"])
        factor = inv_std.reshape(n, groups, 1) * scale.astype(work, copy=False).reshape(groups, -1)
        y3 = y2.reshape(n, c, -1)
        y3 *= factor.reshape(n, c, 1)
        y3 += bias.astype(work, copy=False)[:, None]
        return
    target = _target(outputs[0], work)
    y, _, _ = _normalize(x.reshape(n, groups, -1), (2,), ex.attrs["epsilon"], work,
                         None if target is None else target.reshape(n, groups, -1))
    y = y.reshape(x.shape) if target is None else target
    y *= _channel(scale, x.ndim).astype(work)
    y += _channel(bias, x.ndim).astype(work)
    _deliver(y, outputs[0])


@numpy_kernel("LpNorm")
def lp_norm(ex, x):
    axis = ex.attrs["axis"] % x.ndim
    xs = x.astype(np.promote_types(x.dtype, np.float32), copy=False)
    if ex.attrs["p"] == 1:
        norm = np.abs(xs).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.square(xs).sum(axis=axis, keepdims=True))
    # A zero norm (an all-zero row) gives zeros, not 0 / 0.
    y = np.divide(xs, norm, out=np.zeros_like(xs), where=norm != 0)
    return y.astype(x.dtype, copy=False)


@numpy_kernel("LRN", writes_outputs=True)
def lrn(ex, inputs, outputs):
    x = inputs[0]
    size, c = ex.attrs["size"], x.shape[1]
    work = np.promote_types(x.dtype, np.float32)
    xs = x.astype(work, copy=False)
    square = xs * xs
    # The window of channel k is [k - (size - 1) // 2, k + size // 2], clipped to [0, C): one
    # shifted add of whole channel blocks per window tap. Then in place: the squares and the output.
    total = _target(outputs[0], work)
    total = np.zeros_like(square) if total is None else total
    total.fill(0)
    for shift in range(-((size - 1) // 2), size // 2 + 1):
        lo, hi = max(0, -shift), min(c, c - shift)
        if lo < hi:
            total[:, lo:hi] += square[:, lo + shift:hi + shift]
    total *= work.type(ex.attrs["alpha"] / size)
    total += work.type(ex.attrs["bias"])
    np.power(total, work.type(ex.attrs["beta"]), out=total)
    np.divide(xs, total, out=total)
    _deliver(total, outputs[0])


@numpy_kernel("MeanVarianceNorm", writes_outputs=True)
def mean_variance_norm(ex, inputs, outputs):
    x = inputs[0]
    axes = tuple(sorted(a % x.ndim for a in ex.attrs["axes"]))
    if x.size == 0:
        return
    work = np.promote_types(x.dtype, np.float32)
    centred, _ = _centre(x.astype(work, copy=False), axes, _target(outputs[0], work))
    centred /= np.sqrt(_mean_square(centred, axes)) + work.type(ex.attrs["epsilon"])
    _deliver(centred, outputs[0])
