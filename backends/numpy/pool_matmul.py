"""GlobalPoolMatMul on numpy: the pooling and the matrix product run as the GlobalPool and MatMul
steps they were fused from, through their kernels (backends/numpy/pool.py, matmul.py), so the
results are those of the unfused graph. The pooled (N, C, 1, ...) tensor lives in memory of this
step (composite.Intermediate); the MatMul reads it as the (N, C) view the Flatten gave.

A small float32 head (up to COMPILED_MULTIPLY_ADDS) runs instead as one compiled loop
(compiled_loops.pool_matmul_rows) where the compiled loops are started already: the two kernels
took 8.7 us a run on zoo mobilenetv2's head (64 x 4 x 4 -> 10), the loop 2 (numba's call is most
of it), its floats within an ulp or two of theirs. Bigger heads keep numpy's BLAS product.
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.ops.base import TensorSpec
from ...engine.ops.pool_matmul import MATMUL_ATTRS, pooled_spec
from . import compiled
from .composite import Intermediate, sub_step
from .conv import infer_context
from .kernel import KERNELS, NumpyExecution, numpy_kernel

# Heads of up to this many multiply-adds (N x C x K) take the compiled loop: its products are
# scalar loops, which BLAS outruns on big heads (1280 -> 1000: 1.28 M) whatever the call costs.
COMPILED_MULTIPLY_ADDS = 65536


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
        self.compiled = _compiled_head(ex, self.pooled)


def _compiled_head(ex, pooled: TensorSpec) -> tuple | None:
    """(compiled_loops.pool_matmul_rows, the pooled (N, C) array, its options and scalars, the
    bias flattened where it is a constant), or None for the two kernels: other dtypes or
    activations, empty pools, big heads, or numba not started by another step (a lone head does
    not start it: about 0.3 s in a process's first run)."""
    step, attrs = ex.step, ex.attrs
    specs = [spec for spec in step.input_specs[:3] if spec is not None] + list(step.output_specs)
    x_shape, (rows, classes) = step.input_specs[0].shape, step.output_specs[0].shape
    kind = attrs["activation"] or None
    if (any(np.dtype(spec.dtype) != np.float32 for spec in specs) or kind not in compiled.ACTIVATIONS
            or math.prod(x_shape[2:]) == 0 or rows * pooled.shape[1] * classes > COMPILED_MULTIPLY_ADDS
            or not (compiled.started() and compiled.enabled())):
        return None
    low, high = (0.0, math.inf) if kind != "clip" else (attrs["activation_alpha"], attrs["activation_beta"])
    options = np.array([attrs["kind"] == "max", attrs["trans_b"] != 0, compiled.ACTIVATIONS[kind]], np.int64)
    scalars = np.array([attrs["alpha"], attrs["beta"], low, high], np.float32)
    values = list(step.input_values or []) + [None] * 3
    bias = None if values[2] is None else np.ascontiguousarray(values[2], np.float32).reshape(-1)
    return (compiled.loops().pool_matmul_rows, np.empty(pooled.shape[:2], np.float32), options, scalars, bias)


def _prepare(ex) -> None:
    ex.state["pool_matmul"] = _Plan(ex)


def _describe(ex) -> str:
    plan = ex.state.get("pool_matmul")
    if plan is not None and plan.compiled is not None:
        return "compiled loop (pool_matmul_rows)"
    return ex.stage_variants()


NO_BIAS = np.empty(0, np.float32)


@numpy_kernel("GlobalPoolMatMul", writes_outputs=True, prepare=_prepare, describe=_describe)
def global_pool_matmul(ex, inputs, outputs):
    if "pool_matmul" not in ex.state:  # run without prepare (a direct call)
        _prepare(ex)
    plan = ex.state["pool_matmul"]
    x, b, bias = (list(inputs) + [None] * 3)[:3]
    if plan.compiled is not None:
        loop, pooled_rows, options, scalars, constant_bias = plan.compiled
        if constant_bias is not None:
            bias = constant_bias
        elif bias is None:
            bias = NO_BIAS
        else:
            bias = np.ascontiguousarray(bias).reshape(-1)
        loop(np.ascontiguousarray(x), np.ascontiguousarray(b), bias, pooled_rows, outputs[0], options, scalars)
        return
    pool, matmul = plan.stages
    pooled = plan.memory.array(ex.backend)
    pool.run([x], [pooled])
    matmul.run([pooled.reshape(pooled.shape[:2]), b, bias], [outputs[0]])
