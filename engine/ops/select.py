"""Select family: ops that pick elements by value or condition (TopK, NonZero, Compress,
NonMaxSuppression) and Einsum (a general contraction, lowered by the converter to MatMul, Reduce,
Transpose and Reshape where it can be; this op runs the equations it cannot lower).

NonZero, Compress and NonMaxSuppression produce outputs whose *shape* depends on input *data*:
they are `data_dependent` and read those inputs with ctx.value(), like shape operands.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..geometry import RasterPlan, Region
from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# A Compress whose kept slices form more runs than this runs as a numpy kernel: the GPU's Raster
# costs one dispatch per region.
MAX_COMPRESS_REGIONS = 8


def topk_k(ctx: InferContext) -> int:
    """The k of a TopK node: a one-element integer value input."""
    value = np.asarray(ctx.value(1))
    if value.dtype.kind not in "iu" or value.size != 1:
        raise ctx.fail(f"k must be one integer, got {value.dtype.name} of shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


@register_op
class TopK(OpDef):
    """TopK(X, K) -> (values, int64 indices): the k largest (or smallest) elements along axis,
    in order; equal values keep the lower index first. sorted=0 allows any order: sorted it is."""

    op_type = "TopK"
    family = "select"
    attrs: ClassVar[dict[str, Attr]] = {"axis": Attr("int", -1), "largest": Attr("int", 1),
                                        "sorted": Attr("int", 1)}
    value_inputs = (1,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        if not shape:
            raise ctx.fail("TopK needs an input of rank >= 1")
        axis = ctx.axis(ctx.attrs["axis"], len(shape))
        k = topk_k(ctx)
        if not 0 <= k <= shape[axis]:
            raise ctx.fail(f"k = {k} is outside [0, {shape[axis]}] (the length of axis {axis})")
        out = tuple(k if i == axis else d for i, d in enumerate(shape))
        return [TensorSpec(out, ctx.dtype(0)), TensorSpec(out, "int64")]

    def flops(self, ctx, outputs) -> int:
        shape = ctx.shape(0)
        length = shape[ctx.axis(ctx.attrs["axis"], len(shape))]
        return int(np.prod(shape, dtype=np.int64)) * max(1, int(np.log2(max(length, 1))))


@register_op
class NonZero(OpDef):
    """NonZero(X) -> int64 (rank, count): the coordinates of the non-zero elements, C order."""

    op_type = "NonZero"
    family = "select"
    value_inputs = (0,)
    data_dependent = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.value(0)
        return [TensorSpec((len(ctx.shape(0)), int(np.count_nonzero(x))), "int64")]


def compress_count(ctx: InferContext) -> int:
    """How many slices a Compress keeps: the true entries of its 1-D condition (which may be
    shorter than the axis, but may not select past its end)."""
    shape = ctx.shape(0)
    condition = np.asarray(ctx.value(1))
    if condition.ndim != 1:
        raise ctx.fail(f"condition must be 1-D, got shape {list(condition.shape)}")
    axis = ctx.attrs["axis"]
    length = int(np.prod(shape, dtype=np.int64)) if axis is None else shape[ctx.axis(axis, len(shape))]
    if np.any(condition[length:]):
        raise ctx.fail(f"condition selects index {int(np.flatnonzero(condition)[-1])} past the "
                       f"{length} elements it compresses")
    return int(np.count_nonzero(condition[:length]))


def true_runs(condition: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive true entries."""
    flags = np.concatenate([[False], np.asarray(condition, bool), [False]])
    edges = np.flatnonzero(flags[1:] != flags[:-1])
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


