"""Index-driven ops: GatherElements, GatherND, ScatterElements, ScatterND, OneHot, and the
position-driven ops EyeLike, Trilu, CumSum, ReverseSequence (ONNX semantics).

Index tensors may hold negative indices (counted from the end). Indices known at resize are
checked here, so a bad constant index fails at resize naming the node; indices only known at run
time are checked by the numpy kernels (the GPU kernels document what they do with them).
"""
from __future__ import annotations

import numpy as np

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

REDUCTIONS = ("none", "add", "mul", "max", "min")
INDEX_DTYPES = ("int32", "int64")


def out_of_range(indices: np.ndarray, dims) -> tuple[int, int] | None:
    """(the first index outside [-dim, dim), its dim) or None. dims is one bound for every index,
    or one per position of the last axis (index tuples of GatherND/ScatterND)."""
    flat = np.asarray(indices, np.int64)
    limit = np.broadcast_to(np.asarray(dims, np.int64), flat.shape).reshape(-1)
    flat = flat.reshape(-1)
    bad = np.flatnonzero((flat < -limit) | (flat >= limit))
    return (int(flat[bad[0]]), int(limit[bad[0]])) if bad.size else None


def _check_index_dtype(ctx: InferContext, i: int) -> None:
    if ctx.dtype(i) not in INDEX_DTYPES:
        raise ctx.fail(f"indices must be int32 or int64, got {ctx.dtype(i)}")


def _check_reduction(ctx: InferContext) -> None:
    if ctx.attrs["reduction"] not in REDUCTIONS:
        raise ctx.fail(f"reduction must be one of {list(REDUCTIONS)}, got {ctx.attrs['reduction']!r}")


def _check_known(ctx: InferContext, i: int, dims, what: str) -> None:
    """Fail at resize when input i is known and holds an index outside its bound."""
    known = ctx.value(i, required=False)
    bad = None if known is None else out_of_range(known, dims)
    if bad is not None:
        raise ctx.fail(f"{what} {bad[0]} is out of range [-{bad[1]}, {bad[1]})")


class _IndexOp(OpDef):
    family = "scatter"

    def flops(self, ctx, outputs) -> int:
        return 0  # data movement


