"""ONNX TopK, NonZero, Compress, NonMaxSuppression and Einsum -> wgnn select ops.

Einsum is lowered here to ops the GPU runs (Transpose, Reshape, Slice, Unsqueeze, Reduce,
MatMul, Binary mul), one pairwise contraction at a time, so models need no Einsum kernel:

- a label repeated in one operand (a diagonal, "ii->i") moves its two axes last, flattens them
  and takes every (n+1)-th element with a Slice whose step comes from the operand's Shape;
- labels found in one operand only and not in the output are summed away first (Reduce sum);
- two operands contract as a batched MatMul: shared labels the result keeps are batch dims, shared
  labels it drops are the inner dim K, the others are the rows M of A and the columns N of B;
  groups of several labels are merged with Reshape (sizes from Shape, folded at resize) and split
  again after, and A or B read transposed through MatMul's trans_a / trans_b where that saves a
  Transpose. Without shared labels to drop, the product is a broadcast Binary mul instead.
- a final Transpose puts the labels in the output's order.

Equations it cannot lower stay one Einsum op (run by the numpy backend): an ellipsis on an operand
whose rank the model does not state, or a contracted label with a size 1 that numpy would
broadcast (or that the model does not state).
"""
from __future__ import annotations

import logging

import numpy as np

from ....engine.ops.select import Equation, parse_equation
from .table import onnx_op, same_op

for _op in ("NonZero", "Compress", "NonMaxSuppression"):
    same_op(_op, _op)

INT64_MAX = int(np.iinfo(np.int64).max)
log = logging.getLogger("wgnn.convert")


@onnx_op("TopK")
def topk(ctx, node):
    """TopK-1: k is an attribute; from TopK-10 an input. largest / sorted exist from TopK-11."""
    attrs = {key: int(node.attrs[key]) for key in ("axis", "largest", "sorted") if key in node.attrs}
    if ctx.opset < 10:
        if "k" not in node.attrs:
            raise ctx.fail("TopK-1 needs the `k` attribute")
        k = ctx.add_constant(np.array([int(node.attrs["k"])], np.int64), "k")
        ctx.emit("TopK", [node.inputs[0], k], node.outputs, attrs)
        return
    ctx.emit("TopK", node.inputs[:2], node.outputs, attrs)


# ------------------------------------------------------------------------------------ Einsum
def _static_shape(ctx, name: str) -> tuple | None:
    """The model's stated shape of a tensor (ints, or strings for symbolic dims), if any."""
    value = ctx.constant(name)
    if value is not None:
        return tuple(value.shape)
    graph = ctx.graph
    for info in [*graph.inputs, *graph.outputs, *graph.value_info.values()]:
        if info.name == name and info.shape is not None:
            return tuple(info.shape)
    return None


