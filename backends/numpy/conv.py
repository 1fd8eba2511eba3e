"""Conv family on numpy: Conv as im2col (a strided window view, copied tap by tap) + one batched
matmul across groups; ConvTranspose as one batched matmul + col2im (a strided add per kernel tap).

The window helpers are shared with the Pool family.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...engine.ops.base import InferContext
from ...engine.ops.conv import conv_transpose_geometry, resolve_pads, spatial_list
from .elementwise import apply_unary
from .kernel import numpy_kernel


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


def _conv_plan(ex):
    plan = ex.state.get("plan")
    if plan is None:
        ctx = infer_context(ex)
        x, w = ctx.shape(0), ctx.shape(1)
        rank = len(x) - 2
        strides = spatial_list(ctx, "strides", rank, 1)
        dilations = spatial_list(ctx, "dilations", rank, 1)
        begin, end = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
        plan = ex.state["plan"] = (strides, dilations, begin, end)
    return plan


@numpy_kernel("Conv")
def conv(ex, x, w, b=None, residual=None):
    strides, dilations, begin, end = _conv_plan(ex)
    out = ex.step.output_specs[0].shape[2:]
    n, c = x.shape[:2]
    m, kernel = w.shape[0], w.shape[2:]
    group = ex.attrs["group"]
    view = window_view(pad_spatial(x, begin, end), out, kernel, strides, dilations)
    # im2col: cols[n, c, *tap, *out] = view[n, c, *out, *tap], copied one tap at a time (each copy
    # moves whole output planes; a single transposed copy of the view is ~5x slower).
    cols = np.empty((n, c, *kernel, *out), dtype=x.dtype)
    for tap in np.ndindex(*kernel):
        cols[(slice(None), slice(None), *tap)] = view[(Ellipsis, *tap)]
    cols = cols.reshape(n, group, (c // group) * math.prod(kernel), math.prod(out))
    weights = w.reshape(group, m // group, -1)
    y = np.matmul(weights, cols).reshape(n, m, *out)  # (G, Mg, CgK) @ (N, G, CgK, P), batched
    return finish(ex, y, b, residual)


@numpy_kernel("ConvTranspose")
def conv_transpose(ex, x, w, b=None):
    plan = ex.state.get("plan")
    if plan is None:
        plan = ex.state["plan"] = conv_transpose_geometry(infer_context(ex))
    out, begin, _, strides, dilations, _ = plan
    n, c, *sizes = x.shape
    group = ex.attrs["group"]
    mg, kernel = w.shape[1], w.shape[2:]
    m = mg * group
    # Every input pixel scatters a (M, *k) patch: cols[n, g, (m, k), p] = sum_c W[g, c, (m, k)] x[n, g, c, p].
    weights = ex.state.get("weights")
    if weights is None:
        # Contiguous (G, Mg*K, Cg) for BLAS; repacked once when the weight is a constant.
        weights = np.ascontiguousarray(w.reshape(group, c // group, mg * math.prod(kernel)).transpose(0, 2, 1))
        values = ex.step.input_values
        if len(values) > 1 and values[1] is not None:
            ex.state["weights"] = weights
    cols = np.matmul(weights, x.reshape(n, group, c // group, math.prod(sizes)))
    cols = cols.reshape(n, m, *kernel, *sizes)
    # col2im: tap t lands at output t * dilation + i * stride; the buffer also covers output
    # beyond the natural size (output_shape / output_padding larger than the scattered extent).
    full = [max((s - 1) * st + (k - 1) * d + 1, bg + o)
            for s, st, k, d, bg, o in zip(sizes, strides, kernel, dilations, begin, out, strict=True)]
    buffer = np.zeros((n, m, *full), dtype=np.result_type(x, w))
    for tap in np.ndindex(*kernel):
        where = tuple(slice(t * d, t * d + (s - 1) * st + 1, st)
                      for t, d, s, st in zip(tap, dilations, sizes, strides, strict=True))
        buffer[(slice(None), slice(None), *where)] += cols[(slice(None), slice(None), *tap)]
    y = buffer[(slice(None), slice(None), *(slice(bg, bg + o) for bg, o in zip(begin, out, strict=True)))]
    return finish(ex, np.ascontiguousarray(y), b)
