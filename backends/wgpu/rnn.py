"""Recurrent family on the GPU: LSTM, GRU, RNN recurrences (float32).

The input projections X·W^T of every time step come from a MatMul before the op (the converter's
split, engine/ops/rnn.py); what is left is sequential over time. Two kernels:

- "steps" (rnn/step.wgsl): one dispatch per time step (two for GRU without linear_before_reset),
  one invocation per (direction, batch row, hidden unit). The previous h is read from Y, so the
  converter always materialises Y (and Y_c, Y_h) for it.
- "fused" (rnn/recurrence.wgsl): one dispatch; a workgroup per (direction, batch row) loops over
  time with a workgroup barrier per step and the state in workgroup memory.

Measured on lavapipe and llvmpipe-GL (recurrence alone, median of warm runs; the machine's 2 cores
shared): LSTM 64 steps x batch 1 x hidden 64: steps 5.7 / 4.4 ms, fused 8.5 / 8.0 ms; 16 x 8 x 32:
2.0 / 2.6 ms against 8.4 / 7.3 ms; 6 x 3 x 8: 0.7 / 0.7 against 1.1 / 1.0 ms. llvmpipe compiles
shaders with barriers into coroutines whose code runs about half as fast (the barrier count itself
costs little), which outweighs a dispatch (~76 us) per step. So software adapters run "steps" up to
MAX_STEP_DISPATCHES steps; real GPUs, where a dispatch costs far more than a barrier, and longer
sequences run "fused". R known at resize is repacked transposed, so that consecutive hidden units
(neighbouring invocations) read consecutive addresses.
"""
from __future__ import annotations

import math

from ...engine.ops.rnn import ACTIVATION_IDS, CELLS, DIRECTIONS, cell_activations
from ..base import Step
from .backend import WORKGROUP, GpuExecution, gpu_kernel

MAX_HIDDEN = 512  # MAXH in recurrence.wgsl (workgroup memory: 4 arrays of MAX_HIDDEN floats)
MAX_STEP_DISPATCHES = 512  # bounds the dispatches (and uniforms) of one op; longer sequences run "fused"
CELL_IDS = {"RNN": 0, "GRU": 1, "LSTM": 2}
KERNELS = {"steps": "rnn/step.wgsl", "fused": "rnn/recurrence.wgsl"}


def _two_phase(step: Step) -> bool:
    """GRU without linear_before_reset needs r * h of every unit before any candidate."""
    return step.op.op_type == "GRU" and not step.attrs["linear_before_reset"]


def _sizes(step: Step) -> tuple[int, int, int, int]:
    """Directions, time steps, batch and hidden size."""
    xw = step.input_specs[0].shape
    steps, batch = (xw[1], xw[2]) if step.attrs["layout"] == 0 else (xw[2], xw[1])
    return xw[0], steps, batch, step.input_specs[1].shape[2]


