"""GlobalPoolMatMul on numpy: the pooling and the matrix product run as the GlobalPool and MatMul
steps they were fused from, through their kernels (backends/numpy/pool.py, matmul.py), so the
results are those of the unfused graph. The pooled (N, C, 1, ...) tensor lives in memory of this
step (composite.Intermediate); the MatMul reads it as the (N, C) view the Flatten gave.
"""
from __future__ import annotations

from ...engine.ops.base import TensorSpec
from ...engine.ops.pool_matmul import MATMUL_ATTRS, pooled_spec
from .composite import Intermediate, sub_step
from .conv import infer_context
from .kernel import KERNELS, NumpyExecution, numpy_kernel


class _Plan:
    """The GlobalPool and MatMul executions, prepared, and the pooled tensor's memory."""

    def __init__(self, ex):
        step, attrs = ex.step, ex.attrs
        self.pooled = pooled_spec(infer_context(ex))
        names = (list(step.inputs) + ["", ""])[:3]
        specs = (list(step.input_specs) + [None, None])[:3]
        values = (list(step.input_values or []) + [None] * 3)[:3]
        pool = sub_step(step, "GlobalPool", "pool", {"kind": attrs["kind"]}, names[:1], specs[:1], values[:1],
                        self.pooled)
        flat = TensorSpec(self.pooled.shape[:2], self.pooled.dtype)
        matmul_attrs = {"trans_a": 0, **{key: attrs[key] for key in MATMUL_ATTRS}}
        matmul = sub_step(step, "MatMul", "matmul", matmul_attrs, [pool.outputs[0], *names[1:]], [flat, *specs[1:]],
                          [None, *values[1:]], step.output_specs[0])
        self.stages = [NumpyExecution(ex.backend, pool, KERNELS["GlobalPool"]),
                       NumpyExecution(ex.backend, matmul, KERNELS["MatMul"])]
        for stage in self.stages:
            stage.prepare()
        self.memory = Intermediate(ex.backend, self.pooled, self.stages)


def _prepare(ex) -> None:
    ex.state["pool_matmul"] = _Plan(ex)


@numpy_kernel("GlobalPoolMatMul", writes_outputs=True, prepare=_prepare)
def global_pool_matmul(ex, inputs, outputs):
    if "pool_matmul" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["pool_matmul"]
    x, b, bias = (list(inputs) + [None] * 3)[:3]
    pooled = plan.memory.array(ex.backend)
    pool, matmul = plan.stages
    pool.run([x], [pooled])
    matmul.run([pooled.reshape(pooled.shape[:2]), b, bias], [outputs[0]])
