"""Resize on the GPU: one dispatch.

- 4-D float32 tensors resized along H and W only (N and C kept): resize_nc4hw4.wgsl, a vec4 of 4
  channels for a row segment of output pixels per invocation, through generated accessors: NC4HW4
  (buffer or texture) where the input is NC4HW4 (the kernel follows its input's layout), else
  linear accessors that gather 4 channel planes. Every mode, coordinate transform, rounding rule,
  exclude_outside, antialias and tf_crop_and_resize extrapolation of the general kernel; plain
  bilinear rows keep each input column's blend of its two rows for the next output pixels.
- Everything else (other ranks, resampled N or C, integer and bool nearest gathers):
  kernels_wgsl/resize/resize.wgsl, each invocation computing 4 neighbouring output elements,
  combining the taps of up to 4 resampled axes. Its per-axis state lives in private arrays indexed
  at run time, and each invocation decomposes its index over all 6 dims and sets up all 4 axes:
  on lavapipe, 2x bilinear upsampling to [1, 16, 32, 32] took 1.75 ms there, 0.14 ms in
  resize_nc4hw4.wgsl with linear accessors and ~0.10 ms on NC4HW4.

Source coordinates are affine in the output position, x = A * y + B. The shaders evaluate them in
64-bit fixed point (40 fractional bits) with integer arithmetic, so their nearest indices and crop
decisions are exact and the same on every device. At resize the host replays that arithmetic and
compares every position with the numpy backend's own tables (backends/numpy/resize.py); where they
would differ (float64 noise deciding a rounding tie), the op is refused and runs on numpy. Linear
and cubic weights are continuous in x, so evaluating them in f32 only costs float32 ulps.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.geometry import contiguous_strides
from ...engine.ops.resize import AxisResize, normalize_values, plan_resize
from ..base import Step
from ..numpy.resize import axis_table, source_coordinates
from .backend import LOOP_BUDGET, GpuExecution, gpu_kernel, wgsl_type

MAX_RANK = 6
MAX_AXES = 4
FRAC_BITS = 40  # fixed point coordinates: 24 integer bits (sign included), 40 fractional
ONE = 1 << FRAC_BITS
SLOTS = 11  # parameter slots per axis
MAX_COORDINATE = 1 << 20  # |x| bound that keeps A * y + B and the host's replay inside int64
KERNELS = {"linear": "max(0.0, 1.0 - abs(t))", "cubic": "cubic(t, pf(3u))"}
SPATIAL_KERNELS = {"linear": "max(0.0, 1.0 - abs(t))", "cubic": "cubic(t, pf(4u))"}  # cubic a in slot 4
ZERO = {"f32": "0.0", "i32": "0", "u32": "0u"}


def _words(value: int) -> list[int]:
    """A 64-bit two's complement integer as (lo, hi) int32 parameter slots."""
    lo, hi = value & 0xFFFFFFFF, (value >> 32) & 0xFFFFFFFF
    return [lo - (1 << 32) if lo >= 1 << 31 else lo, hi - (1 << 32) if hi >= 1 << 31 else hi]


def _fixed_floor(a: int, b: int, y: np.ndarray) -> np.ndarray:
    """floor((a * y + b) / 2^40) exactly in int64, as the shader computes it from 32-bit words."""
    low = (a & 0xFFFFFFFF) * y + (b & 0xFFFFFFFF)  # < 2^57 for y < 2^24
    return ((a >> 32) * y + (b >> 32) + (low >> 32)) >> (FRAC_BITS - 32)


def _nearest_offset(rule: str, scale: float, slack: int) -> int:
    """What to add to A*y + B (fixed point) so its floor is the nearest-mode index. slack covers the
    fixed point error, so that exact ties and integers round the way the mode says."""
    if rule == "simple":
        rule = "ceil" if scale < 1 else "floor"
    return {"round_prefer_floor": ONE // 2 - 1 - slack, "round_prefer_ceil": ONE // 2 + slack,
            "floor": slack, "ceil": ONE - 1 - slack}[rule]