@register_op
class GatherElements(_IndexOp):
    """GatherElements(data, indices): out[c] = data[c with c[axis] = indices[c]]; the output has
    the indices' shape (each dim at most data's, except along axis)."""

    op_type = "GatherElements"
    attrs = {"axis": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, ishape = ctx.shape(0), ctx.shape(1)
        _check_index_dtype(ctx, 1)
        if not shape or len(ishape) != len(shape):
            raise ctx.fail(f"data (rank {len(shape)}) and indices (rank {len(ishape)}) need the same rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        if any(i > d for k, (i, d) in enumerate(zip(ishape, shape)) if k != axis):
            raise ctx.fail(f"indices shape {list(ishape)} exceeds data shape {list(shape)} outside axis {axis}")
        _check_known(ctx, 1, shape[axis], f"index along axis {axis}")
        return [TensorSpec(tuple(ishape), ctx.dtype(0))]


def _scatter_elements_check(ctx: InferContext, axis: int) -> None:
    shape, ishape = ctx.shape(0), ctx.shape(1)
    if ctx.shape(2) != ishape:
        raise ctx.fail(f"updates shape {list(ctx.shape(2))} must equal the indices shape {list(ishape)}")
    if any(i > d for k, (i, d) in enumerate(zip(ishape, shape)) if k != axis):
        raise ctx.fail(f"indices shape {list(ishape)} exceeds data shape {list(shape)} outside axis {axis}")


@register_op
class ScatterElements(_IndexOp):
    """ScatterElements(data, indices, updates): a copy of data with out[c with c[axis] =
    indices[c]] = updates[c] (or combined with it by `reduction`), applied in index order."""

    op_type = "ScatterElements"
    attrs = {"axis": Attr("int", 0), "reduction": Attr("string", "none")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, ishape = ctx.shape(0), ctx.shape(1)
        _check_index_dtype(ctx, 1)
        _check_reduction(ctx)
        if not shape or len(ishape) != len(shape):
            raise ctx.fail(f"data (rank {len(shape)}) and indices (rank {len(ishape)}) need the same rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        _scatter_elements_check(ctx, axis)
        if ctx.dtype(2) != ctx.dtype(0):
            raise ctx.fail(f"updates ({ctx.dtype(2)}) and data ({ctx.dtype(0)}) differ in type")
        _check_known(ctx, 1, shape[axis], f"index along axis {axis}")
        return [TensorSpec(tuple(shape), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 0 if ctx.attrs["reduction"] == "none" else int(np.prod(ctx.shape(2), dtype=np.int64))


def nd_split(ctx: InferContext, batch_dims: int = 0) -> int:
    """The index tuple length m of GatherND/ScatterND indices (..., m), checked against data."""
    shape, ishape = ctx.shape(0), ctx.shape(1)
    if not shape or not ishape:
        raise ctx.fail("data and indices need rank >= 1")
    m = ishape[-1]
    if not 1 <= m <= len(shape) - batch_dims:
        raise ctx.fail(f"the last indices dim ({m}) must lie in [1, {len(shape) - batch_dims}] "
                       f"(data rank {len(shape)}, batch_dims {batch_dims})")
    return m


@register_op
class GatherND(_IndexOp):
    """GatherND(data, indices (..., m)): slices data[b..., i_0, ..., i_m-1, ...]; the first
    batch_dims dims of data and indices are shared. Output: indices.shape[:-1] + data.shape[b+m:]."""

    op_type = "GatherND"
    attrs = {"batch_dims": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, ishape = ctx.shape(0), ctx.shape(1)
        _check_index_dtype(ctx, 1)
        b = ctx.attrs["batch_dims"]
        if not 0 <= b < min(len(shape), len(ishape)):
            raise ctx.fail(f"batch_dims {b} must lie in [0, min(data rank, indices rank))")
        if tuple(shape[:b]) != tuple(ishape[:b]):
            raise ctx.fail(f"the first {b} dims of data {list(shape)} and indices {list(ishape)} differ")
        m = nd_split(ctx, b)
        _check_known(ctx, 1, shape[b:b + m], "index")
        return [TensorSpec(tuple(ishape[:-1]) + tuple(shape[b + m:]), ctx.dtype(0))]


@register_op
class ScatterND(_IndexOp):
    """ScatterND(data, indices (..., m), updates): a copy of data with the slices
    out[indices[t]] = updates[t] (or combined by `reduction`), applied in index order.
    updates has shape indices.shape[:-1] + data.shape[m:]."""

    op_type = "ScatterND"
    attrs = {"reduction": Attr("string", "none")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, ishape = ctx.shape(0), ctx.shape(1)
        _check_index_dtype(ctx, 1)
        _check_reduction(ctx)
        m = nd_split(ctx)
        want = tuple(ishape[:-1]) + tuple(shape[m:])
        if tuple(ctx.shape(2)) != want:
            raise ctx.fail(f"updates shape {list(ctx.shape(2))} must be indices.shape[:-1] + data.shape[{m}:] = "
                           f"{list(want)}")
        if ctx.dtype(2) != ctx.dtype(0):
            raise ctx.fail(f"updates ({ctx.dtype(2)}) and data ({ctx.dtype(0)}) differ in type")
        _check_known(ctx, 1, shape[:m], "index")
        return [TensorSpec(tuple(shape), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 0 if ctx.attrs["reduction"] == "none" else int(np.prod(ctx.shape(2), dtype=np.int64))


def one_hot_depth(ctx: InferContext) -> int:
    """Depth of OneHot: a scalar or one-element tensor known at resize (floats truncate)."""
    value = np.asarray(ctx.value(1))
    if value.size != 1 or value.ndim > 1:
        raise ctx.fail(f"depth must be a scalar or a one-element tensor, got shape {list(value.shape)}")
    depth = int(value.reshape(-1)[0])
    if depth < 0:
        raise ctx.fail(f"depth must not be negative, got {depth}")
    return depth


@register_op
class OneHot(_IndexOp):
    """OneHot(indices, depth, values [off, on]): a new axis of size depth (at `axis`, in
    [-r-1, r]) holding `on` where its position equals the index, `off` elsewhere. Negative indices
    count from the end (ONNX >= 11; onnxruntime does the same for OneHot-9); indices outside
    [-depth, depth) give all `off`, as ONNX defines."""

    op_type = "OneHot"
    attrs = {"axis": Attr("int", -1)}
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        ishape = ctx.shape(0)
        depth = one_hot_depth(ctx)
        rank = len(ishape) + 1
        axis = ctx.attrs["axis"]
        if not -rank <= axis < rank:
            raise ctx.fail(f"axis {axis} is out of range for output rank {rank}")
        axis %= rank
        if int(np.prod(ctx.shape(2), dtype=np.int64)) != 2:
            raise ctx.fail(f"values must hold two elements [off, on], got shape {list(ctx.shape(2))}")
        return [TensorSpec(tuple(ishape[:axis]) + (depth,) + tuple(ishape[axis:]), ctx.dtype(2))]


@register_op
class EyeLike(_IndexOp):
    """EyeLike(x): a 2-D tensor of x's shape with ones on diagonal k (k > 0 above the main one),
    zeros elsewhere; of type `dtype` (a wgnn dtype name), or x's type when dtype is ""."""

    op_type = "EyeLike"
    attrs = {"dtype": Attr("string", ""), "k": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        from ..dtypes import DTYPE_CODES

        shape = ctx.shape(0)
        if len(shape) != 2:
            raise ctx.fail(f"EyeLike needs a 2-D input, got rank {len(shape)}")
        dtype = ctx.attrs["dtype"] or ctx.dtype(0)
        if dtype not in DTYPE_CODES:
            raise ctx.fail(f"unknown dtype {dtype!r}; wgnn types are {sorted(DTYPE_CODES)}")
        return [TensorSpec(tuple(shape), dtype)]


@register_op
class Trilu(_IndexOp):
    """Trilu(x, k?): keeps the upper (upper=1: col - row >= k) or lower (col - row <= k) triangle
    of the last two dims, zeros elsewhere; k is an optional scalar input (default 0)."""

    op_type = "Trilu"
    attrs = {"upper": Attr("int", 1)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        if len(shape) < 2:
            raise ctx.fail(f"Trilu needs rank >= 2, got rank {len(shape)}")
        if ctx.has(1) and (ctx.dtype(1) != "int64" or int(np.prod(ctx.shape(1), dtype=np.int64)) != 1):
            raise ctx.fail(f"k must be one int64, got {ctx.dtype(1)} of shape {list(ctx.shape(1))}")
        return [TensorSpec(tuple(shape), ctx.dtype(0))]


def cumsum_axis(ctx: InferContext) -> int | None:
    """CumSum's axis in [0, rank) when known at resize, else None (the kernels read it at run)."""
    rank = len(ctx.shape(0))
    if ctx.dtype(1) not in INDEX_DTYPES or int(np.prod(ctx.shape(1), dtype=np.int64)) != 1:
        raise ctx.fail(f"axis must be one int32/int64, got {ctx.dtype(1)} of shape {list(ctx.shape(1))}")
    known = ctx.value(1, required=False)
    return None if known is None else ctx.axis(int(np.asarray(known).reshape(-1)[0]), rank)


@register_op
class CumSum(OpDef):
    """CumSum(x, axis): running sums along axis (a scalar input, negative counts from the end);
    exclusive=1 leaves the element itself out, reverse=1 sums from the end."""

    op_type = "CumSum"
    family = "scatter"
    attrs = {"exclusive": Attr("int", 0), "reverse": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if not ctx.shape(0):
            raise ctx.fail("CumSum needs an input of rank >= 1")
        cumsum_axis(ctx)
        return [TensorSpec(tuple(ctx.shape(0)), ctx.dtype(0))]


@register_op
class ReverseSequence(_IndexOp):
    """ReverseSequence(x, sequence_lens): for each batch entry b, reverses the first
    sequence_lens[b] steps along time_axis; the rest is copied. batch_axis and time_axis are 0 or 1."""

    op_type = "ReverseSequence"
    attrs = {"batch_axis": Attr("int", 1), "time_axis": Attr("int", 0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        batch_axis, time_axis = ctx.attrs["batch_axis"], ctx.attrs["time_axis"]
        if len(shape) < 2:
            raise ctx.fail(f"ReverseSequence needs rank >= 2, got rank {len(shape)}")
        if {batch_axis, time_axis} != {0, 1}:
            raise ctx.fail(f"batch_axis ({batch_axis}) and time_axis ({time_axis}) must be 0 and 1")
        _check_index_dtype(ctx, 1)
        if tuple(ctx.shape(1)) != (shape[batch_axis],):
            raise ctx.fail(f"sequence_lens must have shape [{shape[batch_axis]}], got {list(ctx.shape(1))}")
        known = ctx.value(1, required=False)
        if known is not None and known.size and (known.min() < 0 or known.max() > shape[time_axis]):
            bad = int(known[(known < 0) | (known > shape[time_axis])][0])
            raise ctx.fail(f"sequence length {bad} is out of range [0, {shape[time_axis]}]")
        return [TensorSpec(tuple(shape), ctx.dtype(0))]