@register_op
class Compress(OpDef):
    """Compress(input, condition): the slices along axis (or elements of the flattened input,
    without axis) where condition is true. Once the condition is known this is data movement:
    one Raster region per run of kept slices."""

    op_type = "Compress"
    family = "select"
    attrs: ClassVar[dict[str, Attr]] = {"axis": Attr("int", None)}
    value_inputs = (1,)
    data_dependent = True
    is_geometry = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape = ctx.shape(0)
        count = compress_count(ctx)
        axis = ctx.attrs["axis"]
        if axis is None:
            return [TensorSpec((count,), ctx.dtype(0))]
        axis = ctx.axis(axis, len(shape))
        return [TensorSpec(tuple(count if i == axis else d for i, d in enumerate(shape)), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 0

    def geometry(self, ctx: InferContext, outputs: list[TensorSpec]) -> list[RasterPlan] | None:
        shape = ctx.shape(0)
        axis = ctx.attrs["axis"]
        if axis is None:
            outer, length, inner = 1, int(np.prod(shape, dtype=np.int64)), 1
        else:
            axis = ctx.axis(axis, len(shape))
            outer, length, inner = (int(np.prod(shape[:axis], dtype=np.int64)), shape[axis],
                                    int(np.prod(shape[axis + 1:], dtype=np.int64)))
        runs = true_runs(np.asarray(ctx.value(1))[:length])
        if len(runs) > MAX_COMPRESS_REGIONS:
            return None
        count = sum(end - start for start, end in runs)
        regions, done = [], 0
        for start, end in runs:
            regions.append(Region(0, (outer, end - start, inner), start * inner, (length * inner, inner, 1),
                                  done * inner, (count * inner, inner, 1)))
            done += end - start
        return [RasterPlan(regions)]


def nms_scalar(ctx: InferContext, i: int, default, cast):
    """An optional one-element NonMaxSuppression operand (absent or empty: default)."""
    if not ctx.has(i):
        return default
    value = np.asarray(ctx.value(i)).reshape(-1)
    if value.size == 0:
        return default
    if value.size != 1:
        raise ctx.fail(f"input {i} must hold one value, got {value.size}")
    return cast(value[0])


@register_op
class NonMaxSuppression(OpDef):
    """NonMaxSuppression(boxes (B, N, 4), scores (B, C, N), max_output_boxes_per_class?,
    iou_threshold?, score_threshold?) -> int64 (selected, 3) rows [batch, class, box]."""

    op_type = "NonMaxSuppression"
    family = "select"
    attrs: ClassVar[dict[str, Attr]] = {"center_point_box": Attr("int", 0)}
    value_inputs = (0, 1, 2, 3, 4)
    data_dependent = True

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        boxes, scores = ctx.shape(0), ctx.shape(1)
        if len(boxes) != 3 or boxes[2] != 4:
            raise ctx.fail(f"boxes must have shape (batches, boxes, 4), got {list(boxes)}")
        if len(scores) != 3 or scores[0] != boxes[0] or scores[2] != boxes[1]:
            raise ctx.fail(f"scores must have shape ({boxes[0]}, classes, {boxes[1]}), got {list(scores)}")
        if ctx.attrs["center_point_box"] not in (0, 1):
            raise ctx.fail(f"center_point_box must be 0 or 1, got {ctx.attrs['center_point_box']}")
        selected = non_max_suppression(
            ctx.value(0), ctx.value(1), nms_scalar(ctx, 2, 0, int), nms_scalar(ctx, 3, 0.0, float),
            nms_scalar(ctx, 4, None, float), ctx.attrs["center_point_box"])
        return [TensorSpec((len(selected), 3), "int64")]


def box_edges(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y_min, x_min, y_max, x_max) of boxes (..., 4), float32, computed as ONNX specifies."""
    boxes = boxes.astype(np.float32, copy=False)
    if center_point_box:  # [x_center, y_center, width, height]
        half_w, half_h = boxes[..., 2] / np.float32(2), boxes[..., 3] / np.float32(2)
        return (boxes[..., 1] - half_h, boxes[..., 0] - half_w, boxes[..., 1] + half_h, boxes[..., 0] + half_w)
    # [y1, x1, y2, x2] with either corner first
    return (np.minimum(boxes[..., 0], boxes[..., 2]), np.minimum(boxes[..., 1], boxes[..., 3]),
            np.maximum(boxes[..., 0], boxes[..., 2]), np.maximum(boxes[..., 1], boxes[..., 3]))


def iou_exceeds(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...], threshold: np.float32) -> np.ndarray:
    """IoU(a, b) > threshold, False for boxes that do not overlap or have no area."""
    ay0, ax0, ay1, ax1 = a
    by0, bx0, by1, bx1 = b
    width = np.minimum(ax1, bx1) - np.maximum(ax0, bx0)
    height = np.minimum(ay1, by1) - np.maximum(ay0, by0)
    inter = width * height
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    valid = (width > 0) & (height > 0) & (inter > 0) & (area_a > 0) & (area_b > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return valid & (inter / np.where(valid, union, np.float32(1)) > threshold)


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_per_class: int, iou_threshold: float,
                        score_threshold: float | None, center_point_box: int) -> np.ndarray:
    """Greedy NMS per (batch, class): take the highest-scoring remaining box (equal scores: the
    lower box index), drop every remaining box overlapping it by IoU > iou_threshold, repeat up to
    max_per_class times. All (batch, class) pairs advance together, one selection per round, so
    the rounds (not the boxes) are the Python loop. Rows come out by batch, class, then rank."""
    batches, classes, count = scores.shape
    scores = scores.astype(np.float32, copy=False)
    rounds = min(max(max_per_class, 0), count)
    if rounds == 0 or batches * classes == 0:
        return np.zeros((0, 3), np.int64)
    active = np.ones(scores.shape, bool)
    if score_threshold is not None:
        active &= scores > np.float32(score_threshold)
    order = np.argsort(-scores, axis=-1, kind="stable")  # best first; ties keep the lower index first
    edges = [e[:, None, :] for e in box_edges(boxes, center_point_box)]  # each (B, 1, N)
    threshold = np.float32(iou_threshold)
    picks, found = [], []
    for _ in range(rounds):
        live = active.any(axis=-1)  # (B, C)
        if not live.any():
            break
        first = np.argmax(np.take_along_axis(active, order, axis=-1), axis=-1)
        pick = np.take_along_axis(order, first[..., None], axis=-1)  # (B, C, 1)
        picks.append(pick[..., 0])
        found.append(live)
        chosen = [np.take_along_axis(e, pick, axis=-1) for e in edges]  # each (B, C, 1)
        active &= ~iou_exceeds(edges, chosen, threshold)
        np.put_along_axis(active, pick, False, axis=-1)
    picked = np.stack(picks, axis=-1)  # (B, C, rounds)
    valid = np.stack(found, axis=-1)
    b, c = np.broadcast_arrays(np.arange(batches)[:, None, None], np.arange(classes)[None, :, None])
    b, c = np.broadcast_to(b, picked.shape), np.broadcast_to(c, picked.shape)
    return np.stack([b[valid], c[valid], picked[valid]], axis=-1).astype(np.int64)


# ----------------------------------------------------------------------------------- Einsum
@dataclass
class Equation:
    """A parsed einsum equation: one label string per operand and the output's, with the
    ellipsis of each term expanded into private labels (right-aligned, as numpy broadcasts)."""

    terms: list[str]
    output: str
    ellipsis_labels: str  # the labels the ellipsis stands for, outermost first


ELLIPSIS_BASE = 0x100  # private labels for ellipsis dims: chr(0x100 + i), never a letter


def parse_equation(equation: str, ranks: list[int], fail) -> Equation:
    """Parse an einsum equation for operands of the given ranks; fail(msg) builds the error."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    raw = lhs.split(",")
    if len(raw) != len(ranks):
        raise fail(f"equation {equation!r} has {len(raw)} operand terms for {len(ranks)} inputs")
    widths = []
    for term, rank in zip(raw, ranks):
        letters = term.replace("...", "")
        if not all(c.isalpha() and c.isascii() for c in letters) or term.count("...") > 1:
            raise fail(f"equation term {term!r} is not letters with at most one ellipsis")
        width = rank - len(letters)
        if ("..." in term and width < 0) or ("..." not in term and width != 0):
            raise fail(f"equation term {term!r} does not match an operand of rank {rank}")
        widths.append(width if "..." in term else 0)
    ellipsis = "".join(chr(ELLIPSIS_BASE + i) for i in range(max(widths, default=0)))
    terms = [t.replace("...", ellipsis[len(ellipsis) - w:]) for t, w in zip(raw, widths)]
    if arrow:
        if rhs.count("...") > 1 or not all(c.isalpha() and c.isascii() for c in rhs.replace("...", "")):
            raise fail(f"equation output {rhs!r} is not letters with at most one ellipsis")
        output = rhs.replace("...", ellipsis)
        if "..." not in rhs and any("..." in t for t in raw) and ellipsis:
            raise fail(f"equation {equation!r}: the output must keep the ellipsis dims")
    else:  # implicit output: the ellipsis, then the letters used once, alphabetically
        counts: dict[str, int] = {}
        for c in "".join(raw).replace("...", "").replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1))
    used = set("".join(terms))
    if len(set(output)) != len(output) or not set(output) <= used:
        raise fail(f"equation {equation!r}: output labels must be distinct and appear in an operand")
    return Equation(terms, output, ellipsis)


