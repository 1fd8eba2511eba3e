"""ConvDwPw on numpy: the depthwise and the pointwise stage run as the two Conv steps they were
fused from, through the Conv kernel (backends/numpy/conv.py: im2col / matmul plans built at
resize), with the depthwise result in memory of this step (composite.ConvThenPointwise).
"""
from __future__ import annotations

from .composite import ConvThenPointwise
from .kernel import numpy_kernel


def depthwise_then_pointwise(ex, out=None) -> ConvThenPointwise:
    """The depthwise and pointwise stages of a ConvDwPw (or of the ConvDwPw in a fused op)."""
    attrs = ex.attrs
    channels = ex.step.input_specs[0].shape[1]
    depthwise = {"group": channels, "activation": attrs["dw_activation"],
                 "activation_alpha": attrs["dw_activation_alpha"], "activation_beta": attrs["dw_activation_beta"]}
    return ConvThenPointwise(ex, "dw", depthwise, channels, out)


def _prepare(ex) -> None:
    ex.state["dwpw"] = depthwise_then_pointwise(ex)


@numpy_kernel("ConvDwPw", writes_outputs=True, prepare=_prepare)
def conv_dwpw(ex, inputs, outputs):
    if "dwpw" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    ex.state["dwpw"].run(ex.backend, inputs, outputs)
