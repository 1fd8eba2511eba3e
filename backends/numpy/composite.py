"""Fused ops that the numpy backend runs as the steps they were fused from (ConvDwPw, ConvPw,
ConvMaxPool, GlobalPoolMatMul): building those sub-steps, and the memory of the tensor one passes
to the next.

The intermediate tensor gets its own array when small, else a range of the backend's shared
scratch past what the sub-steps' own conv plans use there: steps run one at a time, and the plans
bind the scratch from its start.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.graph import Node
from ...engine.ops.base import TensorSpec
from ..base import Step, part_step
from .conv import RESIDENT_BYTES
from .kernel import CACHE_LINE, aligned_empty

ALIGN = CACHE_LINE  # bytes: the intermediate's offset in the scratch


def sub_step(step: Step, op_type: str, suffix: str, attrs: dict, names: list[str], specs: list, values: list,
             output: TensorSpec) -> Step:
    """A step of op_type named after the fused step (`<name>/<suffix>`), on the given inputs."""
    node = Node(op_type, names, [f"{step.node.name}/{suffix}"], attrs, name=f"{step.node.name}/{suffix}")
    return part_step(step, node, specs, [output], values)


class Intermediate:
    """Where the tensor `spec` between prepared sub-steps (`stages`) lives; array() on each run."""

    def __init__(self, backend, spec: TensorSpec, stages, after: Intermediate | None = None):
        """after: an intermediate alive at the same time, whose scratch range this one must follow."""
        self.spec = spec
        nbytes = math.prod(spec.shape) * np.dtype(spec.dtype).itemsize
        self.shared = nbytes > RESIDENT_BYTES and hasattr(backend, "reserve_scratch")
        self.buffer = None
        self.base = None  # the scratch array self.buffer looks into
        if self.shared:
            plans = [stage.state.get("conv") for stage in stages]
            used = max([p.nbytes for p in plans if p is not None and p.shared]
                       + [after.total if after is not None and after.shared else 0])
            self.offset = -(-used // ALIGN) * ALIGN
            self.total = self.offset + nbytes
            backend.reserve_scratch(self.total)
        else:
            self.buffer = aligned_empty(spec.shape, spec.dtype)

    def array(self, backend) -> np.ndarray:
        """The same view on every run while the scratch stays (plans built on it keep their views)."""
        if not self.shared:
            return self.buffer
        memory = backend.scratch(self.total)
        if memory.base is not self.base:
            self.base = memory.base
            self.buffer = memory[self.offset:].view(self.spec.dtype).reshape(self.spec.shape)
        return self.buffer


def conv_stage(step: Step, suffix: str, attrs: dict, inputs: list[int], output: TensorSpec,
               source: tuple[str, TensorSpec] | None = None) -> Step:
    """The Conv step of one stage, reading the fused step's inputs of the given indices (the first
    one replaced by `source`, (name, spec), for the stage reading the first stage's result)."""
    given = list(step.inputs) + [""] * 6
    specs = list(step.input_specs) + [None] * 6
    values = list(step.input_values or []) + [None] * 6
    names, specs, values = [given[i] for i in inputs], [specs[i] for i in inputs], [values[i] for i in inputs]
    if source is not None:
        names[0], specs[0], values[0] = source[0], source[1], None
    return sub_step(step, "Conv", suffix, attrs, names, specs, values, output)


class ConvThenPointwise:
    """A conv and the 1x1 conv reading it (ConvDwPw, ConvPw: inputs x, w, b, w_pw, b_pw, residual)
    as two prepared Conv executions, the first one's result in memory of the step."""

    def __init__(self, ex, first: str, first_attrs: dict, channels: int, out: TensorSpec | None = None):
        """out: the pointwise stage's output (default the step's first output)."""
        from .kernel import KERNELS, NumpyExecution

        step, attrs = ex.step, ex.attrs
        out = out or step.output_specs[0]
        middle = TensorSpec((out.shape[0], channels, *out.shape[2:]), out.dtype)
        window = {k: attrs[k] for k in ("strides", "dilations", "pads", "auto_pad")}
        pw = {k: attrs[k] for k in ("activation", "activation_alpha", "activation_beta")}
        kernel = KERNELS["Conv"]
        one = conv_stage(step, first, {**window, **first_attrs}, [0, 1, 2], middle)
        two = conv_stage(step, "pw", pw, [0, 3, 4, 5], out, source=(one.outputs[0], middle))
        self.stages = [NumpyExecution(ex.backend, one, kernel), NumpyExecution(ex.backend, two, kernel)]
        for stage in self.stages:
            stage.prepare()
        self.middle_memory = Intermediate(ex.backend, middle, self.stages)

    def run(self, backend, inputs, outputs) -> None:
        x, w, b, w_pw, b_pw, residual = (list(inputs) + [None] * 6)[:6]
        middle = self.middle_memory.array(backend)
        first, pointwise = self.stages
        first.run([x, w, b], [middle])
        pointwise.run([middle, w_pw, b_pw, residual], outputs)
