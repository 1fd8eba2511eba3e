"""Raster on the GPU.

Linear tensors: one dispatch per (merged) region (region.wgsl), plus a fill for uncovered elements
(fill.wgsl), in element space.

NC4HW4 feature maps: where every region of the plan copies a box of a 4-D source to the same box
shifted by a constant translation in the output (Concat along any axis, constant Pad, Slice with
step 1 — recognised from the regions themselves, whatever op they came from), one dispatch of
boxes_nc4hw4.wgsl writes each output slice per lane from the part holding its channel, or the fill.
Such a Raster follows its inputs' layout: NC4HW4 when one of them is NC4HW4, so feature maps stay
NC4HW4 across skip connections and pads instead of converting both ways.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...engine.geometry import Region, contiguous_strides, simplify
from ..base import Step, contiguous_run, tiling_inputs, whole_input_ranges
from .backend import GpuExecution, gpu_kernel

MAX_RANK = 6
MAX_PARTS = 6  # (64 params slots - 10) / 9 slots per part
MAX_REGIONS = 64  # plans of more regions (gathers of rows, ...) are no boxes worth checking pairwise
PART_SLOTS = 9  # a part's source dims (N, C4, H, W, C) and translation (n, c, y, x)
SEGMENT = 8  # output pixels along W per invocation of boxes_nc4hw4.wgsl


def fill_bits(value: float, dtype: str) -> int:
    """The 32-bit word the GPU stores for value in a tensor of dtype."""
    if dtype == "float32":
        return int(np.float32(value).view(np.int32))
    return int(np.int32(int(value)))


@dataclass(frozen=True)
class Part:
    """A source copied whole (as far as it falls inside the output) to the output, shifted by
    `shift` = output coordinates - source coordinates."""

    src: int
    shift: tuple[int, int, int, int]


def _unravel(offset: int, shape) -> tuple[int, ...]:
    coords = []
    for dim in reversed(shape):
        coords.append(offset % dim)
        offset //= dim
    return tuple(reversed(coords))


def _box(region: Region, src_shape, out_shape) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(output start, extent, shift) when the region copies a box of the source to an equal box of
    the output (unit steps in every axis), else None. The candidate box comes from the region's
    first and last output elements; the region must then be exactly that box's simplified copy."""
    last = region.dst_offset + sum((s - 1) * t for s, t in zip(region.size, region.dst_strides, strict=True))
    start, end = _unravel(region.dst_offset, out_shape), _unravel(last, out_shape)
    extent = tuple(e - s + 1 for s, e in zip(start, end, strict=True))
    src_start = _unravel(region.src_offset, src_shape)
    if min(extent) < 1 or any(s + e > d for s, e, d in zip(src_start, extent, src_shape, strict=True)):
        return None
    box = simplify(Region(region.src, extent, region.src_offset, contiguous_strides(src_shape), region.dst_offset,
                          contiguous_strides(out_shape)))
    if box != region:
        return None
    return start, extent, tuple(d - s for d, s in zip(start, src_start, strict=True))


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether boxes (start, extent) a and b share an element."""
    return all(s < t + f and t < s + e for s, e, t, f in zip(*a, *b, strict=True))


def nc4hw4_parts(step: Step) -> list[Part] | None:
    """The parts of a Raster step boxes_nc4hw4.wgsl can run, or None: every input and the output
    are 4-D float32, every region a translated box, and each source's boxes with one translation
    tile all of that source lying inside the output (disjoint boxes, counts adding up)."""
    from .layout import is_feature_map

    out = step.output_specs[0]
    plan = step.plan
    if not is_feature_map(out) or out.size == 0 or not 0 < len(plan.regions) <= MAX_REGIONS:
        return None
    boxes: dict[Part, list[tuple]] = {}
    for region in plan.regions:
        spec = step.input_specs[region.src]
        if not is_feature_map(spec) or len(region.size) > 4:
            return None
        found = _box(region, spec.shape, out.shape)
        if found is None:
            return None
        boxes.setdefault(Part(region.src, found[2]), []).append(found[:2])
        if len(boxes) > MAX_PARTS:
            return None
    covered = []
    for part, found in boxes.items():
        shape = step.input_specs[part.src].shape
        lo = [max(0, t) for t in part.shift]
        hi = [min(o, d + t) for o, d, t in zip(out.shape, shape, part.shift, strict=True)]
        whole = (tuple(lo), tuple(h - low for h, low in zip(hi, lo, strict=True)))
        if sum(math.prod(e) for _, e in found) != math.prod(whole[1]):
            return None
        if any(_overlap(a, b) for i, a in enumerate(found) for b in found[i + 1:]):
            return None
        covered.append(whole)
    if any(_overlap(a, b) for i, a in enumerate(covered) for b in covered[i + 1:]):
        return None
    if plan.fill is None and sum(math.prod(e) for _, e in covered) != out.size:
        return None  # the linear path leaves such elements as they were; do not guess
    return list(boxes)


@gpu_kernel("Raster")
class RasterGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        deepest = max((len(r.size) for r in step.plan.regions), default=0)
        return f"region rank {deepest} > {MAX_RANK}" if deepest > MAX_RANK else None

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        return ("linear", "nc4hw4") if nc4hw4_parts(step) is not None else ("linear",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        return tuple(range(len(step.inputs)))

    def view_range(self) -> tuple[str, int] | None:
        """(input, byte offset) when the plan fills the whole linear output with one contiguous
        run of a linear input, element for element (Reshape, Flatten, Squeeze, ...: offset 0; a
        Slice or Split along the outermost axis that is not 1), at an offset the adapter can bind:
        buffers of 32-bit elements on both sides then hold the same bytes."""
        run = contiguous_run(self.step) if self.layout == "linear" else None
        if run is None:
            return None
        name, offset = self.step.inputs[run[0]], run[1] * 4
        if offset % self.backend.alignment or self.backend.placement(name).layout != "linear":
            return None
        return name, offset

    def embedded_inputs(self) -> list[tuple[str, int]] | None:
        """Each input with its byte offset in the output, when the plan copies every input whole
        into its own contiguous range of the output and the ranges tile it (Concat of linear
        tensors along their outermost non-1 axis; of NC4HW4 feature maps of one image along
        channels, at whole slices), at offsets the adapter can bind."""
        step, backend = self.step, self.backend
        if step.plan.fill is not None:
            return None
        ranges = self._nc4hw4_ranges() if self.layout == "nc4hw4" else self._linear_ranges()
        return tiling_inputs(ranges, backend.tensor_bytes(step.outputs[0], step.output_specs[0]), backend.alignment)

    def _linear_ranges(self) -> list[tuple[str, int, int]] | None:
        """(input, byte offset, bytes) of each region copying a whole linear input contiguously."""
        ranges = whole_input_ranges(self.step, lambda name, spec: 4)
        if ranges is None or any(self.backend.placement(name).layout != "linear" for name, _, _ in ranges):
            return None
        return ranges

    def _nc4hw4_ranges(self) -> list[tuple[str, int, int]] | None:
        """(input, byte offset, bytes) of each part of a one-image channel concatenation in NC4HW4
        buffers: a part at a whole slice stores its slices where the output's are. Only the last
        part may have padding lanes (they land in the output's)."""
        step, backend = self.step, self.backend
        n, _, h, w = step.output_specs[0].shape
        out_placement = backend.placement(step.outputs[0])
        if n != 1 or out_placement.storage != "buffer":
            return None
        ranges = []
        parts = sorted(nc4hw4_parts(step) or [], key=lambda part: part.shift[1])
        for k, part in enumerate(parts):
            name, spec = step.inputs[part.src], step.input_specs[part.src]
            _, channels, ph, pw = spec.shape
            shift = part.shift
            if (shift[0], shift[2], shift[3]) != (0, 0, 0) or shift[1] % 4 or (ph, pw) != (h, w):
                return None
            if (channels % 4 and k != len(parts) - 1) or backend.placement(name) != out_placement:
                return None
            ranges.append((name, shift[1] // 4 * h * w * backend.texel_bytes, backend.tensor_bytes(name, spec)))
        return ranges or None

    def prepare(self) -> None:
        self.prepare_copies()
        out = self.step.outputs[0]
        hosted = [self.backend.shares.get(name, ("", 0))[0] for name in self.step.inputs if name]
        if self.is_view() or (hosted and all(host == out for host in hosted)):
            # A view, or a concatenation whose inputs were written in place: nothing to run. The
            # copies were prepared all the same, so other shapes compile nothing new.
            self.dispatches.clear()

    def prepare_copies(self) -> None:
        if self.layout == "nc4hw4":
            self.prepare_nc4hw4(nc4hw4_parts(self.step))
            return
        step = self.step
        out_name, out = step.outputs[0], step.output_specs[0]
        if step.plan.fill is not None:
            self.dispatch("raster/fill.wgsl", [out_name], [out.size, fill_bits(step.plan.fill, out.dtype)],
                          -(-out.size // 4))
        for region in step.plan.regions:
            pad = MAX_RANK - len(region.size)
            size = [1] * pad + list(region.size)
            src = [0] * pad + list(region.src_strides)
            dst = [0] * pad + list(region.dst_strides)
            params = [region.count, region.src_offset, region.dst_offset, 0, 0, 0, 0, 0]
            params += size + [0, 0] + src + [0, 0] + dst
            self.dispatch("raster/region.wgsl", [step.inputs[region.src], out_name], params, -(-region.count // 4))

    def prepare_nc4hw4(self, parts: list[Part]) -> None:
        from .layout import accessor_params, nc4hw4_text

        step = self.step
        out_name, out = step.outputs[0], step.output_specs[0]
        n, c, h, w = out.shape
        segments = -(-w // SEGMENT)
        invocations = n * -(-c // 4) * h * segments
        fill = 0.0 if step.plan.fill is None else step.plan.fill
        params = [invocations, segments, SEGMENT, fill_bits(fill, "float32"), len(parts), *accessor_params(out)]
        placement = self.backend.placement
        decls = []
        for k, part in enumerate(parts):
            params += [*accessor_params(step.input_specs[part.src]), *part.shift]
            decls.append(nc4hw4_text(f"x{k}", k, 10 + PART_SLOTS * k, placement(step.inputs[part.src]), write=False))
        decls.append(nc4hw4_text("y", len(parts), 5, placement(out_name), write=True))
        cases = "\n".join(f"        case {k}: {{ v = load_x{k}(n, c4, y, x); }}" for k in range(len(parts)))
        text = {"DECLS": "\n".join(decls), "CASES": cases, "PARAMS_BINDING": str(len(parts) + 1)}
        tensors = [step.inputs[part.src] for part in parts] + [out_name]
        self.dispatch("raster/boxes_nc4hw4.wgsl", tensors, params, invocations, text=text)
