"""Resize family: "Resize" (ONNX Resize 10-19 and Upsample 7/9).

Inputs: X, roi, scales, sizes (roi/scales/sizes optional; an empty tensor counts as absent). Their
values must be known at resize. Attributes follow ONNX Resize-19 with the same defaults, plus:
- coordinate_transformation_mode "tf_half_pixel_for_nn" (Resize-11 only): x = (y + 0.5) / scale;
- nearest_mode "simple" (Resize-10, Upsample): floor when upsampling an axis, ceil when
  downsampling it, with asymmetric coordinates (what those opsets computed in practice).

plan_resize() turns the attributes and input values into per-axis work (AxisResize); the shape
function and every backend share it, so output sizes and scales are decided in one place. The
coordinate conventions follow onnx.reference (the ONNX test data): the fractional output width
`scale * in_len` enters align_corners, tf_crop_and_resize, pytorch_half_pixel and
half_pixel_symmetric.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}


@dataclass(frozen=True)
class AxisResize:
    """One resized axis: the sampling grid a backend turns into (index, weight) tables."""

    axis: int
    in_len: int
    out_len: int
    scale: float  # the scale the coordinate transform uses (given, or out_len / in_len)
    roi: tuple = (0.0, 1.0)  # (start, end) for tf_crop_and_resize, as numpy scalars of the roi's type


def _present(value: np.ndarray | None) -> bool:
    return value is not None and value.size > 0


def plan_resize(attrs: dict, shape: tuple[int, ...], roi: np.ndarray | None, scales: np.ndarray | None,
                sizes: np.ndarray | None, fail: Callable[[str], Exception]) -> tuple[tuple[int, ...], list[AxisResize]]:
    """Output shape and the axes that change (identity axes are left out).

    Arguments:
        attrs: the Resize node's resolved attributes.
        shape: the input shape.
        roi, scales, sizes: input values (None or empty = absent).
        fail: builds the exception to raise for an invalid node (ctx.fail).
    Returns:
        (output shape, [AxisResize for every axis that is resampled]).
    """
    for key, allowed in (("mode", MODES), ("coordinate_transformation_mode", COORDINATE_MODES),
                         ("nearest_mode", NEAREST_MODES), ("keep_aspect_ratio_policy", ASPECT_POLICIES)):
        if attrs[key] not in allowed:
            raise fail(f"{key} {attrs[key]!r} is not one of {list(allowed)}")
    if attrs["antialias"] and attrs["mode"] == "nearest":
        raise fail("antialias applies to linear and cubic modes only")
    rank = len(shape)
    axes = [a + rank if a < 0 else a for a in attrs["axes"]] or list(range(rank))
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise fail(f"axes {attrs['axes']} are invalid for rank {rank}")
    count = len(axes)

    if _present(scales) and _present(sizes):
        raise fail("give scales or sizes, not both")
    if not _present(scales) and not _present(sizes):
        raise fail("needs scales or sizes")
    given = scales if _present(scales) else sizes
    if given.ndim != 1 or given.size != count:
        raise fail(f"{'scales' if given is scales else 'sizes'} has shape {list(given.shape)}, expected [{count}] "
                   f"(one per resized axis)")
    in_lens = [shape[a] for a in axes]
    if _present(scales):
        axis_scales = [float(s) for s in scales]
        if any(not s > 0 for s in axis_scales):
            raise fail(f"scales must be positive, got {scales.tolist()}")
        out_lens = [math.floor(s * n) for s, n in zip(axis_scales, in_lens)]
    else:
        out_lens = [int(s) for s in sizes]
        if any(n < 0 for n in out_lens):
            raise fail(f"sizes must not be negative, got {sizes.tolist()}")
        if any(n == 0 and o > 0 for n, o in zip(in_lens, out_lens)):
            raise fail("cannot resize an axis of length 0 to a non-zero length")
        axis_scales = [o / n if n else 1.0 for o, n in zip(out_lens, in_lens)]
        policy = attrs["keep_aspect_ratio_policy"]
        if policy != "stretch":
            scale = min(axis_scales) if policy == "not_larger" else max(axis_scales)
            axis_scales = [scale] * count
            out_lens = [int(scale * n + 0.5) for n in in_lens]  # round half up

    crop = attrs["coordinate_transformation_mode"] == "tf_crop_and_resize"
    rois = [(0.0, 1.0)] * count
    if crop:
        if not _present(roi):
            raise fail("tf_crop_and_resize needs the roi input")
        if roi.ndim != 1 or roi.size != 2 * count:
            raise fail(f"roi has shape {list(roi.shape)}, expected [{2 * count}] (starts then ends)")
        # Kept as numpy scalars of the roi's own type: the coordinate arithmetic then rounds as
        # onnx.reference does, which decides ties of nearest rounding.
        rois = [(roi[i], roi[count + i]) for i in range(count)]

    out_shape = list(shape)
    plan = []
    for axis, n, o, s, r in zip(axes, in_lens, out_lens, axis_scales, rois):
        out_shape[axis] = o
        identity = o == n and math.isclose(s, 1.0) and math.isclose(r[0], 0.0) and math.isclose(r[1], 1.0)
        if not identity and n > 0 and o > 0:
            plan.append(AxisResize(axis, n, o, s, r))
    return tuple(out_shape), plan


def resize_values(ctx: InferContext) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """roi, scales, sizes as 1-D arrays (None when absent); they must be known at resize."""
    return normalize_values(*(ctx.value(i) if ctx.has(i) else None for i in (1, 2, 3)))


def normalize_values(roi, scales, sizes) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """roi in its float type (float16 widened to float32), scales as float64, sizes as int64."""
    if roi is not None:
        roi = np.asarray(roi).reshape(-1)
        roi = roi.astype(np.promote_types(roi.dtype, np.float32)) if roi.dtype.kind == "f" else roi.astype(np.float64)
    scales = None if scales is None else np.asarray(scales).astype(np.float64).reshape(-1)
    sizes = None if sizes is None else np.asarray(sizes).astype(np.int64).reshape(-1)
    return roi, scales, sizes


@register_op
class Resize(OpDef):
    op_type = "Resize"
    family = "resize"
    value_inputs = (1, 2, 3)
    attrs: ClassVar[dict[str, Attr]] = {
        "mode": Attr("string", "nearest"),
        "coordinate_transformation_mode": Attr("string", "half_pixel"),
        "nearest_mode": Attr("string", "round_prefer_floor"),
        "cubic_coeff_a": Attr("float", -0.75),
        "exclude_outside": Attr("int", 0),
        "extrapolation_value": Attr("float", 0.0),
        "antialias": Attr("int", 0),
        "axes": Attr("ints", []),
        "keep_aspect_ratio_policy": Attr("string", "stretch"),
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        shape, _ = plan_resize(ctx.attrs, ctx.shape(0), *resize_values(ctx), ctx.fail)
        return [TensorSpec(shape, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        # Each resampled axis costs a multiply-add per tap for every element it produces.
        shape = list(ctx.shape(0))
        _, plan = plan_resize(ctx.attrs, tuple(shape), *resize_values(ctx), ctx.fail)
        taps = TAPS[ctx.attrs["mode"]]
        total = 0
        for step in plan:
            shape[step.axis] = step.out_len
            total += 2 * taps * int(np.prod(shape, dtype=np.int64))
        return total
