"""ConvDwPw on numpy: the depthwise and the pointwise stage run as the two Conv steps they were
fused from, through the Conv kernel (backends/numpy/conv.py: im2col / matmul plans built at
resize), with the depthwise result in memory of this step (composite.Intermediate).
"""
from __future__ import annotations

from ...engine.ops.base import TensorSpec
from ..base import Step
from .composite import Intermediate, sub_step
from .kernel import KERNELS, NumpyExecution, numpy_kernel


def _conv_step(step: Step, suffix: str, attrs: dict, inputs: list[int], output: TensorSpec,
               source: tuple[str, TensorSpec] | None = None) -> Step:
    """The Conv step of one stage, reading the fused step's inputs of the given indices (the first
    one replaced by `source`, (name, spec), for the stage reading the depthwise result)."""
    given = list(step.inputs) + [""] * 6
    specs = list(step.input_specs) + [None] * 6
    values = list(step.input_values or []) + [None] * 6
    names, specs, values = [given[i] for i in inputs], [specs[i] for i in inputs], [values[i] for i in inputs]
    if source is not None:
        names[0], specs[0], values[0] = source[0], source[1], None
    return sub_step(step, "Conv", suffix, attrs, names, specs, values, output)


class _Plan:
    """The two Conv executions, prepared, and where the depthwise result lives."""

    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        x, out = step.input_specs[0], step.output_specs[0]
        channels = x.shape[1]
        self.middle = TensorSpec((out.shape[0], channels, *out.shape[2:]), out.dtype)
        window = {k: attrs[k] for k in ("strides", "dilations", "pads", "auto_pad")}
        dw = {**window, "group": channels, "activation": attrs["dw_activation"],
              "activation_alpha": attrs["dw_activation_alpha"], "activation_beta": attrs["dw_activation_beta"]}
        pw = {k: attrs[k] for k in ("activation", "activation_alpha", "activation_beta")}
        kernel = KERNELS["Conv"]
        first = _conv_step(step, "dw", dw, [0, 1, 2], self.middle)
        second = _conv_step(step, "pw", pw, [0, 3, 4, 5], out, source=(first.outputs[0], self.middle))
        self.stages = [NumpyExecution(ex.backend, first, kernel), NumpyExecution(ex.backend, second, kernel)]
        for stage in self.stages:
            stage.prepare()
        self.middle_memory = Intermediate(ex.backend, self.middle, self.stages)


def _prepare(ex) -> None:
    ex.state["dwpw"] = _Plan(ex)


@numpy_kernel("ConvDwPw", writes_outputs=True, prepare=_prepare)
def conv_dwpw(ex, inputs, outputs):
    if "dwpw" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["dwpw"]
    x, w_dw, b_dw, w_pw, b_pw, residual = (list(inputs) + [None] * 6)[:6]
    middle = plan.middle_memory.array(ex.backend)
    dw, pw = plan.stages
    dw.run([x, w_dw, b_dw], [middle])
    pw.run([middle, w_pw, b_pw, residual], outputs)
