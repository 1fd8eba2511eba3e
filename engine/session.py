"""Session: resize() runs the MNN stages (shapes -> geometry -> schedule -> memory -> prepare) once
per input shape; run() only moves data and executes prepared steps."""
from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..backends.base import BACKENDS, Backend, Execution, Step, storage_host
from .callbacks import Observer, StopRun
from .continuation import Continuation
from .errors import HostMemoryError, InputError, UnsupportedOpError, WgnnError
from .feeds import FeedChecker
from .geometry import finalize
from .graph import Node
from .memory import Lifetime, MemoryPlan
from .ops.base import OPS, InferContext
from .shapes import ShapeResult, bind_input_shapes, infer_shapes

log = logging.getLogger("wgnn")


@dataclass
class Segment:
    """Consecutive steps on one backend; imports arrive before it runs, exports leave after."""

    backend: Backend
    steps: list[tuple[Step, Execution]]
    imports: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)


class RunValues(dict):
    """A run's tensors by name, and two things a backend may use to avoid copies: `destinations`,
    the out= arrays a step may write a graph output into directly, and `owned`, the arrays a
    backend made for this run alone, which the run returns as they are instead of copying them."""

    def __init__(self, values: dict[str, np.ndarray], destinations: dict[str, np.ndarray]):
        super().__init__(values)
        self.destinations = destinations
        self.owned: dict[int, np.ndarray] = {}  # id -> array (held, so that ids stay unique)

    def own(self, array: np.ndarray) -> None:
        self.owned[id(array)] = array


