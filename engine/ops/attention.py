"""Attention: scaled dot-product attention in one op, made by the converter from MatMul (scores) ->
Softmax over the keys -> MatMul (context) (tools/convert/fusion_matmul.py, fuse_attention):

    Y = transpose(softmax(alpha * Q' @ K' + beta * M) @ V', perm_y)

Q' (..., S_q, D), K' (..., D, S_k) and V' (..., S_k, D_v) are the inputs as the two MatMuls read
them: permuted by perm_q / perm_k / perm_v, then their last two axes swapped where trans_q /
trans_k / trans_v is set (the attrs the MatMuls carried: attention's head split is a permutation).
Their batch axes are equal (no broadcasting). The optional mask M (input 3) broadcasts onto the
scores (..., S_q, S_k) without enlarging them, as the scores MatMul's bias did. The softmax is
over S_k. On the GPU the scores never leave the kernel: one dispatch instead of three.
"""
from __future__ import annotations

from .base import Attr, InferContext, OpDef, TensorSpec, broadcast_shapes, register_op
from .matmul import permuted

Q, K, V, MASK = 0, 1, 2, 3
# The converter fuses heads up to this size: the GPU kernels keep a query row and its sums (D and
# D_v floats each) in registers (backends/wgpu/attention.py: past 64 on CPU adapters the op runs as
# its three products instead).
MAX_HEAD = 256


def read_as(values, perm: list[int], trans: int) -> list[int]:
    """Per-axis values (a shape or strides) of an operand as the products read it: permuted by
    perm, then the last two swapped when trans is set."""
    out = list(permuted(values, perm))
    if trans:
        out[-2], out[-1] = out[-1], out[-2]
    return out


def operand(ctx: InferContext, index: int, name: str) -> list[int]:
    """Input `index`'s shape as the products read it."""
    shape, perm = ctx.shape(index), list(ctx.attrs[f"perm_{name}"])
    if len(shape) < 2:
        raise ctx.fail(f"{name.upper()} needs rank >= 2, got {list(shape)}")
    if perm and sorted(perm) != list(range(len(shape))):
        raise ctx.fail(f"perm_{name} {perm} is not a permutation of the {len(shape)} axes of {name.upper()}")
    return read_as(shape, perm, ctx.attrs[f"trans_{name}"])


def attention_shapes(ctx: InferContext) -> tuple[list[int], list[int], list[int]]:
    """Q' (..., S_q, D), K' (..., D, S_k), V' (..., S_k, D_v), checked against each other."""
    q, k, v = operand(ctx, Q, "q"), operand(ctx, K, "k"), operand(ctx, V, "v")
    if not (q[:-2] == k[:-2] == v[:-2]):
        raise ctx.fail(f"batch axes differ: Q' {q}, K' {k}, V' {v}")
    if q[-1] != k[-2] or k[-1] != v[-2]:
        raise ctx.fail(f"Q' {q} @ K' {k} @ V' {v}: inner dimensions differ")
    return q, k, v


@register_op
class Attention(OpDef):
    op_type = "Attention"
    family = "matmul"
    attrs = {name: Attr("ints", []) for name in ("perm_q", "perm_k", "perm_v", "perm_y")} | {
        name: Attr("int", 0) for name in ("trans_q", "trans_k", "trans_v")} | {
        "alpha": Attr("float", 1.0), "beta": Attr("float", 1.0)}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        dtypes = {ctx.dtype(i) for i in range(3)} | ({ctx.dtype(MASK)} if ctx.has(MASK) else set())
        if len(dtypes) != 1 or not dtypes <= {"float16", "float32", "float64"}:
            raise ctx.fail(f"Q, K, V and the mask must share one float type, got {sorted(dtypes)}")
        q, k, v = attention_shapes(ctx)
        scores = (*q[:-1], k[-1])
        if ctx.has(MASK) and broadcast_shapes(ctx, scores, ctx.shape(MASK)) != scores:
            raise ctx.fail(f"mask of shape {list(ctx.shape(MASK))} does not broadcast to the scores {list(scores)}")
        product = (*q[:-1], v[-1])
        perm_y = list(ctx.attrs["perm_y"])
        if perm_y and sorted(perm_y) != list(range(len(product))):
            raise ctx.fail(f"perm_y {perm_y} is not a permutation of the product's {len(product)} axes")
        return [TensorSpec(permuted(product, perm_y), dtypes.pop())]

    def flops(self, ctx, outputs) -> int:
        q, k, v = attention_shapes(ctx)
        scores = outputs[0].size // v[-1] * k[-1]
        return 2 * scores * q[-1] + 5 * scores + 2 * outputs[0].size * k[-1]
