"""MatMul family on numpy: numpy.matmul (BLAS), then alpha, bias, the output permutation perm_y,
the fused residual and the fused activation; split_y parts are views of the product.

Where the product has the output's shape and type (no perm_y, no split_y, both operands at least
2-D: decided at resize), it goes straight into the step's output (np.matmul's out=), and alpha,
the bias, the residual and Relu/Clip apply there in place: no array of the output's size per run
and no copy of it into the output. Otherwise the product is an array of its own, copied (permuted
or split) into the outputs. A direct product of a few rows is cut into bands of columns where
numpy's BLAS runs such pieces faster (blas.small_product_columns). Shape inference guarantees that
the bias broadcasts onto Y without enlarging it and that the residual has Y's shape."""
from __future__ import annotations

import math

import numpy as np

from .blas import matmul_in_bands, small_product_columns
from .conv import epilogue
from .elementwise import unary_into
from .kernel import numpy_kernel


def _prepare(ex) -> None:
    step, attrs = ex.step, ex.attrs
    a, b = step.input_specs[:2]
    out = step.output_specs[0]
    # np.matmul's out= takes the product where it has an output's layout and type.
    unpermuted = (not attrs.get("perm_y") and len(a.shape) >= 2 and len(b.shape) >= 2
                  and np.result_type(a.dtype, b.dtype) == np.dtype(out.dtype))
    split = attrs.get("split_y", 1)
    ex.state["direct"] = unpermuted and split == 1
    ex.state["column_bands"] = _column_bands(ex) if ex.state["direct"] else []
    # The whole product of a split_y step (Q, K and V's), then copied part by part: into memory of
    # the step rather than a new array on every run.
    ex.state["product"] = (np.empty((*out.shape[:-1], out.shape[-1] * split), out.dtype)
                           if unpermuted and split > 1 else None)
    kind = attrs["activation"]
    # Relu / Clip as one in-place clip, GELU in place by its compiled table (conv.epilogue); other
    # activations through unary_into.
    in_place = kind in ("relu", "clip", "gelu") and np.dtype(out.dtype).kind == "f"
    ex.state["epilogue"] = epilogue(kind, attrs["activation_alpha"], attrs["activation_beta"],
                                    np.dtype(out.dtype), math.prod(out.shape)) if in_place else None


def _column_bands(ex) -> list[slice]:
    """Bands of the product's columns, each its own product, where numpy's BLAS multiplies a few
    rows faster in such pieces (blas.small_product_columns: 8 x 768 by 768 x 768 x0.62-0.76 on
    one OpenBLAS thread); [] for one product."""
    a_shape = list(ex.step.input_specs[0].shape)
    if ex.attrs.get("perm_a"):
        a_shape = [a_shape[i] for i in ex.attrs["perm_a"]]
    depth = a_shape[-2] if ex.attrs["trans_a"] else a_shape[-1]
    rows, columns = ex.step.output_specs[0].shape[-2:]
    band = small_product_columns(rows, depth, columns, ex.step.output_specs[0].dtype, unless_threaded=True)
    return [slice(first, first + band) for first in range(0, columns, band)] if band < columns else []


def _activate(ex, y: np.ndarray, out: np.ndarray) -> None:
    """The fused activation of y written to out (y may be out)."""
    if ex.state["epilogue"] is not None:
        ex.state["epilogue"](y, out)
        return
    attrs = ex.attrs
    unary_into(attrs["activation"], y, attrs["activation_alpha"], attrs["activation_beta"], out)


@numpy_kernel("MatMul", writes_outputs=True, prepare=_prepare)
def matmul(ex, inputs, outputs):
    if "direct" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    attrs = ex.attrs
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    r = inputs[3] if len(inputs) > 3 else None
    if attrs.get("perm_a"):  # views: numpy.matmul takes strided operands
        a = np.transpose(a, attrs["perm_a"])
    if attrs.get("perm_b"):
        b = np.transpose(b, attrs["perm_b"])
    if attrs["trans_a"] and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if attrs["trans_b"] and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    out = outputs[0]
    if ex.state["direct"]:
        matmul_in_bands(a, b, out, ex.state["column_bands"])
        y = out
    elif ex.state["product"] is not None:
        y = np.matmul(a, b, out=ex.state["product"])
    else:
        y = np.asarray(np.matmul(a, b))  # 1-D @ 1-D gives a numpy scalar
        if not y.flags.writeable or y.base is not None:
            y = y.copy()
    if attrs["alpha"] != 1.0:
        y *= y.dtype.type(attrs["alpha"])
    if c is not None:
        if attrs["beta"] == 1.0:
            y += c
        else:
            y += c * c.dtype.type(attrs["beta"])
    if attrs.get("perm_y"):  # one copy, as the Transpose folded in made
        y = np.ascontiguousarray(np.transpose(y, attrs["perm_y"]))
    if r is not None:  # of Y's shape, before the activation
        y += r
    split = attrs.get("split_y", 1)
    if split == 1:
        if attrs["activation"]:
            _activate(ex, y, out)
        elif y is not out:
            np.copyto(out, y, casting="unsafe")
        return
    width = y.shape[-1] // split  # split_y: the parts are slices of the product (np.split costs ~8 us)
    for i, part_out in enumerate(outputs[:split]):
        part = y[..., i * width:(i + 1) * width]
        if attrs["activation"]:
            _activate(ex, part, part_out)
        else:
            np.copyto(part_out, part, casting="unsafe")