def axis_slots(attrs: dict, step: AxisResize, dim: int) -> list[int | float] | str:
    """The 11 parameter slots of one resampled axis, or why the GPU cannot match the numpy backend."""
    o, n = step.out_len, step.in_len
    if o >= 1 << 24:
        return f"output length {o} is too long for the fixed point coordinates"
    x = source_coordinates(attrs, step)
    if not np.all(np.isfinite(x)) or np.abs(x).max() >= MAX_COORDINATE:
        return "source coordinates out of range"
    y = np.arange(o, dtype=np.int64)
    alpha = (x[-1] - x[0]) / (o - 1) if o > 1 else 0.0
    a, b = round(alpha * ONE), round(float(x[0]) * ONE)
    # How far the fixed point line strays from numpy's float64 coordinates (exact: x * 2^40 is an
    # exact float64, its floor an exact int64), in units of 2^-40: ties within it are ties.
    scaled = x * ONE
    whole = np.floor(scaled)
    error = np.abs((a * y + b - whole.astype(np.int64)) - (scaled - whole)).max()
    slack = math.ceil(error) + 1
    table = axis_table(attrs, step)
    if attrs["mode"] == "nearest":
        b += _nearest_offset(attrs["nearest_mode"], step.scale, slack)
        index = _fixed_floor(a, b, y)
        if not np.array_equal(np.clip(index, 0, n - 1), table.index[:, 0]):
            return "a nearest-rounding tie in the source coordinates is closer than fixed point resolves"
        excluded = (index < 0) | (index >= n) if attrs["exclude_outside"] else np.zeros(o, bool)
        if not np.array_equal(excluded, np.zeros(o, bool) if table.weight is None else table.weight[:, 0] == 0):
            return "exclude_outside disagrees with the numpy backend's index"
        taps, first, stretch = 1, 0, 1.0
    else:
        radius = 2 if attrs["mode"] == "cubic" else 1
        stretch = min(step.scale, 1.0) if attrs["antialias"] else 1.0
        first = math.floor(-radius / stretch) + 1
        taps = 2 - 2 * first
    lo, hi = 0, o - 1
    if table.outside is not None:
        inside = np.flatnonzero(~table.outside)
        lo, hi = (int(inside[0]), int(inside[-1])) if inside.size else (o, -1)
        if inside.size and inside.size != hi - lo + 1:
            return "extrapolated positions are not at the ends of the axis"
    return [dim, n, *_words(a), *_words(b), lo, hi, taps, first, float(stretch)]


def fill_word(value: float, dtype: str) -> int | None:
    """The extrapolation value as the GPU stores it in a tensor of dtype (None: not representable
    the way the numpy backend converts it)."""
    if dtype == "float32":
        return int(np.float32(value).view(np.int32))
    if dtype == "bool":
        return int(value != 0)
    # The numpy backend truncates or rounds it depending on the path; integral values agree.
    if value != math.floor(value) or not -(2 ** 31) <= value < 2 ** 31:
        return None
    return int(value)


