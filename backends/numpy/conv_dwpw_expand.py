"""ConvDwPwExpand on numpy: the three Conv steps it was fused from (depthwise, project with the
residual, expand), through the Conv kernel (backends/numpy/conv.py: plans built at resize), so its
numbers are the unfused graph's. The depthwise result lives in memory of this step; the block
output in the op's second output when it has one, else in memory of this step too, past the
depthwise result's (composite.Intermediate).
"""
from __future__ import annotations

from ...engine.ops.base import TensorSpec
from ...engine.ops.conv_dwpw_expand import keeps_block
from .composite import Intermediate, conv_stage
from .conv_dwpw import depthwise_then_pointwise
from .kernel import KERNELS, NumpyExecution, numpy_kernel


class _Plan:
    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        y = step.output_specs[0]
        block = TensorSpec((y.shape[0], step.input_specs[3].shape[0], *y.shape[2:]), y.dtype)
        self.pair = depthwise_then_pointwise(ex, block)
        expand = {"activation": attrs["ex_activation"], "activation_alpha": attrs["ex_activation_alpha"],
                  "activation_beta": attrs["ex_activation_beta"]}
        pointwise = self.pair.stages[1].step
        self.expand = NumpyExecution(ex.backend, conv_stage(step, "ex", expand, [0, 6, 7], y,
                                                            source=(pointwise.outputs[0], block)), KERNELS["Conv"])
        self.expand.prepare()
        self.stages = [*self.pair.stages, self.expand]
        self.keeps = keeps_block(step.node)
        self.block = None if self.keeps else Intermediate(ex.backend, block, self.stages,
                                                          after=self.pair.middle_memory)


def _prepare(ex) -> None:
    ex.state["dwpw_expand"] = _Plan(ex)


@numpy_kernel("ConvDwPwExpand", writes_outputs=True, prepare=_prepare)
def conv_dwpw_expand(ex, inputs, outputs):
    if "dwpw_expand" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["dwpw_expand"]
    block = outputs[1] if plan.keeps else plan.block.array(ex.backend)
    plan.pair.run(ex.backend, inputs[:6], [block])
    plan.expand.run([block, *(list(inputs) + [None] * 8)[6:8]], [outputs[0]])