class Session:
    """A model bound to backends and input shapes. Create it with Interpreter.create_session()."""

    def __init__(self, interpreter, config):
        from ..backends import load_backends

        load_backends()
        self.interpreter = interpreter
        self.graph = interpreter.graph
        self._feed_checker = FeedChecker(self.graph.inputs)
        self.config = config
        unknown = [p for p in config.providers if p not in BACKENDS]
        if unknown:
            raise WgnnError(f"unknown provider(s) {unknown}; available: {sorted(BACKENDS)}")
        # The configured backends; self.backends, those this resize schedules on: all of them, but
        # with providers=["auto"] only those predicted faster for the model (_auto_backends).
        self.all_backends = [BACKENDS[p](config) for p in config.providers]
        self.backends = list(self.all_backends)
        self.providers_choice = config.providers_choice
        self.input_shapes: dict[str, tuple[int, ...]] | None = None
        self.resize_count = 0
        # One session may be shared by threads: runs and resizes take turns (the memory arenas and
        # GPU bindings belong to the session). For parallel work, give each thread its own session.
        self._lock = threading.RLock()
        # Intermediate tensors asked for as outputs: kept out of the memory pools (and downloaded
        # from the GPU) like graph outputs; asking for new ones re-plans once.
        self.extra_outputs: set[str] = set()

    # ----------------------------------------------------------------- resize
    def resize(self, shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        """Bind input shapes and plan everything for them. Shapes of inputs with fixed dims may
        be omitted."""
        with self._lock:
            self._resize(shapes)

    def _resize(self, shapes: dict[str, tuple[int, ...]] | None) -> None:
        from ..backends.numpy.kernel import evaluate

        specs, self.symbols = bind_input_shapes(self.graph.inputs, dict(shapes or {}))
        interp = self.interpreter
        shapes_result = infer_shapes(
            self.graph, interp.node_attrs, interp.node_ops, specs,
            lambda inferred, values: evaluate(self._step_from(inferred), values))
        self.shapes: ShapeResult = shapes_result
        self.continuation = None
        self.boundary: set[str] = set()
        if shapes_result.sync is not None:
            self.continuation = Continuation(self, shapes_result.sync, shapes_result.values, shapes_result.specs)
            self.boundary = set(self.continuation.boundary)
            log.debug("%s: the rest of the graph is planned at run time", shapes_result.sync.reason)
        self.steps = self._lower_geometry(shapes_result)
        self.backends = self._auto_backends()
        for backend in self.backends:
            backend.settle_device(self.steps)
        self.segments, self.fallbacks = self._schedule(self.steps)
        for backend in self.backends:  # layouts per tensor, with the conversions they need
            backend.assign_layouts([s for s in self.segments if s.backend is backend], self.shapes.specs)
        try:
            self.memory = self._plan_memory()
            for segment in self.segments:
                for _, execution in segment.steps:
                    execution.prepare()
            for backend in self.backends:
                backend.finish_prepare(self._executions_on(backend))
        except MemoryError as exc:
            raise HostMemoryError(f"out of host memory planning for input shapes {dict(shapes or {})}: "
                                  f"{exc}") from None
        self.input_shapes = {name: spec.shape for name, spec in specs.items()}
        self.resize_count += 1

    def _auto_backends(self) -> list[Backend]:
        """With providers=["auto"] on an adapter where wgpu can be the faster, the providers predicted
        faster for this resize's steps and work (tuning.choose_providers); else every configured one."""
        choice = self.config.providers_choice
        if not choice or "costs" not in choice or len(self.all_backends) < 2:
            return list(self.all_backends)
        from ..backends.wgpu.tuning import choose_providers, session_work

        previous = self.providers_choice.get("providers") if "model_steps" in self.providers_choice else None
        self.providers_choice = choose_providers(choice, *session_work(self))
        chosen = self.providers_choice["providers"]
        if chosen != previous:
            predicted = self.providers_choice["predicted_ms"]
            log.info("providers=['auto'] for %s (%d steps, %.1f MFLOP): %s (predicted ms per run: wgpu %.3f, "
                     "numpy %.3f)", self.graph.name or "the model", self.providers_choice["model_steps"],
                     self.providers_choice["model_mflop"], ", ".join(chosen), predicted["wgpu"], predicted["numpy"])
        return [backend for backend in self.all_backends if backend.name in chosen]

    def _step_from(self, inferred, node: Node | None = None, plan=None) -> Step:
        return Step(node or inferred.node, inferred.op, inferred.attrs, list(inferred.node.inputs),
                    list(inferred.node.outputs), inferred.input_specs, inferred.output_specs,
                    inferred.input_values, plan=plan, flops=inferred.flops)

    def _lower_geometry(self, result: ShapeResult) -> list[Step]:
        """Stage 2: data-movement ops become Raster steps (one per output)."""
        steps: list[Step] = []
        raster = OPS["Raster"]
        for inferred in result.nodes:
            if inferred.folded:
                continue
            node, op = inferred.node, inferred.op
            plans = None
            if op.is_geometry:
                ctx = InferContext(node, inferred.attrs, inferred.input_specs, inferred.input_values)
                plans = op.geometry(ctx, inferred.output_specs)
            if plans is None:
                steps.append(self._step_from(inferred))
                continue
            for out_name, spec, plan in zip(node.outputs, inferred.output_specs, plans):
                if not out_name:
                    continue
                plan = finalize(plan)
                used = {r.src for r in plan.regions}
                inputs = [n if i in used else "" for i, n in enumerate(node.inputs)]
                in_specs = [s if i in used else None for i, s in enumerate(inferred.input_specs)]
                synthetic = Node("Raster", inputs, [out_name], {"source_op": op.op_type}, name=node.name)
                steps.append(Step(synthetic, raster, {"source_op": op.op_type}, inputs, [out_name],
                                  in_specs, [spec], plan=plan))
        return steps

    def _schedule(self, steps: list[Step]) -> tuple[list[Segment], list[dict]]:
        """Stage 3: each step goes to the first backend that supports it; consecutive steps on
        one backend form a segment."""
        segments: list[Segment] = []
        fallbacks: list[dict] = []
        missing: Counter = Counter()
        reported: set[str] = set()
        for step in steps:
            chosen, reasons = None, []
            for backend in self.backends:
                reason = backend.unsupported_reason(step)
                if reason is None:
                    chosen = backend
                    break
                reasons.append(f"{backend.name}: {reason}")
            if chosen is None:
                missing[step.op.op_type] += 1
                continue
            if chosen is not self.backends[0]:
                fallbacks.append({"op": step.label, "backend": chosen.name, "reasons": reasons})
                if step.op.op_type not in reported:
                    reported.add(step.op.op_type)
                    log.info("%s runs on %s (%s)", step.op.op_type, chosen.name, "; ".join(reasons))
            step.backend = chosen.name
            if not segments or segments[-1].backend is not chosen:
                segments.append(Segment(chosen, []))
            segments[-1].steps.append((step, chosen.create_execution(step)))
        if missing:
            listed = ", ".join(f"{op} ({n})" for op, n in sorted(missing.items()))
            raise UnsupportedOpError(f"no provider of {list(self.config.providers)} runs: {listed}",
                                     dict(missing))
        return segments, fallbacks

    def _plan_transfers(self) -> None:
        """Which tensors each segment imports from another backend (or the feeds) and exports
        (graph outputs, tensors read on another backend)."""
        outputs = {t.name for t in self.graph.outputs} | self.extra_outputs | self.boundary
        produced_on: dict[str, str] = {}
        read_on: dict[str, set[str]] = {}
        for segment in self.segments:
            for step, _ in segment.steps:
                for name in step.inputs:
                    if name:
                        read_on.setdefault(name, set()).add(segment.backend.name)
                for name in step.outputs:
                    if name:
                        produced_on[name] = segment.backend.name
        for segment in self.segments:
            here = segment.backend.name
            segment.imports, segment.exports = [], []
            for step, _ in segment.steps:
                for name in step.inputs:
                    if (name and name not in self.shapes.values and produced_on.get(name) != here
                            and name not in segment.imports):
                        segment.imports.append(name)
                for name in step.outputs:
                    if name and (name in outputs or read_on.get(name, set()) - {here}):
                        segment.exports.append(name)

    def _plan_memory(self) -> dict[str, MemoryPlan]:
        """Stage 4: lifetimes of each backend's intermediate tensors -> pooled memory; exported and
        imported tensors get their own storage, constants are made resident where they are read.
        Some tensors live inside another's storage (_shared_storage): a group so formed is
        planned as its outermost host, alive from its first member's write to its last read."""
        self._plan_transfers()
        dedicated = {n for s in self.segments for n in s.imports + s.exports}
        producer = {name: segment.backend for segment in self.segments for step, _ in segment.steps
                    for name in step.outputs}
        shares, self.idle_steps = self._shared_storage(dedicated, producer)

        first: dict[str, tuple[int, Backend]] = {}
        last: dict[str, int] = {}
        position = 0
        for segment in self.segments:
            for step, _ in segment.steps:
                for name in step.inputs:
                    name = storage_host(name, shares)[0]
                    if name in first:
                        last[name] = position
                for name in step.outputs:
                    name = storage_host(name, shares)[0]
                    if name and name not in dedicated and name not in first:
                        first[name] = (position, segment.backend)
                    if name in first:
                        last[name] = max(last.get(name, position), position)
                position += 1
        plans: dict[str, MemoryPlan] = {}
        for backend in self.backends:
            lifetimes = [Lifetime(name, backend.tensor_bytes(name, self.shapes.specs[name]), start, last[name])
                         for name, (start, owner) in first.items() if owner is backend]
            segments = [s for s in self.segments if s.backend is backend]
            mine = list(dict.fromkeys(n for s in segments for n in s.imports + s.exports))
            constants = {n: self.shapes.values[n] for s in segments for step, _ in s.steps
                         for n in step.inputs if n in self.shapes.values}
            plans[backend.name] = backend.plan_memory(
                self.shapes.specs, lifetimes, mine, constants,
                shares={name: host for name, host in shares.items() if producer[name] is backend})
        return plans

    def _shared_storage(self, dedicated: set[str], producer: dict) -> tuple[dict[str, tuple[str, int]], int]:
        """(tensor -> (host tensor, byte offset in the host's storage), steps left with nothing
        to do). A view (Execution.view_range: a Reshape, a layout change that moves nothing, on
        numpy a Slice of one contiguous range) lives in its source; the inputs of a concatenation
        that places each of them whole in one range of its output (Execution.embedded_inputs) are
        written there by their producers.
        Only tensors of one backend, neither constants nor crossing between backends, take part;
        a tensor has at most one host. dedicated: tensors crossing between backends (or graph
        outputs); producer: tensor -> the backend writing it."""
        shares: dict[str, tuple[str, int]] = {}
        idle = 0
        for segment in self.segments:
            hosts_dedicated = segment.backend.dedicated_hosts
            for step, execution in segment.steps:
                out = step.outputs[0] if step.outputs else ""
                source, offset = execution.view_range() or (None, 0)
                if (source is not None and out not in dedicated and source not in self.shapes.values
                        and (hosts_dedicated or source not in dedicated)):
                    shares[out] = (source, offset)
                    idle += 1
                    continue
                parts = execution.embedded_inputs()
                if not parts or len({name for name, _ in parts}) != len(parts):
                    continue
                if (hosts_dedicated or out not in dedicated) and all(
                        name not in dedicated and name not in shares and producer.get(name) is segment.backend
                        for name, _ in parts):
                    shares.update({name: (out, offset) for name, offset in parts})
                    idle += 1
        return shares, idle

    # -------------------------------------------------------------------- run
    def run(self, feeds: dict[str, np.ndarray], output_names: list[str] | None = None, *,
            callback=None, out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Run the model. Returns a dict name -> array. Resizes first when input shapes changed.
        Thread-safe: calls from several threads take turns.

        Arguments:
            feeds: input name -> array.
            output_names: outputs to return (default: all); intermediate tensor names are allowed.
            callback: fn(info: engine.callbacks.OpInfo) called before and after every op (GPU
                ops then run one submission each); returning False stops the run, and only the
                outputs computed by then are returned.
            out: output name -> a writeable array of that output's shape and dtype: the output
                is written there and that array returned, instead of a new one on every run
                (new arrays of 128 KiB and more are fresh memory mappings under glibc, faulted
                in page by page). Names must be among the requested outputs.
        """
        feeds = self._check_feeds(feeds)
        out = self._check_out(out, output_names)
        with self._lock:
            return self._run(feeds, output_names, callback, out)

    def _check_out(self, out, output_names) -> dict[str, np.ndarray]:
        """The out= arrays, checked before the run: a dict of writeable arrays, named outputs."""
        if out is None:
            return {}
        if not isinstance(out, dict):
            raise InputError(f"out must be a dict of output name -> numpy array, got {type(out).__name__}")
        wanted = set(output_names or [t.name for t in self.graph.outputs])
        for name, array in out.items():
            if name not in wanted:
                raise InputError(f"out names {name!r}, which this run does not return (it returns {sorted(wanted)})")
            if not isinstance(array, np.ndarray) or not array.flags.writeable:
                got = "a read-only array" if isinstance(array, np.ndarray) else type(array).__name__
                raise InputError(f"out[{name!r}] must be a writeable numpy array, got {got}")
        return out

    @staticmethod
    def _check_out_spec(name: str, array: np.ndarray, shape, dtype) -> None:
        if array.shape != tuple(shape) or array.dtype != np.dtype(dtype):
            raise InputError(f"out[{name!r}] is {array.dtype}{list(array.shape)}, but output {name!r} "
                             f"is {np.dtype(dtype)}{list(shape)}")

    def _deliver(self, values: dict, names: list[str], out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The requested outputs: copied into their out= arrays (each checked against the result's
        shape and dtype before any is written) unless a step wrote them there, else new arrays
        (or the arrays a backend made for this run)."""
        for name in names:
            if name in out:
                self._check_out_spec(name, out[name], values[name].shape, values[name].dtype)
        results = {}
        owned = getattr(values, "owned", {})
        for name in names:
            value = values[name]
            if name in out:
                if value is not out[name]:  # else a step wrote it there
                    np.copyto(out[name], value)
                results[name] = out[name]
            elif owned.pop(id(value), None) is not None:  # made for this run: no copy (once)
                results[name] = value
            else:
                results[name] = np.array(value)
        return results

    def _destinations(self, out: dict[str, np.ndarray], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The out= arrays a step may write into, once every one whose output's shape is known is
        checked against it (nothing is written when one is wrong): C-contiguous and aligned
        (kernels write through reshaped views), overlapping no feed (a step would overwrite what
        it reads) and no other out= array. Others get a copy after the run."""
        specs = {name: self.shapes.specs.get(name) for name in out}
        specs = {name: spec if spec is not None and spec.dtype in np.sctypeDict else None
                 for name, spec in specs.items()}
        for name, spec in specs.items():
            if spec is not None:
                self._check_out_spec(name, out[name], spec.shape, spec.dtype)
        usable = {}
        for name, array in out.items():
            if specs[name] is None or not (array.flags.c_contiguous and array.flags.aligned):
                continue
            others = [*feeds.values(), *(a for a in out.values() if a is not array)]
            if not any(np.may_share_memory(array, other) for other in others):
                usable[name] = array
        return usable

    def _run(self, feeds: dict[str, np.ndarray], output_names: list[str] | None,
             callback=None, out: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        out = out or {}
        shapes = {name: tuple(value.shape) for name, value in feeds.items()}
        wanted = output_names or [t.name for t in self.graph.outputs]
        extra = self._intermediates(wanted)
        if self.input_shapes != shapes or not extra <= self.extra_outputs:
            if self.input_shapes is not None:
                log.debug("input shapes %s, outputs %s: resizing", shapes, wanted)
            self.extra_outputs |= extra
            self.resize(shapes)
        values = RunValues(self.shapes.values, self._destinations(out, feeds) if out else {})
        values.update(feeds)
        observer = Observer(callback) if callback else None
        try:
            for segment in self.segments:
                try:
                    segment.backend.execute(segment, values, observer)
                except MemoryError as exc:
                    labels = ", ".join(step.label for step, _ in segment.steps[:3])
                    raise HostMemoryError(f"out of host memory running {labels}"
                                          f"{' ...' if len(segment.steps) > 3 else ''}: {exc}") from None
        except StopRun:
            return self._deliver(values, [name for name in wanted if name in values], out)
        if self.continuation is not None:
            later = [name for name in wanted if name not in values]
            values.update(self.continuation.run(values, later, callback))
            if callback is not None and any(name not in values for name in wanted):  # stopped
                return self._deliver(values, [name for name in wanted if name in values], out)
        return self._deliver(values, wanted, out)

    def _intermediates(self, wanted: list[str]) -> set[str]:
        """The names in wanted that are not graph outputs; each must be a tensor of the graph."""
        outputs = {t.name for t in self.graph.outputs}
        extra = {name for name in wanted if name not in outputs}
        if not extra or extra <= self.extra_outputs:  # nothing new to check (run() calls this every time)
            return extra
        unknown = sorted(extra - self.graph.tensor_names())
        if unknown:
            raise InputError(f"unknown output name(s) {unknown}: neither outputs of the model ({sorted(outputs)}) "
                             "nor tensors of its converted graph (the converter fuses and folds tensors away; "
                             "convert with wgnn.convert(model, optimize=False) to keep every one)")
        return extra

    def _check_feeds(self, feeds: dict) -> dict[str, np.ndarray]:
        return self._feed_checker.check(feeds)

    # ----------------------------------------------------------------- report
    def wait_background(self) -> int:
        """Wait for the work the last resize left to run in the background: on lavapipe's first-ever
        run, the code of kernels that replace quicker-to-generate ones, and the pipelines of
        variants a later resize may switch to (backends/wgpu). Runs are correct meanwhile, and take
        the replacements as they become ready; benchmarks wait first. Returns how many tasks there
        were."""
        with self._lock:
            return sum(backend.wait_background(self._executions_on(backend)) for backend in self.backends)

    def _executions_on(self, backend) -> list:
        return [execution for segment in self.segments if segment.backend is backend for _, execution in segment.steps]

    def report(self) -> dict:
        """What the last resize planned: ops per backend, fallbacks, memory, FLOPs."""
        if self.input_shapes is None:
            raise WgnnError("the session has not been resized yet: call resize() or run() first")
        per_backend: Counter = Counter()
        for segment in self.segments:
            per_backend[segment.backend.name] += len(segment.steps)
        return {
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "ops_per_backend": dict(per_backend),
            "steps": sum(per_backend.values()),
            "raster_steps": sum(1 for s in self.steps if s.op.op_type == "Raster"),
            "folded_nodes": sum(1 for n in self.shapes.nodes if n.folded),
            "segments": [(s.backend.name, len(s.steps)) for s in self.segments],
            "fallbacks": self.fallbacks,
            "conversions": sum(1 for seg in self.segments for s, _ in seg.steps if s.op.op_type == "Convert"),
            # Steps left with nothing to do: views, and concatenations their inputs were written into.
            "views": self.idle_steps,
            "transfers": {"uploads": sum(len(s.imports) for s in self.segments if s.backend.name != "numpy"),
                          "downloads": sum(len(s.exports) for s in self.segments if s.backend.name != "numpy")},
            "memory": {name: {"planned_peak_bytes": plan.peak_bytes, "naive_bytes": plan.naive_bytes,
                              "dedicated_bytes": plan.dedicated_bytes}
                       for name, plan in self.memory.items()},
            "flops": sum(n.flops for n in self.shapes.nodes if not n.folded),
            "sync_points": [self.continuation.describe()] if self.continuation else [],
            "providers_choice": self.providers_choice,
        }
