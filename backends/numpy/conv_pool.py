"""ConvMaxPool on numpy: the conv and the max pooling run as the Conv and Pool steps they were fused
from, through their kernels (backends/numpy/conv.py, pool.py: plans built at resize). The conv
result goes to the op's second output when it has one, else to memory of this step
(composite.Intermediate).
"""
from __future__ import annotations

from ...engine.ops.conv_pool import CONV_ATTRS, conv_spec, keeps_conv
from .composite import Intermediate, sub_step
from .conv import infer_context
from .kernel import KERNELS, NumpyExecution, numpy_kernel


class _Plan:
    """The Conv and Pool executions, prepared, and where the conv result lives."""

    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        self.middle = conv_spec(infer_context(ex))
        names = (list(step.inputs) + ["", ""])[:3]
        specs = (list(step.input_specs) + [None, None])[:3]
        values = (list(step.input_values or []) + [None] * 3)[:3]
        conv = sub_step(step, "Conv", "conv", {key: attrs[key] for key in CONV_ATTRS}, names, specs, values,
                      self.middle)
        pool_attrs = {"kind": "max", "kernel_shape": attrs["pool_kernel_shape"], "strides": attrs["pool_strides"],
                      "pads": attrs["pool_pads"], "ceil_mode": attrs["pool_ceil_mode"]}
        pool = sub_step(step, "Pool", "pool", pool_attrs, [conv.outputs[0]], [self.middle], [None],
                      step.output_specs[0])
        self.stages = [NumpyExecution(ex.backend, conv, KERNELS["Conv"]),
                       NumpyExecution(ex.backend, pool, KERNELS["Pool"])]
        for stage in self.stages:
            stage.prepare()
        self.keeps = keeps_conv(step.node)
        self.middle_memory = None if self.keeps else Intermediate(ex.backend, self.middle, self.stages[:1])


def _prepare(ex) -> None:
    ex.state["conv_pool"] = _Plan(ex)


@numpy_kernel("ConvMaxPool", writes_outputs=True, prepare=_prepare)
def conv_max_pool(ex, inputs, outputs):
    if "conv_pool" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["conv_pool"]
    x, w, b = (list(inputs) + [None] * 3)[:3]
    middle = outputs[1] if plan.keeps else plan.middle_memory.array(ex.backend)
    conv, pool = plan.stages
    conv.run([x, w, b], [middle])
    pool.run([middle], [outputs[0]])