def plan(step: Step) -> tuple[list[int | float], dict[str, str]] | str:
    """Params and text of the dispatch, or the reason the GPU refuses this Resize."""
    attrs, x, out = step.attrs, step.input_specs[0], step.output_specs[0]
    t = wgsl_type(x.dtype)
    nearest = attrs["mode"] == "nearest"
    if t != "f32" and not nearest:
        return f"{attrs['mode']} resize of {x.dtype} rounds in float64 on the CPU"
    if len(x.shape) > MAX_RANK:
        return f"rank {len(x.shape)} > {MAX_RANK}"
    values = [step.input_values[i] if i < len(step.inputs) and step.inputs[i] else None for i in (1, 2, 3)]

    def fail(message: str) -> Exception:
        return ValueError(f"{step.label}: {message}")

    _, axes = plan_resize(attrs, tuple(x.shape), *normalize_values(*values), fail)
    if len(axes) > MAX_AXES:
        return f"{len(axes)} resampled axes (at most {MAX_AXES})"
    word = fill_word(float(attrs["extrapolation_value"]), x.dtype)
    if word is None:
        return f"extrapolation value {attrs['extrapolation_value']} on {x.dtype}"
    pad = MAX_RANK - len(x.shape)
    strides = list(contiguous_strides(x.shape))
    flags = int(bool(attrs["exclude_outside"])) | 2 * int(bool(attrs["antialias"]))
    units = MAX_AXES - len(axes)
    params = [out.size, units, word, float(attrs["cubic_coeff_a"]), flags]
    params += [1] * pad + list(out.shape) + [0] * pad + strides + [0] * (SLOTS * units)
    # The numpy backend applies shrinking axes first; extrapolation depends on that order.
    taps = [1] * units
    for axis in sorted(axes, key=lambda s: s.out_len / s.in_len):
        slots = axis_slots(attrs, axis, pad + axis.axis)
        if isinstance(slots, str):
            return f"axis {axis.axis}: {slots}"
        params += slots
        taps.append(slots[8])
    # Loop iterations of one invocation (4 outputs): each output's tap loops (nested, so prefix
    # products) and weight sums; llvmpipe stops an invocation's loops after 65535 in all.
    if 4 * (sum(math.prod(taps[:i + 1]) for i in range(MAX_AXES)) + sum(taps) + 1) > LOOP_BUDGET:
        return f"{math.prod(taps)} filter taps per output element are too many for one invocation"
    text = {"T": t, "NEAREST": "true" if nearest else "false", "KERNEL": KERNELS.get(attrs["mode"], "0.0"),
            "ZERO": ZERO[t]}
    return params, text


SEGMENT = 8  # output pixels along W per invocation of resize_nc4hw4.wgsl, fewer for wide filters
BILINEAR_SEGMENT = 16  # longer for its bilinear path: loaded columns serve the following pixels
X_SLOT, Y_SLOT = 30, 35  # params slots of the accessor dims in resize_nc4hw4.wgsl


def resampled_axes(step: Step) -> list[AxisResize]:
    values = [step.input_values[i] if i < len(step.inputs) and step.inputs[i] else None for i in (1, 2, 3)]

    def fail(message: str) -> Exception:
        return ValueError(f"{step.label}: {message}")

    return plan_resize(step.attrs, tuple(step.input_specs[0].shape), *normalize_values(*values), fail)[1]


def unit_slots(dim: int, length: int) -> list[int | float]:
    """Slots of an axis left alone: the line x = y (A = 1, B = 0) with one tap of weight 1."""
    return [dim, length, *_words(ONE), *_words(0), 0, length - 1, 1, 0, 1.0]


