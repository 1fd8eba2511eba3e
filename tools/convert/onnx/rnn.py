"""ONNX LSTM / GRU / RNN (opsets 1..22) -> wgnn MatMul (input projections of every time step at
once) + LSTM / GRU / RNN (the recurrence, engine/ops/rnn.py).

W [dirs, G*H, I] is read as [dirs, 1, G*H, I] so that MatMul(X, W, trans_b) broadcasts X's leading
axis against the directions: [dirs, T, N, G*H] for layout 0 ([dirs, N, T, G*H] for layout 1).
The bias B stays with the recurrence (GRU linear_before_reset needs its R part inside the reset).
"""
from __future__ import annotations

import numpy as np

from ....engine.ops.rnn import ACTIVATIONS, CELLS, DIRECTIONS, num_directions
from .table import onnx_op

CANONICAL = {name.lower(): name for name in ACTIVATIONS}


def _activations(ctx, node, per_dir: tuple[str, ...], dirs: int) -> dict:
    """The IR's positional activations: one name, alpha and beta per function and direction.
    ONNX alphas/betas are consumed in order by the functions that take one, defaults after."""
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in node.attrs.get("activations", [])]
    if not names:
        names = list(per_dir) * dirs
    if len(names) != len(per_dir) * dirs:
        raise ctx.fail(f"{len(names)} activations given; {node.op_type} {'bidirectional ' * (dirs == 2)}"
                       f"needs {len(per_dir) * dirs}")
    canonical = []
    for name in names:
        if name.lower() not in CANONICAL:
            raise ctx.fail(f"activation {name!r} is not supported; expected one of {list(ACTIVATIONS)}")
        canonical.append(CANONICAL[name.lower()])
    alphas = list(node.attrs.get("activation_alpha", []))
    betas = list(node.attrs.get("activation_beta", []))
    alpha_out, beta_out = [], []
    for name in canonical:
        default_alpha, default_beta, takes_alpha, takes_beta = ACTIVATIONS[name]
        alpha_out.append(float(alphas.pop(0)) if takes_alpha and alphas else default_alpha)
        beta_out.append(float(betas.pop(0)) if takes_beta and betas else default_beta)
    return {"activations": canonical, "activation_alpha": alpha_out, "activation_beta": beta_out}


@onnx_op("LSTM", "GRU", "RNN")
def recurrent(ctx, node):
    """ONNX-1 `output_sequence` only said whether Y was wanted: its output name says that too."""
    op_type = node.op_type
    _, per_dir = CELLS[op_type]
    direction = node.attrs.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in DIRECTIONS:
        raise ctx.fail(f"direction {direction!r} is not one of {list(DIRECTIONS)}")
    dirs = num_directions(direction)
    layout = int(node.attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ctx.fail(f"layout must be 0 or 1, got {layout}")
    if not node.input(1) or not node.input(2):
        raise ctx.fail("inputs W and R are required")
    weights = ctx.constant(node.input(1))
    if weights is not None:
        w4 = ctx.add_constant(weights[:, None], "W")
    else:
        w4 = ctx.fresh("W")
        ctx.emit("Unsqueeze", [node.input(1), ctx.add_constant(np.array([1], np.int64), "axes")], [w4])
    projections = ctx.fresh("projections")
    ctx.emit("MatMul", [node.input(0), w4], [projections], {"trans_b": 1})

    attrs = {"direction": direction, "layout": layout, **_activations(ctx, node, per_dir, dirs)}
    if "hidden_size" in node.attrs:
        attrs["hidden_size"] = int(node.attrs["hidden_size"])
    if "clip" in node.attrs:
        attrs["clip"] = float(node.attrs["clip"])
    if op_type == "GRU":
        attrs["linear_before_reset"] = int(node.attrs.get("linear_before_reset", 0))
    if op_type == "LSTM":
        attrs["input_forget"] = int(node.attrs.get("input_forget", 0))
    count = 8 if op_type == "LSTM" else 6
    inputs = [projections] + [node.input(i) for i in range(2, count)]
    # Every output gets a tensor, used or not: the GPU's per-step kernel keeps its state in them.
    outputs = [node.outputs[i] if i < len(node.outputs) and node.outputs[i] else ctx.fresh(name)
               for i, name in enumerate(("Y", "Y_h", "Y_c")[:3 if op_type == "LSTM" else 2])]
    while inputs and not inputs[-1]:
        inputs.pop()
    ctx.emit(op_type, inputs, outputs, attrs)
