"""Conv family: "Conv" and "ConvTranspose" (1-D, 2-D, 3-D; groups, dilations, strides, pads,
auto_pad resolved from the concrete input shape) with an optional fused activation.

Conv takes an optional fourth input, a residual of the output's shape (put there by the
converter's residual-Add fusion, tools/convert/fusion.py): y = act(conv(x, w) + bias + residual).

The spatial-window helpers here (pads resolution, output sizes) are shared with the Pool family.
"""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, register_op
from .unary import UNARY_KINDS

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")

# Attributes of a fused activation: a Unary kind ("" = none) applied after the bias.
ACTIVATION_ATTRS = {
    "activation": Attr("string", ""),
    "activation_alpha": Attr("float", 0.0),
    "activation_beta": Attr("float", 0.0),
}
# A conv's window, as Conv and the fused conv ops (ConvDwPw, ConvPw, ConvMaxPool) take it.
WINDOW_ATTRS = {
    "strides": Attr("ints", []),
    "dilations": Attr("ints", []),
    "pads": Attr("ints", []),
    "auto_pad": Attr("string", "NOTSET"),
}


def stage_activation_attrs(prefix: str) -> dict[str, Attr]:
    """The fused activation of a fused op's first stage: <prefix>_activation, _alpha, _beta."""
    return {f"{prefix}_{key}": attr for key, attr in ACTIVATION_ATTRS.items()}


def check_activation(ctx: InferContext) -> None:
    kind = ctx.attrs["activation"]
    if kind and kind not in UNARY_KINDS:
        raise ctx.fail(f"unknown fused activation {kind!r}; expected one of {sorted(UNARY_KINDS)}")


# Strides, dilations and pads past this are absurd (a corrupted model) and would overflow the
# kernels' 32-bit index arithmetic.
WINDOW_LIMIT = 2 ** 31


def spatial_list(ctx: InferContext, name: str, rank: int, default: int) -> list[int]:
    """A per-spatial-axis attribute (strides, dilations, ...) with its default filled in."""
    values = ctx.attrs[name]
    if not values:
        return [default] * rank
    if len(values) != rank:
        raise ctx.fail(f"{name} {values} has {len(values)} entries, the op has {rank} spatial axes")
    lowest = min(default, 1)  # strides and dilations from 1, output padding from 0
    if any(not lowest <= v < WINDOW_LIMIT for v in values):
        raise ctx.fail(f"{name} {values} must be in [{lowest}, {WINDOW_LIMIT})")
    return list(values)


def explicit_pads(ctx: InferContext, rank: int) -> list[int]:
    pads = ctx.attrs["pads"]
    if not pads:
        return [0] * (2 * rank)
    if len(pads) != 2 * rank:
        raise ctx.fail(f"pads {pads} should have {2 * rank} entries (begin and end per spatial axis)")
    if any(p < 0 for p in pads):
        raise ctx.fail(f"negative pads {pads} are not supported")
    if any(p >= WINDOW_LIMIT for p in pads):
        raise ctx.fail(f"pads {pads} must be below {WINDOW_LIMIT}")
    return list(pads)


def resolve_pads(ctx: InferContext, sizes, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """(pads_begin, pads_end) per spatial axis for the op's auto_pad mode and input sizes.

    SAME_*: the output has ceil(size / stride) elements; the total padding this needs is split with
    the odd element at the end (SAME_UPPER) or at the beginning (SAME_LOWER).
    """
    mode = ctx.attrs["auto_pad"]
    rank = len(sizes)
    if mode not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {mode!r} is not one of {list(AUTO_PADS)}")
    if mode == "NOTSET":
        pads = explicit_pads(ctx, rank)
        return pads[:rank], pads[rank:]
    if mode == "VALID":
        return [0] * rank, [0] * rank
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else large)
        end.append(large if mode == "SAME_UPPER" else small)
    return begin, end


