"""ConvPw on numpy: the conv and the pointwise stage run as the two Conv steps they were fused from,
through the Conv kernel (backends/numpy/conv.py: im2col / matmul plans built at resize), with the
conv result in memory of this step (composite.ConvThenPointwise), so the numbers are the unfused
graph's.
"""
from __future__ import annotations

from .composite import ConvThenPointwise
from .kernel import numpy_kernel


def _prepare(ex) -> None:
    attrs = ex.attrs
    conv = {"group": 1, "activation": attrs["conv_activation"], "activation_alpha": attrs["conv_activation_alpha"],
            "activation_beta": attrs["conv_activation_beta"]}
    ex.state["convpw"] = ConvThenPointwise(ex, "conv", conv, ex.step.input_specs[1].shape[0])


@numpy_kernel("ConvPw", writes_outputs=True, prepare=_prepare)
def conv_pw(ex, inputs, outputs):
    if "convpw" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    ex.state["convpw"].run(ex.backend, inputs, outputs)
