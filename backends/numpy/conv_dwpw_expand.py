"""ConvDwPwExpand on numpy: the three Conv steps it was fused from (depthwise, project with the
residual, expand), through the Conv kernel (backends/numpy/conv.py: plans built at resize), so its
numbers are the unfused graph's. The depthwise result lives in memory of this step; the block
output in the op's second output when it has one, else in memory of this step too
(composite.Intermediate).
"""
from __future__ import annotations

from ...engine.ops.base import TensorSpec
from ...engine.ops.conv_dwpw_expand import keeps_block
from .composite import ALIGN, Intermediate, conv_stage
from .kernel import KERNELS, NumpyExecution, numpy_kernel


class _Plan:
    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        y = step.output_specs[0]
        channels = step.input_specs[0].shape[1]
        project = step.input_specs[3].shape[0]
        middle = TensorSpec((y.shape[0], channels, *y.shape[2:]), y.dtype)
        block = TensorSpec((y.shape[0], project, *y.shape[2:]), y.dtype)
        window = {k: attrs[k] for k in ("strides", "dilations", "pads", "auto_pad")}

        def act(prefix: str) -> dict:
            return {"activation": attrs[f"{prefix}activation"], "activation_alpha": attrs[f"{prefix}activation_alpha"],
                    "activation_beta": attrs[f"{prefix}activation_beta"]}

        dw = conv_stage(step, "dw", {**window, "group": channels, **act("dw_")}, [0, 1, 2], middle)
        pw = conv_stage(step, "pw", act(""), [0, 3, 4, 5], block, source=(dw.outputs[0], middle))
        ex_ = conv_stage(step, "ex", act("ex_"), [0, 6, 7], y, source=(pw.outputs[0], block))
        kernel = KERNELS["Conv"]
        self.stages = [NumpyExecution(ex.backend, s, kernel) for s in (dw, pw, ex_)]
        for stage in self.stages:
            stage.prepare()
        self.keeps = keeps_block(step.node)
        self.middle = Intermediate(ex.backend, middle, self.stages)
        # Both intermediates may live in the shared scratch: the block's range starts past the
        # depthwise result's.
        self.block = None if self.keeps else _After(ex.backend, block, self.stages, self.middle)


class _After(Intermediate):
    """An Intermediate placed past another one in the shared scratch."""

    def __init__(self, backend, spec: TensorSpec, stages, before: Intermediate):
        super().__init__(backend, spec, stages)
        if self.shared and before.shared:
            start = max(self.offset, -(-before.total // ALIGN) * ALIGN)
            self.total = start + (self.total - self.offset)
            self.offset = start
            backend.reserve_scratch(self.total)


def _prepare(ex) -> None:
    ex.state["dwpw_expand"] = _Plan(ex)


@numpy_kernel("ConvDwPwExpand", writes_outputs=True, prepare=_prepare)
def conv_dwpw_expand(ex, inputs, outputs):
    if "dwpw_expand" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["dwpw_expand"]
    x, w_dw, b_dw, w_pw, b_pw, residual, w_ex, b_ex = (list(inputs) + [None] * 8)[:8]
    middle = plan.middle.array(ex.backend)
    block = outputs[1] if plan.keeps else plan.block.array(ex.backend)
    dw, pw, expand = plan.stages
    dw.run([x, w_dw, b_dw], [middle])
    pw.run([middle, w_pw, b_pw, residual], [block])
    expand.run([block, w_ex, b_ex], [outputs[0]])
