"""Pool family: "Pool" (kind max / avg / lp over sliding windows: kernel_shape, strides, pads,
dilations, ceil_mode, auto_pad, count_include_pad, p), "GlobalPool" (kind avg / max over every
spatial axis, which are kept as size 1) and "MaxUnpool" (scatter into zeros at given indices).

Max pooling has an optional second output, the int64 indices of the chosen elements in the
flattened input (ONNX MaxPool Indices; storage_order 1 numbers the spatial axes column-major)."""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, register_op
from .conv import resolve_pads, spatial_list, window_count

FLOAT_TYPES = ("float16", "float32", "float64", "bfloat16")


def wants_indices(node) -> bool:
    """Whether a Pool node produces the indices output (its second output is named)."""
    return len(node.outputs) > 1 and bool(node.outputs[1])


def pool_geometry(ctx: InferContext):
    """(kernel, strides, dilations, pads_begin, pads_end, output sizes) for the concrete input."""
    x = ctx.shape(0)
    if len(x) < 3:
        raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
    rank = len(x) - 2
    kernel = list(ctx.attrs["kernel_shape"])
    if len(kernel) != rank or any(k < 1 for k in kernel):
        raise ctx.fail(f"kernel_shape {kernel} should have {rank} positive entries")
    strides = spatial_list(ctx, "strides", rank, 1)
    dilations = spatial_list(ctx, "dilations", rank, 1)
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ctx.fail(f"strides {strides} and dilations {dilations} must be positive")
    begin, end = resolve_pads(ctx, x[2:], kernel, strides, dilations)
    ceil_mode = bool(ctx.attrs["ceil_mode"]) and ctx.attrs["auto_pad"] in ("NOTSET", "VALID")
    out = [window_count(n, k, s, d, b, e, ceil_mode)
           for n, k, s, d, b, e in zip(x[2:], kernel, strides, dilations, begin, end, strict=True)]
    if any(n <= 0 for n in out):
        raise ctx.fail(f"the window {kernel} (dilations {dilations}) does not fit the padded input")
    return kernel, strides, dilations, begin, end, out


@register_op
class Pool(OpDef):
    op_type = "Pool"
    family = "pool"
    kinds = ("max", "avg", "lp")
    attrs = {
        "kind": Attr("string"),
        "kernel_shape": Attr("ints"),
        "strides": Attr("ints", []),
        "dilations": Attr("ints", []),
        "pads": Attr("ints", []),
        "auto_pad": Attr("string", "NOTSET"),
        "ceil_mode": Attr("int", 0),
        "count_include_pad": Attr("int", 0),
        "p": Attr("float", 2.0),  # lp: (sum of |x|^p over the window)^(1/p)
        "storage_order": Attr("int", 0),  # max with indices: 1 numbers spatial axes column-major
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        kind = ctx.attrs["kind"]
        if kind != "max" and ctx.dtype(0) not in FLOAT_TYPES:
            raise ctx.fail(f"{kind} pooling needs a float input, got {ctx.dtype(0)}")
        if kind == "lp" and ctx.attrs["p"] <= 0:
            raise ctx.fail(f"p must be positive, got {ctx.attrs['p']}")
        *_, out = pool_geometry(ctx)
        y = TensorSpec((x[0], x[1], *out), ctx.dtype(0))
        if not wants_indices(ctx.node):
            return [y]
        if kind != "max":
            raise ctx.fail(f"only max pooling has an indices output, not {kind}")
        if ctx.attrs["storage_order"] not in (0, 1):
            raise ctx.fail(f"storage_order must be 0 or 1, got {ctx.attrs['storage_order']}")
        return [y, TensorSpec(y.shape, "int64")]

    def flops(self, ctx, outputs) -> int:
        return outputs[0].size * math.prod(ctx.attrs["kernel_shape"])


@register_op
class GlobalPool(OpDef):
    op_type = "GlobalPool"
    family = "pool"
    kinds = ("avg", "max")
    attrs = {"kind": Attr("string")}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        if len(x) < 3:
            raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
        if any(d == 0 for d in x[2:]):
            raise ctx.fail("cannot pool over an empty spatial axis")
        return [TensorSpec((x[0], x[1], *([1] * (len(x) - 2))), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return math.prod(ctx.shape(0))


def unpool_shape(ctx: InferContext) -> tuple[int, ...]:
    """MaxUnpool's output shape: output_shape (input 2) when given, else per spatial axis
    (in - 1) * stride - pads_begin - pads_end + kernel."""
    x = ctx.shape(0)
    rank = len(x) - 2
    if ctx.has(2):
        value = ctx.value(2)
        shape = tuple(int(d) for d in value.reshape(-1))
        if len(shape) != len(x) or any(d < 0 for d in shape):
            raise ctx.fail(f"output_shape {list(shape)} must hold {len(x)} non-negative dims")
        return shape
    kernel = list(ctx.attrs["kernel_shape"])
    strides = spatial_list(ctx, "strides", rank, 1)
    pads = ctx.attrs["pads"] or [0] * (2 * rank)
    if len(pads) != 2 * rank:
        raise ctx.fail(f"pads {pads} should have {2 * rank} entries")
    out = [(n - 1) * s - b - e + k
           for n, s, k, b, e in zip(x[2:], strides, kernel, pads[:rank], pads[rank:], strict=True)]
    if any(d < 0 for d in out):
        raise ctx.fail(f"the inferred output size {out} is negative")
    return (x[0], x[1], *out)


@register_op
class MaxUnpool(OpDef):
    """MaxUnpool(X, I, output_shape?): zeros of the output shape with y_flat[I] = X. The indices
    are flat positions in the output tensor (as MaxPool's indices are in its input); with
    output_shape they index that shape directly (onnxruntime and PyTorch; onnx.reference instead
    scatters into the inferred shape and pads it, see tests/ops/test_pool_more.py)."""

    op_type = "MaxUnpool"
    family = "pool"
    attrs = {"kernel_shape": Attr("ints"), "strides": Attr("ints", []), "pads": Attr("ints", [])}
    value_inputs = (2,)

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        x = ctx.shape(0)
        if len(x) < 3:
            raise ctx.fail(f"input must be (N, C, spatial...), got rank {len(x)}")
        if len(ctx.attrs["kernel_shape"]) != len(x) - 2:
            raise ctx.fail(f"kernel_shape {ctx.attrs['kernel_shape']} should have {len(x) - 2} entries")
        if tuple(ctx.shape(1)) != tuple(x):
            raise ctx.fail(f"indices shape {ctx.shape(1)} differs from the input shape {x}")
        if ctx.dtype(1) not in ("int64", "int32"):
            raise ctx.fail(f"indices must be int64, got {ctx.dtype(1)}")
        return [TensorSpec(unpool_shape(ctx), ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        return 0