class RecurrentGpu(GpuExecution):
    # "steps" or "fused" to override the choice by adapter type (tests run both on software adapters).
    force_variant: str | None = None

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.input_specs[0].dtype != "float32":
            return f"{step.op.op_type} on {step.input_specs[0].dtype} has no GPU kernel"
        _, steps, _, hidden = _sizes(step)
        if steps == 0:
            return "an empty sequence (zero states) runs on the CPU"
        if hidden > MAX_HIDDEN and not cls._steps_possible(step):
            return f"hidden size {hidden} exceeds the kernel's workgroup-memory state ({MAX_HIDDEN})"
        return None

    @classmethod
    def _steps_possible(cls, step: Step) -> bool:
        """The "steps" kernel keeps its state in the outputs: it needs Y, Y_c (LSTM), Y_h (GRU)."""
        outputs = list(step.outputs) + [""] * 3
        needed = [0] + ([2] if step.op.op_type == "LSTM" else []) + ([1] if _two_phase(step) else [])
        return all(outputs[i] for i in needed) and _sizes(step)[1] <= MAX_STEP_DISPATCHES \
            and cls.force_variant != "fused"

    @classmethod
    def variant(cls, step: Step, adapter_type: str) -> str:
        if not cls._steps_possible(step):
            return "fused"
        if cls.force_variant == "steps" or _sizes(step)[3] > MAX_HIDDEN:
            return "steps"
        return "steps" if adapter_type == "CPU" else "fused"

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        # The loop budget only binds on llvmpipe, a software adapter: count the variant it runs.
        _, steps, _, hidden = _sizes(step)
        if cls.variant(step, "CPU") == "steps":
            return hidden + 8
        units = math.ceil(hidden / WORKGROUP)  # hidden units per invocation
        per_unit = hidden // 4 + 3 * CELLS[step.op.op_type][0] + 2  # unrolled k loop and its tail
        return steps * (units * per_unit * (1 + _two_phase(step)) + units + 2) + 4 * units

    def prepare(self) -> None:
        step = self.step
        dirs, steps, batch, hidden = _sizes(step)
        if batch == 0 or hidden == 0:
            return  # empty outputs
        params, tensors = self._params(dirs, steps, batch, hidden)
        variant = self.variant(step, self.backend.context.info.adapter_type)
        # The kernels report sequence_lens outside [0, T] (no shape function checks known ones).
        status = "check" if len(step.inputs) > 3 and step.inputs[3] else "bind"
        if variant == "fused":
            # dispatch() counts workgroups of WORKGROUP invocations: one per (direction, batch row).
            self.dispatch(KERNELS[variant], tensors, params, dirs * batch * WORKGROUP, status=status)
            return
        units = dirs * batch * hidden
        for s in range(steps):
            self.dispatch(KERNELS[variant], tensors, params + [s, 0], units, status=status)
            if _two_phase(step):
                self.dispatch(KERNELS[variant], tensors, params + [s, 1], units, status=status)
        if _two_phase(step):
            self.dispatch(KERNELS[variant], tensors, params + [0, 2], units, status=status)

    def status_error(self, check: int, value: int) -> str:
        steps = _sizes(self.step)[1]
        return (f"{self.step.label}: sequence_lens[{check}] = {value} must lie in [0, {steps}] "
                f'in "{self.step.inputs[3]}"')

    def _params(self, dirs: int, steps: int, batch: int, hidden: int) -> tuple[list, list[str]]:
        step = self.step
        attrs = step.attrs
        op_type = step.op.op_type
        gh = CELLS[op_type][0] * hidden
        inputs = list(step.inputs) + [""] * (7 - len(step.inputs))
        outputs = list(step.outputs) + [""] * (3 - len(step.outputs))
        r_name, r_strides = inputs[1], (gh * hidden, hidden, 1)
        if step.input_values and step.input_values[1] is not None:
            # [dirs, H (k), G*H]: neighbouring invocations (units) read neighbouring addresses.
            r_name = self.packed_constant("R_t", step.input_values[1], lambda r: r.transpose(0, 2, 1).copy())
            r_strides = (gh * hidden, 1, gh)
        if attrs["layout"] == 0:  # xw [dirs, T, N, GH], Y [T, dirs, N, H], states [dirs, N, H]
            xw_strides = (steps * batch * gh, gh, batch * gh)
            y_strides = (batch * hidden, hidden, dirs * batch * hidden)
            state_strides = (batch * hidden, hidden)
        else:  # xw [dirs, N, T, GH], Y [N, T, dirs, H], states [N, dirs, H]
            xw_strides = (batch * steps * gh, steps * gh, gh)
            y_strides = (hidden, steps * dirs * hidden, dirs * hidden)
            state_strides = (hidden, dirs * hidden)
        clip = attrs["clip"]
        params = [steps, batch, hidden, CELL_IDS[op_type], DIRECTIONS.index(attrs["direction"]),
                  *(int(bool(inputs[i])) for i in (2, 3, 4, 5, 6)), *(int(bool(o)) for o in outputs),
                  int(attrs.get("linear_before_reset", 0)), int(attrs.get("input_forget", 0)),
                  int(math.isfinite(clip)), float(clip) if math.isfinite(clip) else 0.0,
                  *xw_strides, *y_strides, *state_strides, *r_strides, CELLS[op_type][0], 0, 0, 0]
        ids, alphas, betas = [0] * 6, [0.0] * 6, [0.0] * 6
        for d, funcs in enumerate(cell_activations(op_type, attrs)):
            for k, (name, alpha, beta) in enumerate(funcs):
                ids[3 * d + k], alphas[3 * d + k], betas[3 * d + k] = ACTIVATION_IDS[name], alpha, beta
        params += ids + alphas + betas
        # Absent inputs bind a stand-in (the projections), absent outputs another output; the
        # flags above keep the kernels off them, so one pipeline serves every combination.
        stand_out = next(o for o in outputs if o)
        tensors = [inputs[0], r_name] + [name or inputs[0] for name in inputs[2:7]]
        return params, tensors + [name or stand_out for name in outputs]


@gpu_kernel("RNN")
class RnnGpu(RecurrentGpu):
    pass


@gpu_kernel("GRU")
class GruGpu(RecurrentGpu):
    pass


@gpu_kernel("LSTM")
class LstmGpu(RecurrentGpu):
    pass
