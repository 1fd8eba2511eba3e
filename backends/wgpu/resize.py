"""Resize on the GPU: one dispatch; each invocation computes 4 neighbouring output elements,
combining the taps of up to 4 resampled axes (kernels_wgsl/resize/resize.wgsl).

Source coordinates are affine in the output position, x = A * y + B. The shader evaluates them in
64-bit fixed point (40 fractional bits) with integer arithmetic, so its nearest indices and crop
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


@gpu_kernel("Resize")
class ResizeGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.output_specs[0].size == 0:
            return None
        planned = plan(step)
        return planned if isinstance(planned, str) else None

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        if out.size == 0:
            return
        params, text = plan(step)
        # One invocation per 4 neighbours along the last dim.
        width = out.shape[-1] if out.shape else 1
        invocations = out.size // width * -(-width // 4)
        self.dispatch("resize/resize.wgsl", [step.inputs[0], step.outputs[0]], params, invocations, text=text)
