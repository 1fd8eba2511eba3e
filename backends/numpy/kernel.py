"""Registration of numpy kernels: one function per op type, next to its code."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..base import Backend, Execution, Step, register_backend

KERNELS: dict[str, Callable] = {}


def numpy_kernel(op_type: str, *, writes_outputs: bool = False, prepare: Callable | None = None):
    """Register fn(ex, *inputs) -> array | tuple of arrays as the numpy kernel of op_type.

    With writes_outputs=True the signature is fn(ex, inputs, outputs) and the kernel fills the
    preallocated outputs itself (saves a copy). prepare(ex), when given, runs at resize and may
    fill ex.state with tables the kernel reuses on every run.
    """

    def register(fn: Callable) -> Callable:
        if op_type in KERNELS:
            raise RuntimeError(f"numpy kernel for {op_type} registered twice")
        fn.writes_outputs = writes_outputs
        fn.prepare = prepare
        KERNELS[op_type] = fn
        return fn

    return register


class NumpyExecution(Execution):
    def __init__(self, backend: Backend, step: Step, fn: Callable):
        super().__init__(backend, step)
        self.fn = fn
        self.state: dict = {}  # per-resize prepared data (repacked weights, index tables)

    def prepare(self) -> None:
        if self.fn.prepare is not None:
            self.fn.prepare(self)

    def run(self, inputs, outputs) -> None:
        if self.fn.writes_outputs:
            self.fn(self, inputs, outputs)
            return
        results = self.fn(self, *inputs)
        if not isinstance(results, (tuple, list)):
            results = (results,)
        for out, result in zip(outputs, results):
            result = np.asarray(result)
            if result.shape != out.shape:
                raise RuntimeError(f"{self.step.label}: numpy kernel produced shape {result.shape}, "
                                   f"shape inference said {out.shape}")
            np.copyto(out, result, casting="unsafe")


@register_backend
class NumpyBackend(Backend):
    name = "numpy"
    alignment = 64

    def unsupported_reason(self, step: Step) -> str | None:
        return None if step.op.op_type in KERNELS else "no numpy kernel"

    def create_execution(self, step: Step) -> Execution:
        return NumpyExecution(self, step, KERNELS[step.op.op_type])

    def plan_memory(self, specs, lifetimes, dedicated, constants):
        """One arena of the planned size; each pooled tensor is a view at its offset."""
        pool = super().plan_memory(specs, lifetimes, dedicated, constants)
        self.arena = np.empty(pool.peak_bytes, np.uint8)
        self.views = {name: np.ndarray(specs[name].shape, specs[name].dtype, buffer=self.arena, offset=offset)
                      for name, offset in pool.offsets.items()}
        return pool

    def execute(self, segment, values, observer=None) -> None:
        for step, execution in segment.steps:
            if observer:
                observer.before(step, self, values)
            inputs = [values[n] if n else None for n in step.inputs]
            outputs = [self.views[n] if n in self.views else np.empty(s.shape, s.dtype)
                       for n, s in zip(step.outputs, step.output_specs)]
            execution.run(inputs, outputs)
            values.update((n, o) for n, o in zip(step.outputs, outputs) if n)
            if observer:
                observer.after(step, self, values)


def evaluate(step: Step, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run one step now on the CPU (constant folding, resize-time shape computations).
    Data-movement ops run through their raster plans, as they do in a session."""
    from dataclasses import replace

    from ...engine.geometry import finalize
    from ...engine.ops.base import InferContext

    outputs = [np.empty(spec.shape, spec.dtype) for spec in step.output_specs]
    plans = None
    if step.op.is_geometry:
        ctx = InferContext(step.node, step.attrs, step.input_specs, step.input_values or inputs)
        plans = step.op.geometry(ctx, step.output_specs)
    if plans is None:
        ex = NumpyExecution(NumpyBackend(), step, KERNELS[step.op.op_type])
        ex.prepare()
        ex.run(inputs, outputs)
        return outputs
    for out, plan in zip(outputs, plans):
        raster_step = replace(step, plan=finalize(plan))
        KERNELS["Raster"](NumpyExecution(NumpyBackend(), raster_step, KERNELS["Raster"]), inputs, [out])
    return outputs