def label_sizes(eq: Equation, shapes: list[tuple[int, ...]], fail) -> dict[str, int]:
    """Each label's size; a size-1 dim broadcasts against a larger one (as numpy's einsum)."""
    sizes: dict[str, int] = {}
    for term, shape in zip(eq.terms, shapes):
        for label in set(term):  # a label repeated in one operand takes its diagonal: equal sizes
            dims = {d for c, d in zip(term, shape) if c == label}
            if len(dims) > 1:
                raise fail(f"label {label!r} repeats in term {term!r} with sizes {sorted(dims)}")
        for label, dim in zip(term, shape):
            known = sizes.get(label, 1)
            if known != dim and known != 1 and dim != 1:
                name = "an ellipsis dim" if ord(label) >= ELLIPSIS_BASE else f"label {label!r}"
                raise fail(f"{name} has sizes {known} and {dim}")
            sizes[label] = dim if known == 1 else known
    return sizes


@register_op
class Einsum(OpDef):
    """Einsum(inputs...) with a numpy-style equation (explicit or implicit output, ellipsis)."""

    op_type = "Einsum"
    family = "select"
    attrs: ClassVar[dict[str, Attr]] = {"equation": Attr("string")}

    def _parse(self, ctx: InferContext) -> tuple[Equation, dict[str, int]]:
        shapes = [ctx.shape(i) for i in range(len(ctx.inputs))]
        eq = parse_equation(ctx.attrs["equation"], [len(s) for s in shapes], ctx.fail)
        return eq, label_sizes(eq, shapes, ctx.fail)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        dtypes = {ctx.dtype(i) for i in range(len(ctx.inputs))}
        if len(dtypes) != 1:
            raise ctx.fail(f"operands differ in type: {sorted(dtypes)}")
        eq, sizes = self._parse(ctx)
        return [TensorSpec(tuple(sizes[c] for c in eq.output), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        _, sizes = self._parse(ctx)
        return 2 * int(np.prod(list(sizes.values()), dtype=np.int64))
