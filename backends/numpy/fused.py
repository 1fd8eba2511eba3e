"""FusedElementwise on numpy: the program's steps run one after another with the Unary / Binary
kernels' own functions, so a fused chain computes exactly what the unfused nodes compute."""
from __future__ import annotations

import numpy as np

from ...engine.ops.fused import decode_program
from .elementwise import apply_binary, apply_unary
from .kernel import numpy_kernel


def _prepare(ex) -> None:
    ex.state["program"] = decode_program(ex.attrs, len(ex.step.inputs))


@numpy_kernel("FusedElementwise", prepare=_prepare)
def fused_elementwise(ex, *inputs):
    values = list(inputs)
    with np.errstate(all="ignore"):
        for step in ex.state["program"]:
            operands = [values[i] for i in step.operands]
            if step.family == "Unary":
                values.append(apply_unary(step.kind, operands[0], step.alpha, step.beta))
            else:
                values.append(apply_binary(step.kind, *operands))
    # Steps broadcast among their own operands only; inputs the last step does not reach directly
    # still set the output's shape.
    return np.broadcast_to(values[-1], ex.step.output_specs[0].shape)
