"""Recurrent family: "LSTM", "GRU", "RNN" (ONNX semantics) over precomputed input projections.

The converter splits an ONNX recurrent node in two: a MatMul computing every time step's input
projection X·W^T at once (the parallel part), and the recurrence below (the sequential part).
Inputs of the IR ops:

    0 XW               [dirs, T, N, G*H] (layout 0) or [dirs, N, T, G*H] (layout 1): X·W^T per direction
    1 R                [dirs, G*H, H] recurrence weights (gate order as ONNX: LSTM i,o,f,c; GRU z,r,h)
    2 B                [dirs, 2*G*H] optional: Wb then Rb, as ONNX
    3 sequence_lens    [N] optional (int32/int64)
    4 initial_h        [dirs, N, H] (layout 0) or [N, dirs, H] (layout 1), optional
    5 initial_c, 6 P   LSTM only: initial cell state (as initial_h), peepholes [dirs, 3*H] (i, o, f)

Outputs Y [T, dirs, N, H] (layout 1: [N, T, dirs, H]), Y_h and (LSTM) Y_c [dirs, N, H] (layout 1:
[N, dirs, H]); any may be absent ("").

Activations are the IR's canonical form: `activations` lists one name per function and direction
(LSTM f, g, h; GRU f, g; RNN f; both directions when bidirectional; empty = the ONNX defaults),
and `activation_alpha` / `activation_beta` hold one value per listed function (empty = each
function's default). The converter resolves ONNX's "alphas are consumed in order by the functions
that take one" into this positional form.

Sequence lengths: steps past a sequence's length give zeros in Y; Y_h / Y_c hold the state after
its last valid step (zeros for a length of 0, as onnxruntime); the reverse direction starts at each
sequence's last valid step.
"""
from __future__ import annotations

import math

from .base import Attr, InferContext, OpDef, TensorSpec, register_op

# name -> (default alpha, default beta, takes alpha, takes beta); defaults as the ONNX operators of
# the same name (Affine and ScaledTanh were ONNX-1 experimental ops: alpha 1, beta 0 / 1).
ACTIVATIONS: dict[str, tuple[float, float, bool, bool]] = {
    "Sigmoid": (0.0, 0.0, False, False),
    "Tanh": (0.0, 0.0, False, False),
    "Relu": (0.0, 0.0, False, False),
    "HardSigmoid": (0.2, 0.5, True, True),
    "Affine": (1.0, 0.0, True, True),
    "LeakyRelu": (0.01, 0.0, True, False),
    "ThresholdedRelu": (1.0, 0.0, True, False),
    "ScaledTanh": (1.0, 1.0, True, True),
    "Elu": (1.0, 0.0, True, False),
    "Softsign": (0.0, 0.0, False, False),
    "Softplus": (0.0, 0.0, False, False),
}
ACTIVATION_IDS = {name: i for i, name in enumerate(ACTIVATIONS)}  # GPU kernels switch on these
DIRECTIONS = ("forward", "reverse", "bidirectional")

# op type -> (gates, default activations of one direction)
CELLS: dict[str, tuple[int, tuple[str, ...]]] = {
    "RNN": (1, ("Tanh",)),
    "GRU": (3, ("Sigmoid", "Tanh")),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh")),
}

COMMON_ATTRS = {
    "direction": Attr("string", "forward"),
    "layout": Attr("int", 0),
    "hidden_size": Attr("int", 0),  # 0: taken from R
    "activations": Attr("strings", []),
    "activation_alpha": Attr("floats", []),
    "activation_beta": Attr("floats", []),
    "clip": Attr("float", math.inf),  # bound on the inputs of the gate activations
}


def num_directions(direction: str) -> int:
    return 2 if direction == "bidirectional" else 1


def cell_activations(op_type: str, attrs: dict) -> list[list[tuple[str, float, float]]]:
    """Per direction, the (name, alpha, beta) of each activation function of the cell."""
    per_dir = CELLS[op_type][1]
    dirs = num_directions(attrs["direction"])
    names = list(attrs["activations"]) or list(per_dir) * dirs
    alphas, betas = attrs["activation_alpha"], attrs["activation_beta"]
    funcs = []
    for i, name in enumerate(names):
        alpha, beta = ACTIVATIONS[name][:2]
        funcs.append((name, alphas[i] if alphas else alpha, betas[i] if betas else beta))
    return [funcs[d * len(per_dir):(d + 1) * len(per_dir)] for d in range(dirs)]


