"""MatMul family: one "MatMul" op for ONNX MatMul and Gemm.

    Y = activation(alpha * op(A) @ op(B) + beta * C + R)

op() first permutes an operand's axes by perm_a / perm_b when set (the converter folds a Transpose
that only this MatMul reads into it: the kernels read the untransposed tensor through permuted
strides), then swaps its last two axes when trans_a / trans_b is set; A and B follow numpy.matmul (1-D
operands, broadcast batch axes); the optional bias C broadcasts onto the product without enlarging
it. perm_y, when set, permutes the product's axes before the residual and the activation (the
converter folds a Transpose of the product into it: the kernels store through permuted strides), so
Y = activation(transpose(alpha * op(A) @ op(B) + beta * C, perm_y) + R).
split_y > 1 splits the product's last axis (N) into that many equal parts, one output each (the
converter merges sibling MatMuls that read the same A into one product: attention's Q, K and V
projections); it takes no perm_y and no residual.
The optional fourth input R is a residual of exactly Y's shape and type (no broadcasting, as
Conv's), put there by the converter's residual-Add fusion (tools/convert/fusion.py): it is added
unscaled, after the bias and before the activation.
"""
from __future__ import annotations

from .base import Attr, InferContext, OpDef, TensorSpec, broadcast_shapes, register_op
from .conv import ACTIVATION_ATTRS, check_activation


def permuted(shape, perm) -> tuple[int, ...]:
    """shape with its axes in perm's order (perm empty: as it is)."""
    return tuple(shape[p] for p in perm) if perm else tuple(shape)


def operand_shape(ctx: InferContext, index: int, key: str) -> list[int]:
    """The shape of input `index` as the product sees it, after the permutation attribute `key`."""
    shape, perm = ctx.shape(index), list(ctx.attrs.get(key) or [])
    if perm and sorted(perm) != list(range(len(shape))):
        raise ctx.fail(f"{key} {perm} is not a permutation of the {len(shape)} axes of input {index}")
    return list(permuted(shape, perm))


def matmul_shape(ctx: InferContext) -> tuple[tuple[int, ...], int]:
    """The product's shape (before perm_y) and the contracted size K."""
    a, b = operand_shape(ctx, 0, "perm_a"), operand_shape(ctx, 1, "perm_b")
    if not a or not b:
        raise ctx.fail("MatMul operands must have rank >= 1")
    if ctx.attrs["trans_a"] and len(a) >= 2:
        a[-2], a[-1] = a[-1], a[-2]
    if ctx.attrs["trans_b"] and len(b) >= 2:
        b[-2], b[-1] = b[-1], b[-2]
    a_vec, b_vec = len(a) == 1, len(b) == 1
    if a_vec:
        a = [1, *a]
    if b_vec:
        b = [*b, 1]
    if a[-1] != b[-2]:
        raise ctx.fail(f"inner dimensions differ: {a[-1]} (A) and {b[-2]} (B)")
    batch = broadcast_shapes(ctx, tuple(a[:-2]), tuple(b[:-2]))
    out = list(batch) + ([] if a_vec else [a[-2]]) + ([] if b_vec else [b[-1]])
    return tuple(out), a[-1]


@register_op
class MatMul(OpDef):
    op_type = "MatMul"
    family = "matmul"
    attrs = {
        "trans_a": Attr("int", 0),
        "trans_b": Attr("int", 0),
        "perm_a": Attr("ints", []),
        "perm_b": Attr("ints", []),
        "perm_y": Attr("ints", []),
        "split_y": Attr("int", 1),
        "alpha": Attr("float", 1.0),
        "beta": Attr("float", 1.0),
        **ACTIVATION_ATTRS,
    }

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        if ctx.dtype(0) != ctx.dtype(1):
            raise ctx.fail(f"operand types differ: {ctx.dtype(0)} and {ctx.dtype(1)}")
        check_activation(ctx)
        product, _ = matmul_shape(ctx)
        if ctx.has(2):
            if ctx.dtype(2) != ctx.dtype(0):
                raise ctx.fail(f"bias type {ctx.dtype(2)} differs from operand type {ctx.dtype(0)}")
            if broadcast_shapes(ctx, product, ctx.shape(2)) != product:
                raise ctx.fail(f"bias of shape {ctx.shape(2)} does not broadcast to the product {product}")
        perm_y = list(ctx.attrs.get("perm_y") or [])
        if perm_y and sorted(perm_y) != list(range(len(product))):
            raise ctx.fail(f"perm_y {perm_y} is not a permutation of the product's {len(product)} axes")
        out = permuted(product, perm_y)
        split = ctx.attrs.get("split_y", 1)  # GlobalPoolMatMul infers through this without it
        if split != 1:
            if split < 1 or perm_y or ctx.has(3) or len(operand_shape(ctx, 1, "perm_b")) == 1:
                raise ctx.fail(f"split_y {split}: the product's last axis splits into 1 or more parts, "
                               "without perm_y, a residual or a 1-D B")
            if product[-1] % split:
                raise ctx.fail(f"split_y {split} does not divide the product's {product[-1]} columns")
            return [TensorSpec((*product[:-1], product[-1] // split), ctx.dtype(0))] * split
        # The kernels add the residual element by element at the output's own index.
        if ctx.has(3) and (tuple(ctx.shape(3)) != out or ctx.dtype(3) != ctx.dtype(0)):
            raise ctx.fail(f"residual must be {ctx.dtype(0)} of the output's shape {list(out)}, got "
                           f"{ctx.dtype(3)} {list(ctx.shape(3))}")
        return [TensorSpec(out, ctx.dtype(0))]

    def flops(self, ctx, outputs) -> int:
        _, k = matmul_shape(ctx)
        size = sum(o.size for o in outputs)
        return 2 * size * k + (size if ctx.has(3) else 0)
