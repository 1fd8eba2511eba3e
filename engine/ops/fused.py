"""FusedElementwise: a chain of Unary / Binary steps run as one op (made by the converter pass
tools/convert/fusion_chains.py, so a chain costs one GPU dispatch instead of one per op).

The program is a list of steps over the op's inputs, in four parallel attributes:
- steps: "Unary.<kind>" or "Binary.<kind>" (kinds of engine/ops/unary.py and binary.py),
- operands: two per step; index i < len(inputs) is input i, len(inputs) + s the result of step s
  (an earlier step); a Unary step's second operand is -1,
- alphas, betas: the Unary parameters of each step (0 for Binary steps).
The last step's result is the output. Every input broadcasts (numpy rules) to the output shape,
the broadcast of all input shapes: element-wise steps commute with broadcasting, so each step may
be computed on the output's elements whatever the shapes of its own operands.
The inputs listed in cast_inputs (integer or bool tensors: a Cast to float the converter folded
in, as attention masks are made) are converted to the program's float type first, as ONNX Cast
converts; the other inputs share that type, and at least one is not cast.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import FLOAT_DTYPES
from .base import Attr, InferContext, OpDef, TensorSpec, broadcast_shapes, register_op
from .binary import ARITHMETIC_KINDS
from .unary import UNARY_KINDS

# Element types an input converted to float (cast_inputs) may have.
CASTABLE_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
# Families and kinds a step may use: those that keep a float operand's element type.
STEP_KINDS: dict[str, tuple[str, ...]] = {
    "Unary": tuple(k for k in UNARY_KINDS if k not in ("not", "bitwise_not")),
    "Binary": ARITHMETIC_KINDS,
}


@dataclass(frozen=True)
class Step:
    family: str  # "Unary" or "Binary"
    kind: str
    operands: tuple[int, ...]  # one (Unary) or two (Binary) operand indices
    alpha: float = 0.0
    beta: float = 0.0


def encode_program(steps: list[Step]) -> dict:
    """FusedElementwise attributes holding steps."""
    return {"steps": [f"{s.family}.{s.kind}" for s in steps],
            "operands": [i for s in steps for i in (s.operands + (-1,))[:2]],
            "alphas": [float(s.alpha) for s in steps], "betas": [float(s.beta) for s in steps]}


def decode_program(attrs: dict, inputs: int) -> list[Step]:
    """The steps of resolved FusedElementwise attributes; ValueError says what is malformed."""
    names, operands, alphas, betas = attrs["steps"], attrs["operands"], attrs["alphas"], attrs["betas"]
    if not names:
        raise ValueError("the program has no steps")
    if not (len(operands) == 2 * len(names) and len(alphas) == len(names) == len(betas)):
        raise ValueError(f"{len(names)} steps need {2 * len(names)} operands and {len(names)} alphas and betas, "
                         f"got {len(operands)}, {len(alphas)}, {len(betas)}")
    steps = []
    for s, name in enumerate(names):
        family, _, kind = name.partition(".")
        if kind not in STEP_KINDS.get(family, ()):
            raise ValueError(f"step {s}: {name!r} is not a Unary or Binary kind that keeps a float type")
        arity = 1 if family == "Unary" else 2
        used = tuple(operands[2 * s:2 * s + arity])
        if any(not 0 <= i < inputs + s for i in used) or (arity == 1 and operands[2 * s + 1] != -1):
            raise ValueError(f"step {s} ({name}) reads operands {operands[2 * s:2 * s + 2]}; "
                             f"valid are 0..{inputs + s - 1} (then -1 for a Unary step)")
        steps.append(Step(family, kind, used, alphas[s], betas[s]))
    return steps


@register_op
class FusedElementwise(OpDef):
    op_type = "FusedElementwise"
    family = "fused"
    attrs = {"steps": Attr("strings"), "operands": Attr("ints"), "alphas": Attr("floats"), "betas": Attr("floats"),
             "cast_inputs": Attr("ints", [])}

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        count = len(ctx.node.inputs)
        if count == 0:
            raise ctx.fail("needs at least one input")
        try:
            decode_program(ctx.attrs, count)
        except ValueError as exc:
            raise ctx.fail(str(exc)) from None
        cast = set(ctx.attrs["cast_inputs"])
        if any(not 0 <= i < count for i in cast):
            raise ctx.fail(f"cast_inputs {sorted(cast)} name inputs past the {count} it has")
        bad = [f"{i} ({ctx.dtype(i)})" for i in sorted(cast) if ctx.dtype(i) not in CASTABLE_DTYPES]
        if bad:
            raise ctx.fail(f"cast inputs must be integer or bool tensors, got input {', '.join(bad)}")
        dtypes = {ctx.dtype(i) for i in range(count) if i not in cast}
        if len(dtypes) != 1 or not dtypes <= set(FLOAT_DTYPES):
            raise ctx.fail(f"inputs that are not cast must share one float type, got {sorted(dtypes)}")
        return [TensorSpec(broadcast_shapes(ctx, *(ctx.shape(i) for i in range(count))), dtypes.pop())]

    def flops(self, ctx, outputs) -> int:
        per_element = sum(UNARY_KINDS.get(name.partition(".")[2], 1) if name.startswith("Unary.") else 1
                          for name in ctx.attrs["steps"])
        return outputs[0].size * per_element
