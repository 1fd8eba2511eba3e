"""Registration of numpy kernels: one function per op type, next to its code."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..base import (
    Backend,
    Execution,
    Step,
    contiguous_run,
    register_backend,
    storage_host,
    tiling_inputs,
    whole_input_ranges,
)
from . import compiled

KERNELS: dict[str, Callable] = {}

# numpy's own arrays start 16 bytes past a 64-byte boundary (malloc's alignment), so every 64-byte
# vector load of the compiled loops split two cache lines, and threads writing neighbouring chunks
# shared one: the backend's tensors, scratch and plan buffers start on a cache line instead
# (docs/performance.md, "Tensors on cache lines").
CACHE_LINE = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of shape and dtype whose data starts on a CACHE_LINE
    boundary."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape if isinstance(shape, tuple | list) else (shape,)) * dtype.itemsize
    raw = np.empty(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape, dtype) -> np.ndarray:
    """aligned_empty, zeroed."""
    array = aligned_empty(shape, dtype)
    array.fill(0)
    return array


def thread_rows(threads: int, size: int, dtype) -> np.ndarray:
    """A compiled loop's per-thread buffers of at least size elements each, (threads, size rounded
    up to whole cache lines), zeroed: each row on its own lines."""
    line = CACHE_LINE // np.dtype(dtype).itemsize
    return aligned_zeros((threads, -(-size // line) * line), dtype)


def work_counter(threads: int) -> np.ndarray:
    """The int64 counters the threads of a compiled loop claim their shares of work from, one a
    thread, each alone on its cache line (compiled_loops.COUNTER_STRIDE apart: other data there
    would move between the cores with every claim)."""
    return aligned_zeros(max(threads, 1) * (CACHE_LINE // 8), np.int64)


def numpy_kernel(op_type: str, *, writes_outputs: bool = False, prepare: Callable | None = None,
                 describe: Callable | None = None):
    """Register fn(ex, *inputs) -> array | tuple of arrays as the numpy kernel of op_type.

    With writes_outputs=True the signature is fn(ex, inputs, outputs) and the kernel fills the
    preallocated outputs itself (saves a copy). prepare(ex), when given, runs at resize and may
    fill ex.state with tables the kernel reuses on every run. describe(ex), when given, names the
    path prepare chose (NumpyExecution.variant).
    """

    def register(fn: Callable) -> Callable:
        if op_type in KERNELS:
            raise RuntimeError(f"numpy kernel for {op_type} registered twice")
        fn.writes_outputs = writes_outputs
        fn.prepare = prepare
        fn.describe = describe
        KERNELS[op_type] = fn
        return fn

    return register


class NumpyExecution(Execution):
    def __init__(self, backend: Backend, step: Step, fn: Callable):
        super().__init__(backend, step)
        self.fn = fn
        self.state: dict = {}  # per-resize prepared data (repacked weights, index tables)
        self.outputs: list[np.ndarray] | None = None  # the step's output arrays, when all are pooled
        self.nothing_to_compute = False

    def prepare(self) -> None:
        # Outputs without elements: nothing to compute. numpy's matmul would still loop over the
        # batch dims of empty operands, 2^31 of them in (2147483647, 0, 8) @ (8, 8): seconds.
        self.nothing_to_compute = all(math.prod(spec.shape) == 0 for spec in self.step.output_specs)
        if self.fn.prepare is not None:
            self.fn.prepare(self)
        # Pooled outputs are fixed views of the arena for this resize: looked up once here, not
        # on every run. Outputs nobody reads (absent optional outputs) get scratch arrays.
        views = getattr(self.backend, "views", {})
        step = self.step
        if all(name in views or not name for name in step.outputs):
            self.outputs = [views[name] if name else np.empty(spec.shape, spec.dtype)
                            for name, spec in zip(step.outputs, step.output_specs)]
            self.published = [(name, out) for name, out in zip(step.outputs, self.outputs) if name]

    def variant(self) -> str:
        """The path this step runs, for `wgnn bench`'s kernel column: the kernel's description of
        its prepared plan; for a fused op its sub-steps' (`stages` of a plan in state), each
        after its name; else "numpy"."""
        if self.fn.describe is not None:
            return self.fn.describe(self)
        return self.stage_variants()

    def stage_variants(self) -> str:
        """Each sub-step's variant after its name ("pool: numpy; matmul: numpy"), else "numpy"."""
        parts = [f"{stage.step.node.name.rsplit('/', 1)[-1]}: {stage.variant()}"
                 for plan in self.state.values() for stage in getattr(plan, "stages", ())]
        return "; ".join(parts) or "numpy"

    def view_range(self) -> tuple[str, int] | None:
        """A Raster that reads one contiguous run of an input onto its whole output, of the
        output's dtype: a Reshape (offset 0), a Slice or Split along the outermost axis that is
        not 1 (numpy places an array at any offset)."""
        step = self.step
        run = contiguous_run(step) if step.op.op_type == "Raster" else None
        if run is None:
            return None
        index, offset = run
        dtype = np.dtype(step.input_specs[index].dtype)
        if dtype != np.dtype(step.output_specs[0].dtype):
            return None
        return step.inputs[index], offset * dtype.itemsize

    def embedded_inputs(self) -> list[tuple[str, int]] | None:
        return tiling_inputs(self._moved_ranges(), self.step.output_specs[0].nbytes)

    def _moved_ranges(self) -> list[tuple[str, int, int]] | None:
        """Of a Raster step moving inputs of the output's dtype: what it copies whole, where
        (base.whole_input_ranges), so that the session can place those inputs in the output."""
        step = self.step
        if step.op.op_type != "Raster" or any(np.dtype(spec.dtype) != np.dtype(step.output_specs[0].dtype)
                                              for spec in step.input_specs if spec is not None):
            return None
        return whole_input_ranges(step, lambda name, spec: np.dtype(spec.dtype).itemsize)

    def run(self, inputs, outputs) -> None:
        if self.nothing_to_compute:
            return
        fn = self.fn
        if fn.writes_outputs:
            fn(self, inputs, outputs)
            return
        results = fn(self, *inputs)
        if not isinstance(results, (tuple, list)):
            results = (results,)
        for out, result in zip(outputs, results):
            if type(result) is not np.ndarray:
                result = np.asarray(result)
            if result.shape != out.shape:
                raise RuntimeError(f"{self.step.label}: numpy kernel produced shape {result.shape}, "
                                   f"shape inference said {out.shape}")
            np.copyto(out, result, casting="unsafe")

    def run_step(self, values: dict) -> None:
        """Run with inputs from values and put the outputs there."""
        outputs = self.outputs
        if self.nothing_to_compute and outputs is not None:  # views, empty tensors: no inputs to gather
            values.update(self.published)
            return
        step = self.step
        inputs = [values[name] if name else None for name in step.inputs]
        if outputs is None:
            views = self.backend.views
            outputs = [views[name] if name in views else _run_output(values, name, spec)
                       for name, spec in zip(step.outputs, step.output_specs)]
            self.run(inputs, outputs)
            values.update((name, out) for name, out in zip(step.outputs, outputs) if name)
            return
        self.run(inputs, outputs)
        values.update(self.published)