def window_count(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
                 ceil_mode: bool = False) -> int:
    """Number of windows along one axis. With ceil_mode a partial last window is kept, unless it
    would start in the end padding (the ONNX/PyTorch rule)."""
    span = (kernel - 1) * dilation + 1
    room = size + pad_begin + pad_end - span
    if room < 0:
        return 0
    if not ceil_mode:
        return room // stride + 1
    out = -(-room // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def _common(ctx: InferContext):
    """Validated shapes and attributes shared by Conv and ConvTranspose."""
    x, w = ctx.shape(0), ctx.shape(1)
    if len(x) < 3:
        raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
    if len(w) != len(x):
        raise ctx.fail(f"weight rank {len(w)} differs from input rank {len(x)}")
    if ctx.dtype(1) != ctx.dtype(0):
        raise ctx.fail(f"weight type {ctx.dtype(1)} differs from input type {ctx.dtype(0)}")
    rank = len(x) - 2
    group = ctx.attrs["group"]
    if group < 1:
        raise ctx.fail(f"group must be >= 1, got {group}")
    check_activation(ctx)
    strides = spatial_list(ctx, "strides", rank, 1)
    dilations = spatial_list(ctx, "dilations", rank, 1)
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ctx.fail(f"strides {strides} and dilations {dilations} must be positive")
    return x, w, rank, group, strides, dilations


def _check_bias(ctx: InferContext, channels: int) -> None:
    if ctx.has(2) and tuple(ctx.shape(2)) != (channels,):
        raise ctx.fail(f"bias must have shape ({channels},), got {ctx.shape(2)}")


@register_op
class Conv(OpDef):
    op_type = "Conv"
    family = "conv"
    attrs = {
        **WINDOW_ATTRS,
        "group": Attr("int", 1),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x, w, _, group, strides, dilations = _common(ctx)
        if x[1] != w[1] * group:
            raise ctx.fail(f"input has {x[1]} channels, weight expects {w[1]} x group {group}")
        if w[0] % group:
            raise ctx.fail(f"{w[0]} output channels are not divisible by group {group}")
        _check_bias(ctx, w[0])
        begin, end = resolve_pads(ctx, x[2:], w[2:], strides, dilations)
        out = [window_count(*axis) for axis in zip(x[2:], w[2:], strides, dilations, begin, end, strict=True)]
        if any(n <= 0 for n in out) and math.prod(x) > 0:
            raise ctx.fail(f"the kernel {list(w[2:])} (dilations {dilations}) does not fit the padded input")
        shape = (x[0], w[0], *out)
        # The fused residual adds element by element: no broadcasting (the fusion pass only folds
        # an Add whose other operand has the conv output's shape).
        if ctx.has(3) and (tuple(ctx.shape(3)) != shape or ctx.dtype(3) != ctx.dtype(0)):
            raise ctx.fail(f"residual must be {ctx.dtype(0)} of the output's shape {list(shape)}, got "
                           f"{ctx.dtype(3)} {list(ctx.shape(3))}")
        return [TensorSpec(shape, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        w = ctx.shape(1)
        return 2 * outputs[0].size * math.prod(w[1:]) + (outputs[0].size if ctx.has(3) else 0)


def conv_transpose_geometry(ctx: InferContext):
    """(output spatial sizes, pads_begin, pads_end, strides, dilations, output_padding) of a
    ConvTranspose for its concrete input. The full (uncropped) output along an axis has
    (size - 1) * stride + (kernel - 1) * dilation + 1 + output_padding elements; pads crop it.
    An explicit output_shape (or auto_pad SAME_*: size * stride) fixes the size and implies the
    pads; an odd total goes to the end for SAME_UPPER, else to the beginning (ONNX spec, and what
    onnxruntime does). Where size * stride exceeds the full output (kernel < stride), SAME keeps
    size * stride as the spec says (the extra positions get only the bias); onnxruntime instead
    shrinks the output to the full size."""
    x, w, rank, _, strides, dilations = _common(ctx)
    output_padding = spatial_list(ctx, "output_padding", rank, 0)
    if any(p < 0 for p in output_padding):
        raise ctx.fail(f"negative output_padding {output_padding}")
    full = [(n - 1) * s + (k - 1) * d + 1 + p
            for n, k, s, d, p in zip(x[2:], w[2:], strides, dilations, output_padding, strict=True)]
    mode = ctx.attrs["auto_pad"]
    if mode not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {mode!r} is not one of {list(AUTO_PADS)}")
    shape = list(ctx.attrs["output_shape"])
    if len(shape) == rank + 2:
        shape = shape[2:]
    if shape and len(shape) != rank:
        raise ctx.fail(f"output_shape {ctx.attrs['output_shape']} does not match {rank} spatial axes")
    if not shape and mode in ("SAME_UPPER", "SAME_LOWER"):
        shape = [n * s for n, s in zip(x[2:], strides, strict=True)]
    if shape:
        begin, end = [], []
        for size, want in zip(full, shape, strict=True):
            total = max(0, size - want)
            small, large = total // 2, total - total // 2
            begin.append(small if mode == "SAME_UPPER" else large)
            end.append(large if mode == "SAME_UPPER" else small)
        return shape, begin, end, strides, dilations, output_padding
    pads = [0] * (2 * rank) if mode == "VALID" else explicit_pads(ctx, rank)
    begin, end = pads[:rank], pads[rank:]
    out = [size - b - e for size, b, e in zip(full, begin, end, strict=True)]
    return out, begin, end, strides, dilations, output_padding


@register_op
class ConvTranspose(OpDef):
    op_type = "ConvTranspose"
    family = "conv"
    attrs = {
        "strides": Attr("ints", []),
        "dilations": Attr("ints", []),
        "pads": Attr("ints", []),
        "output_padding": Attr("ints", []),
        "output_shape": Attr("ints", []),
        "auto_pad": Attr("string", "NOTSET"),
        "group": Attr("int", 1),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x, w = ctx.shape(0), ctx.shape(1)
        out, *_ = conv_transpose_geometry(ctx)
        group = ctx.attrs["group"]
        if x[1] != w[0]:
            raise ctx.fail(f"input has {x[1]} channels, weight expects {w[0]}")
        if w[0] % group:
            raise ctx.fail(f"{w[0]} input channels are not divisible by group {group}")
        channels = w[1] * group
        _check_bias(ctx, channels)
        if any(n <= 0 for n in out):
            raise ctx.fail(f"pads crop the output to a non-positive size {out}")
        return [TensorSpec((x[0], channels, *out), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        x, w = ctx.shape(0), ctx.shape(1)
        return 2 * math.prod(x) * math.prod(w[1:])
