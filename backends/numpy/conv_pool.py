"""ConvMaxPool on numpy: the conv and the max pooling run as the Conv and Pool steps they were fused
from, through their kernels (backends/numpy/conv.py, pool.py: plans built at resize). The conv
result goes to the op's second output when it has one, else to memory of this step: its own when
small, else a range of the backend's shared scratch past what the Conv plan uses there (steps run
one at a time, and the plan binds the scratch from its start).
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.graph import Node
from ...engine.ops.base import OPS, TensorSpec
from ...engine.ops.conv_pool import CONV_ATTRS, conv_spec, keeps_conv
from ..base import Step
from .conv import RESIDENT_BYTES, infer_context
from .kernel import KERNELS, NumpyExecution, numpy_kernel

ALIGN = 64  # bytes: the conv result's offset in the scratch


def _stage(step: Step, op_type: str, suffix: str, attrs: dict, names: list[str], specs: list, values: list,
           output: TensorSpec) -> Step:
    op = OPS[op_type]
    node = Node(op_type, names, [f"{step.node.name}/{suffix}"], attrs, name=f"{step.node.name}/{suffix}")
    return Step(node, op, op.resolve_attrs(node), names, list(node.outputs), specs, [output], values)


class _Plan:
    """The Conv and Pool executions, prepared, and where the conv result lives."""

    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        self.middle = conv_spec(infer_context(ex))
        names = (list(step.inputs) + ["", ""])[:3]
        specs = (list(step.input_specs) + [None, None])[:3]
        values = (list(step.input_values or []) + [None] * 3)[:3]
        conv = _stage(step, "Conv", "conv", {key: attrs[key] for key in CONV_ATTRS}, names, specs, values,
                      self.middle)
        pool_attrs = {"kind": "max", "kernel_shape": attrs["pool_kernel_shape"], "strides": attrs["pool_strides"],
                      "pads": attrs["pool_pads"], "ceil_mode": attrs["pool_ceil_mode"]}
        pool = _stage(step, "Pool", "pool", pool_attrs, [conv.outputs[0]], [self.middle], [None],
                      step.output_specs[0])
        self.stages = [NumpyExecution(ex.backend, conv, KERNELS["Conv"]),
                       NumpyExecution(ex.backend, pool, KERNELS["Pool"])]
        for stage in self.stages:
            stage.prepare()
        self.keeps = keeps_conv(step.node)
        nbytes = math.prod(self.middle.shape) * np.dtype(self.middle.dtype).itemsize
        self.shared = not self.keeps and nbytes > RESIDENT_BYTES and hasattr(ex.backend, "reserve_scratch")
        self.buffer = None
        if self.shared:
            plan = self.stages[0].state.get("conv")
            used = plan.nbytes if plan is not None and plan.shared else 0
            self.offset = -(-used // ALIGN) * ALIGN
            self.total = self.offset + nbytes
            ex.backend.reserve_scratch(self.total)
            self.base = None  # the scratch array the view below looks into
        elif not self.keeps:
            self.buffer = np.empty(self.middle.shape, self.middle.dtype)

    def middle_buffer(self, backend) -> np.ndarray:
        if not self.shared:
            return self.buffer
        memory = backend.scratch(self.total)
        if memory.base is not self.base:  # the same view on every run: the Pool plan keeps its views
            self.base = memory.base
            self.buffer = memory[self.offset:].view(self.middle.dtype).reshape(self.middle.shape)
        return self.buffer


def _prepare(ex) -> None:
    ex.state["conv_pool"] = _Plan(ex)


@numpy_kernel("ConvMaxPool", writes_outputs=True, prepare=_prepare)
def conv_max_pool(ex, inputs, outputs):
    if "conv_pool" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["conv_pool"]
    x, w, b = (list(inputs) + [None] * 3)[:3]
    middle = outputs[1] if plan.keeps else plan.middle_buffer(ex.backend)
    conv, pool = plan.stages
    conv.run([x, w, b], [middle])
    pool.run([middle], [outputs[0]])
