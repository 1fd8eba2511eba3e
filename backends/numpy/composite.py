"""Fused ops that the numpy backend runs as the steps they were fused from (ConvDwPw, ConvMaxPool):
building those sub-steps, and the memory of the tensor one passes to the next.

The intermediate tensor gets its own array when small, else a range of the backend's shared
scratch past what the sub-steps' own conv plans use there: steps run one at a time, and the plans
bind the scratch from its start.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.graph import Node
from ...engine.ops.base import OPS, TensorSpec
from ..base import Step
from .conv import RESIDENT_BYTES

ALIGN = 64  # bytes: the intermediate's offset in the scratch


def sub_step(step: Step, op_type: str, suffix: str, attrs: dict, names: list[str], specs: list, values: list,
             output: TensorSpec) -> Step:
    """A step of op_type named after the fused step (`<name>/<suffix>`), on the given inputs."""
    op = OPS[op_type]
    node = Node(op_type, names, [f"{step.node.name}/{suffix}"], attrs, name=f"{step.node.name}/{suffix}")
    return Step(node, op, op.resolve_attrs(node), names, list(node.outputs), specs, [output], values)


class Intermediate:
    """Where the tensor `spec` between prepared sub-steps (`stages`) lives; array() on each run."""

    def __init__(self, backend, spec: TensorSpec, stages):
        self.spec = spec
        nbytes = math.prod(spec.shape) * np.dtype(spec.dtype).itemsize
        self.shared = nbytes > RESIDENT_BYTES and hasattr(backend, "reserve_scratch")
        self.buffer = None
        self.base = None  # the scratch array self.buffer looks into
        if self.shared:
            plans = [stage.state.get("conv") for stage in stages]
            used = max([p.nbytes for p in plans if p is not None and p.shared] + [0])
            self.offset = -(-used // ALIGN) * ALIGN
            self.total = self.offset + nbytes
            backend.reserve_scratch(self.total)
        else:
            self.buffer = np.empty(spec.shape, spec.dtype)

    def array(self, backend) -> np.ndarray:
        """The same view on every run while the scratch stays (plans built on it keep their views)."""
        if not self.shared:
            return self.buffer
        memory = backend.scratch(self.total)
        if memory.base is not self.base:
            self.base = memory.base
            self.buffer = memory[self.offset:].view(self.spec.dtype).reshape(self.spec.shape)
        return self.buffer