class _Lowering:
    """Emits the ops of one lowered Einsum; each value is (tensor name, its labels)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.last = None  # the last emitted node: its output becomes the Einsum's output

    def emit(self, op_type: str, inputs: list[str], attrs: dict | None = None, hint: str = "einsum") -> str:
        name = self.ctx.fresh(hint)
        self.last = self.ctx.emit(op_type, inputs, [name], attrs or {})
        return name

    def const(self, values, hint: str) -> str:
        return self.ctx.add_constant(np.asarray(values, np.int64), hint)

    def shape(self, name: str, start: int, end: int) -> str:
        return self.emit("Shape", [name], {"start": start, "end": end}, "shape")

    def transpose(self, value, order: list[str]):
        name, labels = value
        if labels == order:
            return value
        return self.emit("Transpose", [name], {"perm": [labels.index(c) for c in order]}), order

    def reduce_sum(self, value, drop: set[str]):
        name, labels = value
        axes = [i for i, c in enumerate(labels) if c in drop]
        if not axes:
            return value
        out = self.emit("Reduce", [name], {"kind": "sum", "axes": axes, "keepdims": 0})
        return out, [c for c in labels if c not in drop]

    def unsqueeze(self, value, axes: list[int]) -> str:
        if not axes:
            return value[0]
        return self.emit("Unsqueeze", [value[0], self.const(axes, "axes")])

    def diagonal(self, value, label: str):
        """Merge the first two axes of a repeated label into one: its diagonal."""
        name, labels = value
        p = labels.index(label)
        q = labels.index(label, p + 1)
        rest = [c for i, c in enumerate(labels) if i not in (p, q)]
        order_index = [i for i in range(len(labels)) if i not in (p, q)] + [p, q]
        if order_index != list(range(len(labels))):
            name = self.emit("Transpose", [name], {"perm": order_index})
        rank = len(labels)
        flat = self.emit("Reshape", [name, self.const([0] * (rank - 2) + [-1], "shape")])
        step = self.emit("Binary", [self.shape(name, rank - 1, rank), self.const([1], "one")], {"kind": "add"})
        diag = self.emit("Slice", [flat, self.const([0], "starts"), self.const([INT64_MAX], "ends"),
                                   self.const([-1], "axes"), step])
        return diag, rest + [label]

    def group(self, value, batch: list[str], first: list[str], second: list[str]):
        """Reshape a value laid out batch + first + second to batch + [prod(first), prod(second)]."""
        name, _ = value
        nb = len(batch)
        if len(first) == 1 and len(second) == 1:
            return name
        if not first and not second:
            dims = self.const([0] * nb + [1, 1], "shape")
        elif not second:
            dims = self.const([0] * nb + [-1, 1], "shape")
        elif not first:
            dims = self.const([0] * nb + [1, -1], "shape")
        else:
            size = self.shape(name, nb + len(first), nb + len(first) + len(second))
            if len(second) > 1:
                size = self.emit("Reduce", [size], {"kind": "prod", "axes": [0], "keepdims": 1})
            dims = self.emit("Concat", [self.const([0] * nb + [-1], "shape"), size], {"axis": 0})
        return self.emit("Reshape", [name, dims])

    def contract(self, a, b, keep: set[str]):
        """The product of a and b, summed over their shared labels not in keep."""
        a_labels, b_labels = a[1], b[1]
        batch = [c for c in a_labels if c in b_labels and c in keep]
        inner = [c for c in a_labels if c in b_labels and c not in keep]
        rows = [c for c in a_labels if c not in b_labels]
        cols = [c for c in b_labels if c not in a_labels]
        if not inner:  # a broadcast product: align a as batch+rows+1s, b as batch+1s+cols
            a = self.transpose(a, batch + rows)
            b = self.transpose(b, batch + cols)
            nb, nr = len(batch), len(rows)
            a_name = self.unsqueeze(a, list(range(nb + nr, nb + nr + len(cols))))
            # Without batch dims, b broadcasts against a's rows from the left as it is.
            b_name = self.unsqueeze(b, list(range(nb, nb + nr)) if nb else [])
            return self.emit("Binary", [a_name, b_name], {"kind": "mul"}), batch + rows + cols
        # A as batch + rows + inner (or batch + inner + rows, read transposed), B likewise.
        a_plain, a_swapped = batch + rows + inner, batch + inner + rows
        trans_a = int(a_labels == a_swapped and a_swapped != a_plain)
        a = self.transpose(a, a_swapped if trans_a else a_plain)
        b_plain, b_swapped = batch + inner + cols, batch + cols + inner
        trans_b = int(b_labels == b_swapped and b_swapped != b_plain)
        b = self.transpose(b, b_swapped if trans_b else b_plain)
        # 1-D operands (no batch, no rows / cols, one inner label) go to MatMul as vectors.
        a_vector = not batch and not rows and len(inner) == 1
        b_vector = not batch and not cols and len(inner) == 1
        a_groups = (inner, rows) if trans_a else (rows, inner)
        b_groups = (cols, inner) if trans_b else (inner, cols)
        a_mat = a[0] if a_vector else self.group(a, batch, *a_groups)
        b_mat = b[0] if b_vector else self.group(b, batch, *b_groups)
        attrs = {"trans_a": trans_a, "trans_b": trans_b} if trans_a or trans_b else {}
        product = self.emit("MatMul", [a_mat, b_mat], attrs)
        split_rows = not a_vector and len(rows) != 1
        split_cols = not b_vector and len(cols) != 1
        if split_rows or split_cols:  # restore the label dims the grouping merged
            nb = len(batch)
            pieces = [self.const([0] * nb, "shape")] if nb else []
            if rows:
                start = nb + (len(inner) if trans_a else 0)
                pieces.append(self.shape(a[0], start, start + len(rows)))
            if cols:
                start = nb + (0 if trans_b else len(inner))
                pieces.append(self.shape(b[0], start, start + len(cols)))
            if not pieces:
                dims = self.const(np.zeros(0, np.int64), "shape")
            elif len(pieces) == 1:
                dims = pieces[0]
            else:
                dims = self.emit("Concat", pieces, {"axis": 0})
            product = self.emit("Reshape", [product, dims])
        return product, batch + rows + cols


def _not_lowerable(eq: Equation, shapes: list[tuple | None]) -> str | None:
    """Why the lowering cannot run this equation: numpy's einsum may broadcast a contracted dim
    of size 1, which MatMul cannot (None: it can be lowered)."""
    contracted = {c for term in eq.terms for c in term if c not in eq.output}
    for label in sorted(contracted):
        dims = [shape[i] if shape is not None else None
                for term, shape in zip(eq.terms, shapes) for i, c in enumerate(term) if c == label]
        if 1 in dims and any(d != 1 for d in dims):
            return f"contracted label {label!r} has sizes {dims}: a size 1 may broadcast"
    return None


def _keep_einsum(ctx, node, equation: str, reason: str) -> None:
    log.info('Einsum node "%s" (%s) stays one op, run on the CPU: %s', node.name, equation, reason)
    ctx.emit("Einsum", node.inputs, node.outputs[:1], {"equation": equation})


@onnx_op("Einsum")
def einsum(ctx, node):
    equation = node.attrs.get("equation")
    if not isinstance(equation, str):
        raise ctx.fail("Einsum needs the `equation` attribute")
    inputs = node.inputs
    shapes = [_static_shape(ctx, name) for name in inputs]
    terms = equation.replace(" ", "").partition("->")[0].split(",")
    if len(terms) != len(inputs):
        raise ctx.fail(f"equation {equation!r} has {len(terms)} operand terms for {len(inputs)} inputs")
    ranks = []
    for term, shape in zip(terms, shapes):
        if "..." in term and shape is None:
            _keep_einsum(ctx, node, equation, "the model does not state the rank of an ellipsis operand")
            return
        ranks.append(len(shape) if shape is not None else len(term))
    eq = parse_equation(equation, ranks, ctx.fail)
    reason = _not_lowerable(eq, shapes)
    if reason:
        _keep_einsum(ctx, node, equation, reason)
        return
    low = _Lowering(ctx)
    values = []
    for name, term in zip(inputs, eq.terms):
        value = (name, list(term))
        while len(set(value[1])) != len(value[1]):
            repeated = next(c for c in value[1] if value[1].count(c) > 1)
            value = low.diagonal(value, repeated)
        values.append(value)
    output = list(eq.output)
    # Sum labels that only one operand has and the output drops, before any product.
    for i, value in enumerate(values):
        others = {c for j, v in enumerate(values) if j != i for c in v[1]}
        values[i] = low.reduce_sum(value, {c for c in value[1] if c not in others and c not in eq.output})
    result = values[0]
    for i in range(1, len(values)):
        keep = set(output) | {c for v in values[i + 1:] for c in v[1]}
        result = low.contract(result, values[i], keep)
    result = low.transpose(result, output)
    if low.last is not None and result[0] == low.last.outputs[0]:
        low.last.outputs = [node.outputs[0]]  # the last op writes the Einsum's output directly
    else:  # nothing to compute ("ij->ij"): the output is the input
        ctx.emit("Unary", [result[0]], node.outputs[:1], {"kind": "identity"})