class Recurrent(OpDef):
    family = "rnn"
    state_inputs: tuple[int, ...] = (4,)  # initial states shaped like Y_h

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        attrs = ctx.attrs
        gates, per_dir = CELLS[self.op_type]
        if attrs["direction"] not in DIRECTIONS:
            raise ctx.fail(f"direction {attrs['direction']!r} is not one of {list(DIRECTIONS)}")
        if attrs["layout"] not in (0, 1):
            raise ctx.fail(f"layout must be 0 or 1, got {attrs['layout']}")
        dirs = num_directions(attrs["direction"])
        self._check_activations(ctx, dirs * len(per_dir))
        if not attrs["clip"] > 0:
            raise ctx.fail(f"clip must be positive, got {attrs['clip']}")
        xw, r = ctx.shape(0), ctx.shape(1)
        dtype = ctx.dtype(0)
        if dtype not in ("float16", "float32", "float64"):
            raise ctx.fail(f"recurrent ops need float inputs, got {dtype}")
        if len(xw) != 4 or len(r) != 3:
            raise ctx.fail(f"expected input projections of rank 4 and R of rank 3, got ranks {len(xw)}, {len(r)}")
        hidden = r[2]
        if attrs["hidden_size"] and attrs["hidden_size"] != hidden:
            raise ctx.fail(f"hidden_size {attrs['hidden_size']} disagrees with R's last axis {hidden}")
        if r[:2] != (dirs, gates * hidden) or xw[0] != dirs or xw[3] != gates * hidden:
            raise ctx.fail(f"{attrs['direction']} {self.op_type} with hidden size {hidden} needs R of shape "
                           f"({dirs}, {gates * hidden}, {hidden}) and projections ({dirs}, ., ., {gates * hidden})")
        steps, batch = (xw[1], xw[2]) if attrs["layout"] == 0 else (xw[2], xw[1])
        state = (dirs, batch, hidden) if attrs["layout"] == 0 else (batch, dirs, hidden)
        expected = {1: (dirs, gates * hidden, hidden), 2: (dirs, 2 * gates * hidden), 3: (batch,),
                    6: (dirs, 3 * hidden)}
        expected.update(dict.fromkeys(self.state_inputs, state))
        for i, shape in expected.items():
            if ctx.has(i) and tuple(ctx.shape(i)) != shape:
                raise ctx.fail(f"input {i} has shape {tuple(ctx.shape(i))}; expected {shape}")
            if ctx.has(i) and i != 3 and ctx.dtype(i) != dtype:
                raise ctx.fail(f"input {i} has type {ctx.dtype(i)}; expected {dtype}")
        if ctx.has(3) and ctx.dtype(3) not in ("int32", "int64"):
            raise ctx.fail(f"sequence_lens must be int32, got {ctx.dtype(3)}")
        y = (steps, dirs, batch, hidden) if attrs["layout"] == 0 else (batch, steps, dirs, hidden)
        specs = [TensorSpec(y, dtype), TensorSpec(state, dtype), TensorSpec(state, dtype)]
        return specs[:max(1, min(len(ctx.node.outputs), len(self.state_inputs) + 1))]

    def _check_activations(self, ctx: InferContext, count: int) -> None:
        names = ctx.attrs["activations"]
        unknown = [n for n in names if n not in ACTIVATIONS]
        if unknown:
            raise ctx.fail(f"unknown activations {unknown}; expected names from {list(ACTIVATIONS)}")
        if names and len(names) != count:
            raise ctx.fail(f"{len(names)} activations given, the op needs {count}")
        for key in ("activation_alpha", "activation_beta"):
            values = ctx.attrs[key]
            if values and len(values) != (len(names) or count):
                raise ctx.fail(f"{key} has {len(values)} values, one per activation ({len(names) or count}) needed")

    def flops(self, ctx, outputs) -> int:
        dirs, _, _, gh = ctx.shape(0)
        steps_batch = ctx.shape(0)[1] * ctx.shape(0)[2]
        hidden = ctx.shape(1)[2]
        return dirs * steps_batch * (2 * gh * hidden + 8 * gh)


@register_op
class RNN(Recurrent):
    op_type = "RNN"
    attrs = dict(COMMON_ATTRS)


@register_op
class GRU(Recurrent):
    op_type = "GRU"
    attrs = {**COMMON_ATTRS, "linear_before_reset": Attr("int", 0)}


@register_op
class LSTM(Recurrent):
    op_type = "LSTM"
    attrs = {**COMMON_ATTRS, "input_forget": Attr("int", 0)}
    state_inputs = (4, 5)