def spatial_plan(step: Step) -> tuple[list[int | float], int] | None:
    """(params without the invocation count and segments, segment length) of resize_nc4hw4.wgsl for
    a 4-D float32 resize along H and W only; None where it does not apply or the numpy backend's
    tables cannot be matched (then plan() decides, and refuses those)."""
    attrs, x, out = step.attrs, step.input_specs[0], step.output_specs[0]
    if x.dtype != "float32" or len(x.shape) != 4 or out.size == 0:
        return None
    axes = resampled_axes(step)
    if any(axis.axis not in (2, 3) for axis in axes):
        return None
    slots = {2: unit_slots(2, x.shape[2]), 3: unit_slots(3, x.shape[3])}
    for axis in axes:
        found = axis_slots(attrs, axis, axis.axis)
        if isinstance(found, str):
            return None
        slots[axis.axis] = found
    # The numpy backend applies shrinking axes first (a stable sort); extrapolation depends on it.
    order = [a.axis for a in sorted(axes, key=lambda s: s.out_len / s.in_len)]
    h_first = int(order != [3, 2])
    taps_h, taps_w = slots[2][8], slots[3][8]
    # Loop iterations: the H set-up, then per pixel the W set-up and the nested tap loops, kept
    # within half of llvmpipe's loop budget (as the pool kernels).
    per_pixel = taps_h * taps_w + taps_h + taps_w + 1
    segment = min(SEGMENT, (LOOP_BUDGET // 2 - taps_h - 8) // per_pixel)
    if segment < 1:
        return None
    flags = int(bool(attrs["exclude_outside"])) | 2 * int(bool(attrs["antialias"]))
    # Plain bilinear (two taps from the floor, nothing extrapolated, no renormalising) takes the
    # kernel's column-caching path.
    bilinear = attrs["mode"] == "linear" and taps_h == taps_w == 2 and not (flags & 1) and all(
        s[9] == 0 and s[10] == 1.0 and s[6] == 0 and s[7] == length - 1
        for s, length in ((slots[2], out.shape[2]), (slots[3], out.shape[3])))
    if bilinear:
        segment = BILINEAR_SEGMENT
    head = [int(np.float32(attrs["extrapolation_value"]).view(np.int32)), float(attrs["cubic_coeff_a"]), flags,
            h_first, int(bilinear)]
    return head + slots[2] + slots[3], segment


def linear_accessor(var: str, binding: int, slot: int, *, write: bool) -> str:
    """load_var / store_var over a linear NCHW f32 tensor with the NC4HW4 accessors' signature: 4
    channel planes gathered into (or scattered from) a vec4, channels past C skipped."""
    c, h, w = f"p({slot + 4}u)", f"p({slot + 2}u)", f"p({slot + 3}u)"
    decl = f"@group(0) @binding({binding}) var<storage, read_write> {var}_b: array<f32>;\n"
    head = (f"fn store_{var}(n: i32, c4: i32, y: i32, x: i32, v: vec4<f32>) {{\n" if write else
            f"fn load_{var}(n: i32, c4: i32, y: i32, x: i32) -> vec4<f32> {{\n")
    body = (f"    let plane = {h} * {w};\n"
            f"    let at = ((n * {c} + c4 * 4) * {h} + y) * {w} + x;\n"
            f"    let left = {c} - c4 * 4;\n")
    if write:
        body += "".join(f"    if (left > {k}) {{ {var}_b[at + {k} * plane] = v[{k}]; }}\n" for k in range(4))
        return decl + head + body + "}"
    body += "    var v = vec4<f32>(0.0);\n"
    body += "".join(f"    if (left > {k}) {{ v[{k}] = {var}_b[at + {k} * plane]; }}\n" for k in range(4))
    return decl + head + body + "    return v;\n}"


@gpu_kernel("Resize")
class ResizeGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.output_specs[0].size == 0 or spatial_plan(step) is not None:
            return None
        planned = plan(step)
        return planned if isinstance(planned, str) else None

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        # Follows its input: a feature map produced NC4HW4 is resized without conversions.
        return ("linear", "nc4hw4") if spatial_plan(step) is not None else ("linear",)

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        if out.size == 0:
            return
        spatial = spatial_plan(step)
        if spatial is not None:
            self.prepare_spatial(*spatial)
            return
        params, text = plan(step)
        # One invocation per 4 neighbours along the last dim.
        width = out.shape[-1] if out.shape else 1
        invocations = out.size // width * -(-width // 4)
        self.dispatch("resize/resize.wgsl", [step.inputs[0], step.outputs[0]], params, invocations, text=text)

    def prepare_spatial(self, head: list[int | float], segment: int) -> None:
        from .layout import accessor_params, nc4hw4_text

        step = self.step
        x, y = step.input_specs[0], step.output_specs[0]
        n, c, oh, ow = y.shape
        segments = -(-ow // segment)
        invocations = n * -(-c // 4) * oh * segments
        params = [invocations, segments, segment, *head, *accessor_params(x), *accessor_params(y)]
        if self.layout == "nc4hw4":
            placement = self.backend.placement
            decl_x = nc4hw4_text("x", 0, X_SLOT, placement(step.inputs[0]), write=False)
            decl_y = nc4hw4_text("y", 1, Y_SLOT, placement(step.outputs[0]), write=True)
        else:
            decl_x = linear_accessor("x", 0, X_SLOT, write=False)
            decl_y = linear_accessor("y", 1, Y_SLOT, write=True)
        mode = step.attrs["mode"]
        text = {"DECL_X": decl_x, "DECL_Y": decl_y, "NEAREST": "true" if mode == "nearest" else "false",
                "KERNEL": SPATIAL_KERNELS.get(mode, "0.0")}
        self.dispatch("resize/resize_nc4hw4.wgsl", [step.inputs[0], step.outputs[0]], params, invocations, text=text)
