"""Norm family on numpy. Statistics are computed in at least float32 (float16 sums drift)."""
from __future__ import annotations

import numpy as np

from .kernel import numpy_kernel


def _channel(param: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) parameter shaped to broadcast over (N, C, *spatial); (C, *spatial) stays as is."""
    return param.reshape((-1,) + (1,) * (ndim - 2)) if param.ndim == 1 else param


@numpy_kernel("BatchNorm")
def batch_norm(ex, x, scale, bias, mean, var):
    # y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a: two ops per element.
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + ex.attrs["epsilon"])
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    work = np.promote_types(x.dtype, np.float32)
    y = x.astype(work, copy=False) * _channel(a, x.ndim).astype(work)
    y += _channel(b, x.ndim).astype(work)
    return y.astype(x.dtype, copy=False)


def _normalize(x: np.ndarray, axes: tuple, epsilon: float, work) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs = x.astype(work, copy=False)
    mean = xs.mean(axis=axes, keepdims=True)
    centred = xs - mean
    inv_std = 1 / np.sqrt(np.mean(centred * centred, axis=axes, keepdims=True) + work.type(epsilon))
    return centred * inv_std, mean, inv_std


@numpy_kernel("InstanceNorm")
def instance_norm(ex, x, scale, bias):
    work = np.promote_types(x.dtype, np.float32)
    y, _, _ = _normalize(x, tuple(range(2, x.ndim)), ex.attrs["epsilon"], work)
    y = y * _channel(scale, x.ndim).astype(work) + _channel(bias, x.ndim).astype(work)
    return y.astype(x.dtype, copy=False)


@numpy_kernel("LayerNorm")
def layer_norm(ex, x, scale, bias=None):
    axis = ex.attrs["axis"] % x.ndim
    work = np.dtype(ex.attrs["stash_dtype"])
    y, mean, inv_std = _normalize(x, tuple(range(axis, x.ndim)), ex.attrs["epsilon"], work)
    y = y * scale.astype(work)
    if bias is not None:
        y += bias.astype(work)
    return y.astype(x.dtype, copy=False), mean, inv_std