def _run_output(values: dict, name: str, spec) -> np.ndarray:
    """Memory for an output outside the arena (a graph output): the caller's out= array where the
    session passed it (engine.session.RunValues), else a new array this run owns and returns
    without a copy."""
    destinations = getattr(values, "destinations", None)
    if destinations and name in destinations:
        return destinations[name]
    array = np.empty(spec.shape, spec.dtype)
    if name and hasattr(values, "own"):
        values.own(array)
    return array


@register_backend
class NumpyBackend(Backend):
    name = "numpy"
    alignment = CACHE_LINE  # the planner's tensor offsets in the arena
    dedicated_hosts = False  # graph outputs and feeds are the caller's arrays, new on each run
    scratch_bytes = 0  # the most scratch memory a prepared step asked for (this resize)
    _scratch: np.ndarray | None = None
    # Runs choose their loops' thread cap (compiled.RunChoice) where a prepared loop asked for it
    # (this resize); loop_cap is the current run's (None: each loop its own threads).
    threads_per_run = False
    loop_cap: int | None = None
    _run_choices: dict | None = None

    def unsupported_reason(self, step: Step) -> str | None:
        return None if step.op.op_type in KERNELS else "no numpy kernel"

    def create_execution(self, step: Step) -> Execution:
        return NumpyExecution(self, step, KERNELS[step.op.op_type])

    def plan_memory(self, specs, lifetimes, dedicated, constants, *, shares=None):
        """One arena of the planned size; each pooled tensor is a view at its offset, and so is
        each hosted one (shares: a Reshape's output in its input, a Concat's inputs in its
        output) at its host's offset plus its own. Such Raster steps then move nothing
        (raster.hosted)."""
        pool = super().plan_memory(specs, lifetimes, dedicated, constants)
        self.scratch_bytes, self._scratch = 0, None  # the steps prepared next reserve it anew
        self.threads_per_run, self._run_choices = False, None  # and ask for per-run choices anew
        self.arena = aligned_empty(pool.peak_bytes, np.uint8)
        self.shares = dict(shares or {})
        offsets = dict(pool.offsets)
        for name in self.shares:
            host, delta = storage_host(name, self.shares)
            if host in pool.offsets:  # else its host is not pooled: a new array on each run, copied
                offsets[name] = pool.offsets[host] + delta
        self.views = {name: np.ndarray(specs[name].shape, specs[name].dtype, buffer=self.arena, offset=offset)
                      for name, offset in offsets.items()}
        return pool

    def reserve_scratch(self, nbytes: int) -> None:
        """At prepare: a step will want nbytes of temporary memory on every run. Steps run one at a
        time, so they share one scratch buffer (big im2col buffers live there, not per step)."""
        self.scratch_bytes = max(self.scratch_bytes, nbytes)

    def scratch(self, nbytes: int) -> np.ndarray:
        """The first nbytes of the shared scratch (uint8), allocated at its first use after a resize
        with room for every step that reserved some."""
        if self._scratch is None or self._scratch.nbytes < nbytes:
            self._scratch = aligned_empty(max(nbytes, self.scratch_bytes), np.uint8)
        return self._scratch[:nbytes]

    def choose_threads_per_run(self) -> None:
        """At prepare: a loop with threads lets the runs choose its cap (compiled.RunChoice)."""
        self.threads_per_run = True

    def thread_runs(self) -> dict | None:
        """Where runs choose their loops' threads (RunChoice): the numpy segments' runs so far on
        their loops' threads, on one thread, and the switches between the two; else None."""
        if not self.threads_per_run:
            return None
        choices = (self._run_choices or {}).values()
        return {"threads": sum(c.runs_by_cap[None] for c in choices),
                "one_thread": sum(c.runs_by_cap[1] for c in choices),
                "switches": sum(c.switches for c in choices)}

    def execute(self, segment, values, observer=None) -> None:
        if not self.threads_per_run:
            self._execute(segment, values, observer)
            return
        if self._run_choices is None:
            self._run_choices = {}
        choice = self._run_choices.setdefault(id(segment), compiled.RunChoice())
        self.loop_cap = choice.begin()
        try:
            self._execute(segment, values, observer)
        finally:
            choice.end(self.loop_cap)
            self.loop_cap = None

    def _execute(self, segment, values, observer=None) -> None:
        # Floating-point warnings are off for the whole segment (one errstate instead of one per
        # kernel): overflow to inf and NaN are results here, as in onnxruntime.
        if observer is None:
            with np.errstate(all="ignore"):
                for _, execution in segment.steps:
                    execution.run_step(values)
            return
        for step, execution in segment.steps:  # callbacks run outside the errstate
            observer.before(step, self, values)
            with np.errstate(all="ignore"):
                execution.run_step(values)
            observer.after(step, self, values)


def evaluate(step: Step, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run one step now on the CPU (constant folding, resize-time shape computations).
    Data-movement ops run through their raster plans, as they do in a session."""
    with np.errstate(all="ignore"):
        return _evaluate(step, inputs)


def _evaluate(step: Step, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
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
