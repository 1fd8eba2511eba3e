"""numpy kernels of the scatter family (engine/ops/scatter.py).

Index kernels check their indices and raise an InputError naming the node and the first bad index.
Scatters apply their updates in index order: with repeated targets the last update wins
(reduction none) or all are combined in order (ufunc.at is unbuffered and sequential).
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.errors import InputError
from ...engine.geometry import contiguous_strides
from ...engine.ops.scatter import out_of_range
from .kernel import numpy_kernel

UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def wrapped(ex, indices: np.ndarray, dims, what: str) -> np.ndarray:
    """int64 indices with negative ones counted from the end; dims is one bound or one per
    position of the last axis. Raises naming the node and the first index out of range."""
    bad = out_of_range(indices, dims)
    if bad is not None:
        raise InputError(f"{ex.step.label}: {what} {bad[0]} is out of range [-{bad[1]}, {bad[1]})")
    indices = np.asarray(indices, np.int64)
    return np.where(indices < 0, indices + np.asarray(dims, np.int64), indices)


def apply_updates(out: np.ndarray, targets: np.ndarray, updates: np.ndarray, reduction: str) -> None:
    """out[targets[t]] = updates[t] (or combined by reduction) for t in order; out is indexed on
    its first axis, updates holds one row per target."""
    if reduction != "none":
        UFUNCS[reduction].at(out, targets, updates)
        return
    # numpy promises no order for repeated targets in one fancy assignment: keep the last of each.
    first_of_reversed = np.unique(targets[::-1], return_index=True)[1]
    last = len(targets) - 1 - first_of_reversed
    out[targets[last]] = updates[last]


@numpy_kernel("GatherElements")
def gather_elements(ex, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis = ex.attrs["axis"] % data.ndim
    index = wrapped(ex, indices, data.shape[axis], f"index along axis {axis}")
    # Indices may be smaller than data outside axis: gather from the matching corner of data.
    corner = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))]
    return np.take_along_axis(corner, index, axis=axis)


@numpy_kernel("ScatterElements")
def scatter_elements(ex, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    axis = ex.attrs["axis"] % data.ndim
    index = wrapped(ex, indices, data.shape[axis], f"index along axis {axis}")
    strides = contiguous_strides(data.shape)
    targets = index * strides[axis]
    for d in range(data.ndim):  # add the coordinates of the other axes (broadcast aranges)
        if d != axis:
            shape = [1] * data.ndim
            shape[d] = indices.shape[d]
            targets = targets + np.arange(indices.shape[d]).reshape(shape) * strides[d]
    out = data.copy()
    apply_updates(out.reshape(-1), targets.reshape(-1), updates.reshape(-1), ex.attrs["reduction"])
    return out


@numpy_kernel("GatherND")
def gather_nd(ex, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    b, m = ex.attrs["batch_dims"], indices.shape[-1]
    index = wrapped(ex, indices, data.shape[b:b + m], "index")
    batch, tuples = math.prod(data.shape[:b]), math.prod(indices.shape[b:-1])
    rows = (index * np.asarray(contiguous_strides(data.shape[b:b + m]), np.int64)).sum(-1).reshape(batch, tuples)
    table = data.reshape(batch, math.prod(data.shape[b:b + m]), math.prod(data.shape[b + m:]))
    return table[np.arange(batch)[:, None], rows].reshape(indices.shape[:-1] + data.shape[b + m:])


@numpy_kernel("ScatterND")
def scatter_nd(ex, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    m = indices.shape[-1]
    index = wrapped(ex, indices, data.shape[:m], "index")
    targets = (index * np.asarray(contiguous_strides(data.shape[:m]), np.int64)).sum(-1).reshape(-1)
    out = data.copy()
    inner = math.prod(data.shape[m:])
    apply_updates(out.reshape(math.prod(data.shape[:m]), inner), targets, updates.reshape(len(targets), inner),
                  ex.attrs["reduction"])
    return out


@numpy_kernel("OneHot")
def one_hot(ex, indices: np.ndarray, depth: np.ndarray, values: np.ndarray) -> np.ndarray:
    shape = ex.step.output_specs[0].shape
    axis = ex.attrs["axis"] % len(shape)
    size = shape[axis]
    index = np.asarray(indices).astype(np.int64)  # float indices truncate toward zero
    index = np.where(index < 0, index + size, index)  # still out of range: all off, as ONNX says
    hot = np.expand_dims(index, axis) == np.arange(size).reshape((size,) + (1,) * (index.ndim - axis))
    off, on = np.asarray(values).reshape(-1)
    return np.where(hot, on, off)


def clamp_diagonal(k: int, rows: int, cols: int) -> int:
    """k limited to [-rows, cols]: every diagonal beyond selects the same elements (none or all)."""
    return min(max(int(k), -rows), cols)


@numpy_kernel("EyeLike")
def eye_like(ex, x: np.ndarray) -> np.ndarray:
    rows, cols = x.shape
    return np.eye(rows, cols, clamp_diagonal(ex.attrs["k"], rows, cols), dtype=ex.step.output_specs[0].dtype)


@numpy_kernel("Trilu")
def trilu(ex, x: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    diagonal = clamp_diagonal(np.asarray(k).reshape(-1)[0] if k is not None else 0, *x.shape[-2:])
    return np.triu(x, diagonal) if ex.attrs["upper"] else np.tril(x, diagonal)


@numpy_kernel("CumSum")
def cumsum(ex, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    value = int(np.asarray(axis).reshape(-1)[0])
    if not -x.ndim <= value < x.ndim:
        raise InputError(f"{ex.step.label}: axis {value} is out of range for rank {x.ndim}")
    value %= x.ndim
    if ex.attrs["reverse"]:
        x = np.flip(x, value)
    y = np.cumsum(x, axis=value, dtype=x.dtype)
    if ex.attrs["exclusive"] and x.shape[value]:  # shift by one (subtracting x would round differently)
        kept = np.take(y, np.arange(x.shape[value] - 1), axis=value)
        y = np.concatenate([np.zeros_like(np.take(x, [0], axis=value)), kept], axis=value)
    return np.flip(y, value) if ex.attrs["reverse"] else y


@numpy_kernel("ReverseSequence")
def reverse_sequence(ex, x: np.ndarray, sequence_lens: np.ndarray) -> np.ndarray:
    batch_axis, time_axis = ex.attrs["batch_axis"], ex.attrs["time_axis"]
    steps = x.shape[time_axis]
    lens = np.asarray(sequence_lens, np.int64)
    bad = lens[(lens < 0) | (lens > steps)]
    if bad.size:
        raise InputError(f"{ex.step.label}: sequence length {int(bad[0])} is out of range [0, {steps}]")
    shape_t, shape_b = [1] * x.ndim, [1] * x.ndim
    shape_t[time_axis], shape_b[batch_axis] = steps, lens.size
    t, n = np.arange(steps).reshape(shape_t), lens.reshape(shape_b)
    return np.take_along_axis(x, np.where(t < n, n - 1 - t, t), axis=time_axis)
