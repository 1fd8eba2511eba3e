"""The wgpu backend: tensors in GPU buffers, ops as WGSL compute dispatches, one command encoder
per segment.

Element types on the GPU: float32 as f32; int64/int32 as i32 (int64 narrowed at upload with an
overflow check); bool as u32 0/1. Every tensor element is 4 bytes.
"""
from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
from dataclasses import dataclass

import numpy as np

from ...engine.errors import AdapterError, DeviceError, DeviceMemoryError, InputError, WgnnError
from ...engine.ops.base import TensorSpec
from ..base import Backend, Execution, Step, register_backend, storage_host
from .context import get_context, is_lavapipe, lavapipe_threads, lavapipe_threads_chosen_by_environment
from .loader import STORAGE, TEXTURE_IN, TEXTURE_OUT, TEXTURE_OUT_HALF, UNIFORM, Kernel, pipeline_cache
from .tuning import kernel_grid, tuned_storage
from .warmup import params_traits, texture_traits

log = logging.getLogger("wgnn.wgpu")

GPU_DTYPES = {"float32": "f32", "int64": "i32", "int32": "i32", "bool": "u32"}
WORKGROUP = 64
# Constants bound as uniform buffers are declared as arrays of this many bytes (WebGPU's default
# max-uniform-buffer-binding-size, which every adapter has).
UNIFORM_ARRAY_BYTES = 65536
PARAM_INTS = 64  # size of the Params uniform block (prelude.wgsl)
# llvmpipe (Mesa's lavapipe and its OpenGL driver) ends every loop of an invocation once the
# invocation has run 65535 loop iterations in all, silently (measured: a 70000-trip loop counts to
# 65535; loops after it run once). Kernels whose loops could pass this run on the CPU there.
LLVMPIPE_LOOP_LIMIT = 65535
LOOP_BUDGET = 60000
# Index validation (docs/reliability.md): kernels that meet an index they cannot use report it in
# the backend's status buffer, 4 u32 words: [flag, status id of the step, check code, value].
QUICK_FIRST_ENV = "WGNN_QUICK_FIRST"


def quick_first_enabled() -> bool:
    """Whether steps may run a quicker-to-generate kernel until their preferred one's code is ready
    (GpuExecution.quick_first); WGNN_QUICK_FIRST=0 turns it off."""
    return os.environ.get(QUICK_FIRST_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def forced_split_size(variable: str, size: str) -> int | None:
    """The piece size an environment variable forces on a split kernel (0: no split), or None where
    it is not set. size says what it counts, e.g. "keys per split", for the error."""
    chosen = os.environ.get(variable, "").strip()
    if chosen and not chosen.isdigit():
        raise WgnnError(f"{variable}={chosen!r}: expected {size} (0: no split)")
    return int(chosen) if chosen else None


STATUS_SLOT = PARAM_INTS - 1  # params slot holding a validating dispatch's status id
STATUS_BYTES = 16
STATUS_WGSL = """// Flags a bad index for the host (WgpuBackend._raise_status): the first report of a run keeps its
// step, check code and value; later reports only find the flag set.
fn report_bad(check: u32, value: i32) {
    if (atomicLoad(&status[0]) == 0u && atomicExchange(&status[0], 1u) == 0u) {
        atomicStore(&status[1], pu(63u));
        atomicStore(&status[2], check);
        atomicStore(&status[3], bitcast<u32>(value));
    }
}"""

EXECUTIONS: dict[str, type[GpuExecution]] = {}


def gpu_kernel(op_type: str):
    """Register a GpuExecution subclass as the GPU implementation of op_type."""

    def register(cls):
        if op_type in EXECUTIONS:
            raise RuntimeError(f"GPU kernel for {op_type} registered twice")
        EXECUTIONS[op_type] = cls
        return cls

    return register


def wgsl_type(dtype: str) -> str:
    return GPU_DTYPES[dtype]


class Dispatch:
    """One prepared dispatch: pipeline, bind group and workgroup counts; `traits`, what the driver's
    code may depend on in its bindings (warmup.texture_traits, params_traits). `upgrade`: a dispatch
    computing the same, faster, that replaces this one once `upgrade_ready` is done (the driver has
    its code: GpuExecution.quick_first)."""

    __slots__ = ("bind_group", "groups", "kernel", "label", "traits", "upgrade", "upgrade_ready")

    def __init__(self, kernel: Kernel, bind_group, groups: tuple[int, int, int], label: str, traits: tuple = ()):
        self.kernel, self.bind_group, self.groups, self.label = kernel, bind_group, groups, label
        self.traits = traits
        self.upgrade: Dispatch | None = None
        self.upgrade_ready = None  # a Future


class GpuExecution(Execution):
    """Base of GPU ops: prepare() builds dispatches with self.dispatch(...); encode() replays them."""

    status_id = 0  # set when a dispatch binds the status buffer: the id its kernel reports
    checks_status = False  # the status must be read after the segment (see dispatch(status=...))

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        """Override to refuse shapes/attributes the kernel does not handle."""
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        """Upper bound of the loop iterations one invocation runs (loops with constant trip
        counts excepted: drivers unroll them). Checked against adapters' loop limits."""
        return 0

    @classmethod
    def linear_inputs(cls, step: Step) -> tuple[int, ...]:
        """Inputs (of layout_inputs) the kernel's NC4HW4 variant may read from a linear tensor
        through its accessor, so that no conversion step precedes it (the layout pass keeps them
        linear unless they were converted for another consumer already)."""
        return ()

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        """Layouts the kernel runs its feature maps in, preferred first ("linear", "nc4hw4").
        A kernel preferring linear but accepting nc4hw4 follows the layout of its inputs."""
        return ("linear",)

    @classmethod
    def layout_inputs(cls, step: Step) -> tuple[int, ...]:
        """Input indices read in the step's layout; other inputs are always linear."""
        return (0,)

    def __init__(self, backend: WgpuBackend, step: Step):
        super().__init__(backend, step)
        self.dispatches: list[Dispatch] = []
        self.upgrades_pending = False  # a dispatch waits to be replaced by its upgrade (quick_first)
        self.layout = "linear"  # set by the layout pass before prepare()

    def binding(self, name: str) -> dict:
        return self.backend.binding(name)

    def is_view(self) -> bool:
        """Whether the session placed this step's output on its view_range(): nothing to run."""
        view = self.view_range()
        return view is not None and self.backend.shares.get(self.step.outputs[0]) == view

    def packed_constant(self, key: str, source: np.ndarray, pack, *, uniform: bool = False) -> str:
        """A GPU copy of pack(source) (e.g. weights repacked for the kernel), made once per
        source array and kept across resizes; returns a tensor name to pass to dispatch().
        uniform: bind it as a uniform buffer (at most UNIFORM_ARRAY_BYTES)."""
        return self.backend.packed_constant(f"{self.step.node.name}/{key}", source, pack, uniform=uniform)

    def status_error(self, check: int, value: int) -> str:
        """The message for a bad index its kernel reported (check code and value as the kernel
        passed them to report_bad); kernels that validate override it."""
        return f"{self.step.label}: bad index {value} (check {check})"

    def status_mode(self, *inputs: int) -> str:
        """dispatch(status=...) for a kernel validating the given inputs: "bind" when all are
        absent or known at resize (the shape function checked them; the kernel cannot flag), else
        "check"."""
        values, names = self.step.input_values or [], self.step.inputs
        known = all(i >= len(names) or not names[i] or (i < len(values) and values[i] is not None) for i in inputs)
        return "bind" if known else "check"

    def dispatch(self, path: str, tensors: list[str], params: list[int | float], invocations: int, *,
                 text: dict[str, str] | None = None, constants: dict | None = None,
                 status: str | None = None, preferred: bool = False) -> Dispatch | None:
        """Prepare one dispatch of kernels_wgsl/<path> over `invocations` invocations, binding the
        named tensors in order and then the params uniform (ints; floats are bit-cast). Returns it
        (None for no invocations: nothing to dispatch).

        preferred: one that quick_first() may replace by a quicker one until its code is ready (its
        pipeline's compile is then deferred too).

        status: "check" or "bind" for kernels that validate indices: the backend's status buffer
        is bound after the tensors (declared `var<storage, read_write> status: array<atomic<u32>>`),
        {{REPORT_BAD}} becomes report_bad(check, value) and params slot 63 the step's status id.
        "check" has the status read after the segment runs (a report raises InputError with
        status_error()); "bind" skips that read, for indices already checked at resize."""
        if invocations <= 0:
            return None
        backend = self.backend
        kinds = self._binding_kinds(tensors)
        if status is not None:
            if len(params) > STATUS_SLOT:
                raise WgnnError(f"{self.step.label}: params slot {STATUS_SLOT} is the status id")
            if not self.status_id:
                self.status_id = next(backend.status_ids)
            self.checks_status = self.checks_status or status == "check"
            params = list(params) + [0] * (STATUS_SLOT - len(params)) + [self.status_id]
            text = {**(text or {}), "REPORT_BAD": STATUS_WGSL}
            kinds.append(STORAGE)
        entries = [{"binding": i, "resource": self.binding(name)} for i, name in enumerate(tensors)]
        traits = [texture_traits(entry["resource"]) for entry in entries]  # the status binding: a buffer
        traits += [None] * (len(kinds) - len(traits)) + [params_traits(pack_params(params))]
        kernel = self._pipeline(path, kinds, text, constants, deferred=preferred)
        uniform = backend.uniform(params, f"{self.step.label} params")
        if status is not None:
            entries.append({"binding": len(entries), "resource": backend.status_binding()})
        entries.append({"binding": len(entries), "resource": {"buffer": uniform, "offset": 0, "size": uniform.size}})
        try:
            bind_group = backend.device.create_bind_group(layout=kernel.layout, entries=entries)
        except Exception as exc:
            raise WgnnError(f"{self.step.label}: could not bind kernel {path}: {exc}") from None
        grid = kernel_grid(backend, invocations, kernel)
        prepared = Dispatch(kernel, bind_group, grid, self.step.label, tuple(traits))
        self.dispatches.append(prepared)
        return prepared

    def compile(self, path: str, tensors: list[str], *, text: dict[str, str] | None = None,
                constants: dict | None = None) -> Kernel:
        """The pipeline a dispatch of kernels_wgsl/<path> binding `tensors` would run, compiled (or
        found) without dispatching: a variant a resize may switch to, so that the resize compiles
        nothing. Its compile is deferred past the work the first run needs (loader.PipelineCache)."""
        return self._pipeline(path, self._binding_kinds(tensors), text, constants, deferred=True)

    def quick_first(self, preferred: Dispatch | None, quick) -> bool:
        """Where the driver would generate the code of `preferred` (the dispatch just prepared, with
        preferred=True; None: nothing dispatched) at its first run and does not hold it yet
        (lavapipe on a machine's first-ever run: seconds for a big kernel), run the dispatch quick()
        prepares instead, one computing the same whose code is quicker to generate, until the
        preferred one's pipeline and code are ready: both are made after the session's prepare, in
        the background, and the first run recorded after that runs the preferred dispatch
        (WgpuBackend.finish_prepare, take_upgrades). Returns whether quick() ran."""
        if preferred is None:
            return False
        if not quick_first_enabled() or self.backend.pipelines.has_driver_code(preferred.kernel, preferred.traits):
            self._pipeline_needed(preferred.kernel)
            return False
        self.dispatches.remove(preferred)
        quick()
        self.dispatches[-1].upgrade = preferred
        self.upgrades_pending = True
        return True

    def _pipeline_needed(self, kernel: Kernel) -> None:
        """A kernel asked for deferred, needed by the first run after all: compile it now, and have
        the resize wait for it."""
        self.backend.pipelines.start_now(kernel)
        if kernel.pending:
            self.backend.requested.append((self.step.label, kernel))

    def _binding_kinds(self, tensors: list[str]) -> list[str]:
        written = set(self.step.outputs)
        return [self.backend.binding_kind(name, name in written) for name in tensors]

    def _pipeline(self, path: str, kinds: list[str], text: dict[str, str] | None, constants: dict | None, *,
                  deferred: bool = False) -> Kernel:
        try:
            kernel = self.backend.pipelines.get(path, tuple(kinds + [UNIFORM]), params=text,
                                                constants={"WG": WORKGROUP, **(constants or {})}, deferred=deferred)
        except WgnnError as exc:
            raise type(exc)(f"{self.step.label}: {exc}") from None
        if kernel.pending and not deferred:
            self.backend.requested.append((self.step.label, kernel))
        return kernel

    def take_upgrades(self) -> None:
        """Replace each quick dispatch whose preferred one is ready (its pipeline and the driver's
        code: quick_first) by that one."""
        if not self.upgrades_pending:  # recording a run pays one attribute read
            return
        for i, d in enumerate(self.dispatches):
            if d.upgrade is not None and d.upgrade_ready is not None and d.upgrade_ready.done() \
                    and d.upgrade.kernel.compiled:
                self.dispatches[i] = d.upgrade
        self.upgrades_pending = any(d.upgrade is not None for d in self.dispatches)

    def encode(self, recorder) -> None:
        self.take_upgrades()
        for d in self.dispatches:
            recorder.set_pipeline(d.kernel.pipeline)
            recorder.set_bind_group(0, d.bind_group)
            recorder.dispatch_workgroups(*d.groups)


def pack_params(values: list[int | float]) -> np.ndarray:
    out = np.zeros(PARAM_INTS, np.int32)
    if len(values) > PARAM_INTS:
        raise WgnnError(f"kernel parameter block overflows: {len(values)} > {PARAM_INTS}")
    for i, v in enumerate(values):
        if isinstance(v, (float, np.floating)):  # np.float32 too: it is no Python float, and int32() truncates it
            out[i] = np.float32(v).view(np.int32)
            continue
        # np.int32() of a numpy integer wraps silently; of a Python int it raises OverflowError.
        if not -(2 ** 31) <= int(v) < 2 ** 31:
            raise WgnnError(f"kernel parameter {i} = {int(v)} does not fit the shader's 32-bit integers")
        out[i] = int(v)
    return out


def split_arenas(pool, lifetimes, most: int, alignment: int) -> list[tuple[int, dict[str, int]]]:
    """The pooled tensors in arenas of at most `most` bytes (the adapter's largest buffer): those
    placed past the limit are planned again, among themselves, in a further arena. Any subset of
    a valid plan is valid, so each arena keeps its tensors' lifetimes apart."""
    from ...engine.memory import plan_memory

    sizes = {t.name: t.nbytes for t in lifetimes}
    arenas: list[tuple[int, dict[str, int]]] = []
    remaining, plan = lifetimes, pool
    while remaining:
        fits = {name: offset for name, offset in plan.offsets.items() if offset + sizes[name] <= most}
        if not fits:
            largest = max(remaining, key=lambda t: t.nbytes)
            raise DeviceMemoryError(f'tensor "{largest.name}" needs {largest.nbytes} bytes, more than the '
                                    f"adapter's largest buffer ({most} bytes)")
        arenas.append((max(offset + sizes[name] for name, offset in fits.items()), fits))
        remaining = [t for t in remaining if t.name not in fits]
        if remaining:
            plan = plan_memory(remaining, alignment)
    return arenas or [(0, {})]


# Shaders index tensors with 32-bit integers (and take sizes as i32 parameters).
MAX_GPU_ELEMENTS = 2 ** 31 - 1
# int64 tensors live on the GPU as i32: exact while values fit (uploads and constants are checked),
# but these kinds compute new values that can pass 2^31 where the numpy backend's int64 would not.
# (Kinds that only select, move or compare values, or ArgMax indices, stay exact.)
INT64_OVERFLOW_KINDS = {
    "Binary": {"add", "sub", "mul", "div", "pow", "prelu"},  # div: INT_MIN / -1
    "Unary": {"neg", "abs"},  # of INT_MIN
    "Reduce": {"sum", "mean", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp"},
    "MatMul": None,  # any kind
}


def overflow_reason(step: Step) -> str | None:
    """Why the GPU's 32-bit arithmetic could silently give a different answer than the numpy
    backend for this step (then it runs on numpy, reported as a fallback), or None."""
    specs = [(n, s) for n, s in zip(step.inputs, step.input_specs) if s is not None]
    specs += list(zip(step.outputs, step.output_specs))
    for name, spec in specs:
        if spec.size > MAX_GPU_ELEMENTS:
            return (f"tensor {name or '?'} has {spec.size} elements, a count that does not fit the 32-bit "
                    f"indices of GPU kernels (at most {MAX_GPU_ELEMENTS})")
    if not any(spec.dtype == "int64" for spec in step.output_specs):
        return None
    op_type = step.op.op_type
    if op_type in INT64_OVERFLOW_KINDS:
        kinds = INT64_OVERFLOW_KINDS[op_type]
        kind = step.attrs.get("kind")
        if kinds is None or kind in kinds:
            return (f"int64 {op_type}{'.' + kind if isinstance(kind, str) else ''}: a result that does not fit "
                    "the GPU's int32 would wrap silently")
    if op_type == "Cast" and step.input_specs[0] is not None and step.input_specs[0].dtype.startswith("float"):
        return "float -> int64 Cast: a value that does not fit the GPU's int32 would saturate silently"
    return None


# On lavapipe, handing a dispatch to the worker threads and waiting for them costs ~40 us more than
# running it on the driver's queue thread (docs/performance.md, "Lavapipe's worker threads"); the
# workers win it back on dispatches of more work. Measured on 2 cores, zoo models at 32 to 128
# pixels, sessions on both devices alternating in one process (0 / 2 workers): unet x0.95 at 0.75
# MFLOP per step, x1.39 at 3.0; resnet x0.93 at 1.14, x1.22 at 2.57; mobilenetv2 x0.81 at 0.55,
# x1.16 at 2.18.
THREADLESS_FLOPS_PER_STEP = 1.2e6


def threadless_flops_limit(workers: int | None) -> float:
    """FLOPs per step under which a device without lavapipe worker threads runs a model faster than
    one with `workers`. W workers save a step's work w the fraction (1 - 1/W) of it; on 2 workers
    that is w / 2, so the limit measured there scales by W / (2 (W - 1)); one worker saves nothing."""
    if not workers:
        return 0.0
    if workers == 1:
        return math.inf
    return THREADLESS_FLOPS_PER_STEP * workers / (2 * (workers - 1))


# How far past the limit a later resize's work per step must be to move a session to the other device.
MOVE_FACTOR = 2.0


def requested_lavapipe_workers(config) -> int | None:
    """The worker count a session asks for by name (None: the process's own, until settle_device)."""
    setting = getattr(config, "lavapipe_threads", "auto")
    return None if setting == "auto" else setting


@register_backend
class WgpuBackend(Backend):
    name = "wgpu"

    def __init__(self, config=None):
        super().__init__(config)
        # fp16: NC4HW4 feature maps are stored in 16-bit floats (rgba16float textures, or f16 buffers
        # where the adapter has shader-f16); arithmetic and linear tensors stay f32.
        self.half = getattr(config, "precision", "fp32") in ("fp16", "fp16-arith")
        self.texel_bytes = 8 if self.half else 16
        self._bind(get_context(getattr(config, "adapter", None), requested_lavapipe_workers(config)))
        self.device_choice: dict | None = None  # settle_device's choice of lavapipe workers, and why
        self.locations: dict[str, tuple[object, int, int]] = {}  # tensor -> (buffer, offset, size)
        self.specs: dict[str, TensorSpec] = {}
        self.placements: dict = {}  # tensor -> layout.Placement (absent: linear buffer)
        self.shares: dict[str, tuple[str, int]] = {}  # tensor -> (host, byte offset) (plan_memory)
        self.pending_constants: dict[str, np.ndarray] = {}
        self.profiler = None  # profiler.GpuProfiler: opt-in per-step timing (enable_profiling)
        self.status_ids = itertools.count(1)
        self._drop_device_resources()
        self.status_reads = 0  # segments whose status was read back (models without validating ops: 0)
        self.requested: list = []  # (step label, Kernel) asked for since the last finish_prepare
        self.background: list = []  # Futures: deferred compiles and warm-ups, after a prepare

    def _bind(self, context) -> None:
        """Take context's device: its limits, pipeline cache and the storage choice follow from it."""
        storage = getattr(self.config, "storage", "auto")
        if self.half and storage == "buffer" and "shader-f16" not in context.features:
            raise WgnnError(f"precision fp16 with storage='buffer' needs the shader-f16 feature, which "
                            f"{context.name} lacks; use storage='texture' or 'auto'")
        self.context = context
        # NC4HW4 storage: "auto" keeps fp32 in buffers until a per-adapter measurement says otherwise,
        # and fp16 in textures (every adapter has rgba16float).
        self.nc4hw4_storage = storage if storage != "auto" else tuned_storage(context, self.half)
        self.device = context.device
        self.wgpu = context.wgpu
        self.pipelines = pipeline_cache(context)
        self.alignment = max(16, context.limits.get("min-storage-buffer-offset-alignment", 256))
        self.max_binding = context.limits.get("max-storage-buffer-binding-size", 1 << 27)
        self.max_buffer = context.limits.get("max-buffer-size", 1 << 28)
        self.max_groups = context.limits.get("max-compute-workgroups-per-dimension", 65535)
        self.loop_budget = LOOP_BUDGET if "llvmpipe" in context.info.name.lower() else None  # Vulkan and GL

    def settle_device(self, steps) -> None:
        """lavapipe_threads "auto" on lavapipe: a device without worker threads when the steps it
        can run average under THREADLESS_FLOPS_PER_STEP (scaled for the process's worker count),
        else the process's own. A later resize moves the session only when its work per step has
        crossed the limit by MOVE_FACTOR (a move uploads the weights again and compiles the
        pipelines the other device lacks)."""
        choice = self.device_choice
        if choice is not None and "flops_per_step" not in choice:
            return  # not the session's to choose
        context = self.context
        setting = getattr(self.config, "lavapipe_threads", "auto")
        if not is_lavapipe(context.info):
            self.device_choice = {"lavapipe_threads": None, "why": "not a lavapipe adapter"}
            return
        if setting != "auto":
            self.device_choice = {"lavapipe_threads": context.lavapipe_threads, "why": "set for the session"}
            return
        if lavapipe_threads_chosen_by_environment():
            self.device_choice = {"lavapipe_threads": context.lavapipe_threads,
                                  "why": "set for the process (LP_NUM_THREADS)"}
            return
        runnable = [step for step in steps if self.unsupported_reason(step) is None]
        per_step = sum(step.flops or 0 for step in runnable) / max(1, len(runnable))
        process_workers = lavapipe_threads(context.info)
        limit = threadless_flops_limit(process_workers)
        if choice is None:
            workers = 0 if per_step < limit else process_workers
        elif context.lavapipe_threads == 0:
            workers = process_workers if per_step >= limit * MOVE_FACTOR else 0
        else:
            workers = 0 if per_step < limit / MOVE_FACTOR else context.lavapipe_threads
        if choice is not None and workers == context.lavapipe_threads:
            return  # the session stays, with the reason it came
        why = f"{per_step / 1e6:.2f} MFLOP per step, {'under' if workers == 0 else 'at or over'} {limit / 1e6:.2f}"
        if workers != context.lavapipe_threads:
            try:
                moved = get_context(context.index, workers)
            except AdapterError as exc:  # e.g. a wgpu build whose instances cannot be made this way
                log.info("the session keeps its lavapipe device: %s", exc)
                self.device_choice = {"lavapipe_threads": context.lavapipe_threads,
                                      "why": f"no device with {workers} workers: {exc}"}
                return
            if choice is None:
                self._bind(moved)
            else:
                self._move(moved)
        self.device_choice = {"lavapipe_threads": workers, "flops_per_step": per_step, "limit": limit, "why": why}
        log.info("lavapipe device with %d worker threads (%s)%s", workers, why, "" if choice is None else ": moved")

    def _drop_device_resources(self) -> None:
        """Forget the GPU objects kept across resizes (made again on first use): a new backend's
        empty tables, or what a move leaves on the old device."""
        self.constant_buffers: dict[str, tuple[int, object]] = {}  # name -> (id(value), buffer)
        self.packed: dict[str, tuple[np.ndarray, object, int]] = {}  # repacked constants by name
        self.uniform_tensors: set[str] = set()  # packed constants bound as uniform buffers
        self.status_buffers = None  # (status, mappable copy), made when a kernel first binds it
        self._staging = None  # the mappable buffer outputs come back through (grown on demand)
        self._recorded_runs: dict[int, _RecordedRun] = {}  # id(segment) -> its next run, recorded ahead

    def _move(self, context) -> None:
        """Leave this device for context's at a resize: what lives on the old one is dropped (weights
        upload again when first bound; memory is planned anew by the resize anyway)."""
        self.wait_background()  # compiles for the old device
        self._drop_device_resources()
        profiled = self.profiler.capacity if self.profiler is not None else None
        self._bind(context)
        if profiled is not None:
            self.enable_profiling(profiled)

    def finish_prepare(self, executions=()) -> None:
        """Have the driver generate the code of the kernels the executions dispatch, where it would
        do so lazily at their first run (warmup.py; prepares may have compiled more, and dropped
        dispatches, for a later resize), then wait for those and for the pipelines the steps asked
        for (they compile side by side, loader.py); a kernel that failed raises its
        KernelCompileError, naming the first step that asked."""
        requested, self.requested = self.requested, []
        pipelines = self.pipelines
        dispatches = [d for execution in executions for d in getattr(execution, "dispatches", ())]
        for d in dispatches:
            if pipelines.warm(d.kernel, d.traits) is not None:
                requested.append((d.label, d.kernel))
        for d in dispatches:
            if d.upgrade is not None:
                d.upgrade_ready = pipelines.warm(d.upgrade.kernel, d.upgrade.traits, deferred=True)
        self.background += pipelines.start_deferred()
        for label, kernel in requested:
            try:
                kernel.wait()
            except WgnnError as exc:
                raise type(exc)(f"{label}: {exc}") from None

    def wait_background(self, executions=()) -> int:
        """Wait for the work prepares left to run in the background (variants a resize may switch to,
        the code of kernels that replace quicker ones); the executions take their replacements, and
        the next run records anew. Returns how many tasks there were."""
        background, self.background = self.background, []
        for future in background:
            with contextlib.suppress(WgnnError):  # a variant that fails raises in the resize that needs it
                future.result()
        for execution in executions:
            if isinstance(execution, GpuExecution):
                execution.take_upgrades()
        if background:
            self._recorded_runs.clear()
        return len(background)

    def enable_profiling(self, steps: int):
        """Time each step of the next runs (wgnn bench --per-op); `steps` GPU steps at most per
        segment. The query set and buffers are made here, so runs still allocate nothing."""
        from .profiler import GpuProfiler

        self.profiler = GpuProfiler(self, steps)
        return self.profiler

    def disable_profiling(self) -> None:
        self.profiler = None

    # ------------------------------------------------------------------ scheduling
    def unsupported_reason(self, step: Step) -> str | None:
        cls = EXECUTIONS.get(step.op.op_type)
        if cls is None:
            return "no GPU kernel"
        for spec in list(step.input_specs) + list(step.output_specs):
            if spec is not None and spec.dtype not in GPU_DTYPES:
                return f"dtype {spec.dtype} not supported on the GPU"
        for name, value in zip(step.inputs, step.input_values or []):
            if value is not None and value.dtype == np.int64 and value.size and not _fits_int32(value):
                return f"int64 constant {name} does not fit the GPU's int32"
        overflow = overflow_reason(step)
        if overflow is not None:
            return overflow
        for name, spec in [*zip(step.inputs, step.input_specs), *zip(step.outputs, step.output_specs)]:
            if spec is not None and self.tensor_bytes(name, spec) > self.max_binding:
                return (f"tensor {name} ({self.tensor_bytes(name, spec)} bytes) exceeds the adapter's "
                        f"{self.max_binding}-byte storage binding limit")
        reason = cls.unsupported_reason(step)
        if reason is None and self.loop_budget is not None:
            iterations = cls.loop_iterations(step)
            if iterations > self.loop_budget:
                reason = (f"needs ~{iterations} loop iterations per invocation; this driver stops loops "
                          f"after {LLVMPIPE_LOOP_LIMIT}")
        return reason

    def create_execution(self, step: Step) -> Execution:
        return EXECUTIONS[step.op.op_type](self, step)

    # ------------------------------------------------------------------ memory
    def assign_layouts(self, segments, specs) -> None:
        from .layout import LayoutPlanner

        planner = LayoutPlanner(self, specs)
        planner.run(segments)
        self.placements = planner.placements

    def placement(self, name: str):
        from .layout import LINEAR_BUFFER

        return self.placements.get(name, LINEAR_BUFFER)

    def texture_limit_reason(self, spec: TensorSpec) -> str | None:
        from .layout import texture_extent

        width, height, layers = texture_extent(spec)
        side = self.context.limits.get("max-texture-dimension-2d", 8192)
        most_layers = self.context.limits.get("max-texture-array-layers", 256)
        if width > side or height > side:
            return f"{width}x{height} exceeds the adapter's {side} texture size"
        if layers > most_layers:
            return f"{layers} layers exceed the adapter's {most_layers} texture layers"
        return None

    def binding_kind(self, name: str, written: bool) -> str:
        placement = self.placement(name)
        if placement.storage == "texture":
            if not written:
                return TEXTURE_IN
            return TEXTURE_OUT_HALF if placement.half else TEXTURE_OUT
        return UNIFORM if name in self.uniform_tensors else STORAGE

    def tensor_bytes(self, name: str, spec: TensorSpec) -> int:
        from .layout import nc4hw4_bytes

        placement = self.placement(name)
        if placement.storage == "texture":
            return 0  # textures are pooled apart from the buffer arena
        return nc4hw4_bytes(spec, placement.half) if placement.layout == "nc4hw4" else spec.size * 4

    def _texture(self, spec: TensorSpec, label: str):
        from .layout import texture_extent

        usage = (self.wgpu.TextureUsage.TEXTURE_BINDING | self.wgpu.TextureUsage.STORAGE_BINDING
                 | self.wgpu.TextureUsage.COPY_SRC | self.wgpu.TextureUsage.COPY_DST)
        texture_format = "rgba16float" if self.half else "rgba32float"
        try:
            texture = self.device.create_texture(size=texture_extent(spec), format=texture_format, usage=usage,
                                                 dimension="2d", label=label)
        except Exception as exc:
            raise WgnnError(f"GPU memory: could not create a texture for {label} on {self.context.name}: {exc}") \
                from None
        return texture, texture.create_view(dimension="2d-array")

    def _buffer(self, size: int, label: str, needed: str = "", *, uniform: bool = False):
        usage = self.wgpu.BufferUsage.STORAGE | self.wgpu.BufferUsage.COPY_SRC | self.wgpu.BufferUsage.COPY_DST
        if uniform:
            usage |= self.wgpu.BufferUsage.UNIFORM
        try:
            return self.device.create_buffer(size=max(16, _round4(size)), usage=usage, label=label)
        except Exception as exc:
            detail = " ".join(str(exc).split())
            raise DeviceMemoryError(f"GPU memory: could not allocate {size} bytes for {label} on "
                                    f"{self.context.name}{' (' + needed + ')' if needed else ''}: {detail}. "
                                    "Try precision='fp16', smaller inputs, or the numpy provider") from None

    def plan_memory(self, specs, lifetimes, dedicated, constants, *, shares=None):
        textured = {t.name for t in lifetimes if self.placement(t.name).storage == "texture"}
        buffered = [t for t in lifetimes if t.name not in textured]
        pool = super().plan_memory(specs, buffered, dedicated, constants)
        self.specs = specs
        self.locations = {}
        self.requested = []  # a new resize: what an earlier one that failed half-way asked for is not its business
        self._recorded_runs.clear()  # they bind the old plan's buffers
        arenas = split_arenas(pool, buffered, self.max_buffer, self.alignment)
        pool.peak_bytes = sum(size for size, _ in arenas)
        self.arenas = []
        for size, offsets in arenas:
            arena = self._buffer(size, f"wgnn arena {len(self.arenas)}",
                                 needed=f"the plan needs {pool.peak_bytes} bytes of pooled buffers")
            self.arenas.append(arena)
            for name, offset in offsets.items():
                self.locations[name] = (arena, offset, max(4, self.tensor_bytes(name, specs[name])))
        self._pool_textures([t for t in lifetimes if t.name in textured], pool)
        for name in dedicated:
            if self.placement(name).storage == "texture":
                from .layout import texture_extent

                self.locations[name] = self._texture(specs[name], name)
                pool.dedicated_bytes += math.prod(texture_extent(specs[name])) * self.texel_bytes
                continue
            size = max(4, self.tensor_bytes(name, specs[name]))
            pool.dedicated_bytes += size
            self.locations[name] = (self._buffer(size, name), 0, size)
        # Hosted tensors (views, inputs written into a concatenation) at their host's offset plus
        # theirs; hosts may be hosted in turn. Their executions checked the layouts agree.
        self.shares = dict(shares or {})
        for name in self.shares:
            host, delta = storage_host(name, self.shares)
            buffer, offset, _ = self.locations[host]
            self.locations[name] = buffer, offset + delta, max(4, self.tensor_bytes(name, specs[name]))
        # Constants upload when a dispatch first binds them: weights a kernel only reads repacked
        # (packed_constant) never take GPU memory in their original layout.
        self.pending_constants = dict(constants)
        self.memory_plan = pool
        return pool

    def packed_constant(self, name: str, source: np.ndarray, pack, *, uniform: bool = False) -> str:
        """See Execution.packed_constant; uniform: bound as a uniform buffer of UNIFORM_ARRAY_BYTES
        (the caller checked the data fits), zero-padded to that size, the size its kernels declare."""
        cached = self.packed.get(name)
        if cached is None or cached[0] is not source:
            data = np.asarray(pack(source))
            data = to_gpu_array(name, data) if data.dtype != np.float32 else data.reshape(-1)
            size = UNIFORM_ARRAY_BYTES if uniform else data.nbytes
            buffer = self._buffer(size, name, uniform=uniform)
            self.device.queue.write_buffer(buffer, 0, data.tobytes() if data.nbytes else b"\0" * 4)
            cached = self.packed[name] = (source, buffer, max(4, size))
            if uniform:
                self.uniform_tensors.add(name)
        if name not in self.locations:
            self.memory_plan.dedicated_bytes += cached[2]
        self.locations[name] = (cached[1], 0, cached[2])
        return name

    def _pool_textures(self, lifetimes, pool) -> None:
        """Textures of equal extent are reused by tensors whose lifetimes do not overlap."""
        from .layout import texture_extent

        free: list[tuple[tuple, int, tuple]] = []  # (extent, last use, (texture, view))
        for item in sorted(lifetimes, key=lambda t: t.first):
            extent = texture_extent(self.specs[item.name])
            nbytes = math.prod(extent) * self.texel_bytes
            pool.naive_bytes += nbytes
            reuse = next((i for i, (e, last, _) in enumerate(free) if e == extent and last < item.first), None)
            if reuse is None:
                resource = self._texture(self.specs[item.name], item.name)
                pool.peak_bytes += nbytes
            else:
                resource = free.pop(reuse)[2]
            self.locations[item.name] = resource
            free.append((extent, item.last, resource))

    def _constant(self, name: str, value: np.ndarray):
        # Initializers keep their buffers across resizes; values computed at resize are re-uploaded.
        cached = self.constant_buffers.get(name)
        nbytes = max(4, value.size * 4)
        if cached is not None and cached[0] == id(value):
            return cached[1], 0, nbytes
        data = to_gpu_array(name, value)
        buffer = self._buffer(data.nbytes, name)
        self.device.queue.write_buffer(buffer, 0, data.tobytes() if data.nbytes else b"\0" * 4)
        self.constant_buffers[name] = (id(value), buffer)
        return buffer, 0, nbytes

    def binding(self, name: str):
        if name not in self.locations and name in self.pending_constants:
            self.locations[name] = self._constant(name, self.pending_constants[name])
            self.memory_plan.dedicated_bytes += self.locations[name][2]
        if self.placement(name).storage == "texture":
            return self.locations[name][1]  # the 2-D array view
        buffer, offset, size = self.locations[name]
        return {"buffer": buffer, "offset": offset, "size": _round4(size)}

    def uniform(self, params: list, label: str):
        data = pack_params(params)
        buffer = self.device.create_buffer(size=data.nbytes, label=label,
                                           usage=self.wgpu.BufferUsage.UNIFORM | self.wgpu.BufferUsage.COPY_DST)
        self.device.queue.write_buffer(buffer, 0, data.tobytes())
        return buffer

    def grid(self, invocations: int) -> tuple[int, int, int]:
        groups = math.ceil(invocations / WORKGROUP)
        if groups <= self.max_groups:
            return (groups, 1, 1)
        rows = math.ceil(groups / self.max_groups)
        if rows > self.max_groups:
            raise WgnnError(f"{invocations} invocations exceed the adapter's dispatch limits")
        return (self.max_groups, rows, 1)

    # ------------------------------------------------------------------ running
    def execute(self, segment, values, observer=None) -> None:
        profiler = None if observer else self.profiler
        queue = self.device.queue
        with self.context.lock:
            started = profiler.start() if profiler else None
            for name in segment.imports:
                data = to_gpu_array(name, values[name])
                if data.nbytes:
                    buffer, offset, _ = self.locations[name]
                    try:
                        queue.write_buffer(buffer, offset, data)
                    except Exception as exc:
                        raise self._device_error(exc, [], f'uploading tensor "{name}"') from None
            executions = [execution for _, execution in segment.steps]
            if observer:  # debug runs: one submission per step, so tensors can be read in between
                for step, execution in segment.steps:
                    observer.before(step, self, values)
                    if self._submit([execution]):
                        self._raise_status([execution], self._read_status())
                    observer.after(step, self, values)
                check = False
                for name in segment.exports:
                    values[name] = self._download_checked(name)
            else:
                check = self._reset_status(executions)
                if profiler:
                    encoder = self.device.create_command_encoder()
                    profiler.encode(encoder, segment)
                    staged = self._stage(encoder, segment.exports, check)
                    self._finish(encoder, executions)
                else:
                    run = self._recorded_runs.pop(id(segment), None)
                    if run is None or run.segment is not segment:
                        run = self._record_run(segment, executions, check)
                    self._submit_recorded(run, executions)
                    self._record_ahead(segment, executions, check)
                    staged = run.staged
                words = self._read_staged(staged, values)
                for name in segment.exports:
                    if name not in staged.offsets:  # textures, empty tensors
                        values[name] = self._download_checked(name)
                if check:
                    self._raise_status(executions, words)
            if profiler:
                profiler.collect(segment, started)

    # Outputs and the index status come back through one mappable buffer, copied to in the run's
    # own submission: one map per run instead of a submission and a temporary buffer per output
    # (queue.read_buffer) plus a second map for the status (0.26 ms of bert's 3.2 ms on lavapipe).
    def _stage(self, encoder, exports, check: bool) -> _Staged:
        """Record copies of the buffer-stored exports (and the status, with check) into the
        staging buffer; texture exports are read on their own after the run."""
        offsets, total = {}, 0
        for name in exports:
            if self.specs[name].size and self.placement(name).storage != "texture":
                offsets[name] = total
                total += _round4(self.locations[name][2])
        status_offset = total if check else None
        total += STATUS_BYTES if check else 0
        if not total:
            return _Staged(None, offsets, None, 0)
        if self._staging is None or self._staging.size < _round8(total):
            if self._staging is not None:
                self._recorded_runs.clear()  # they copy into the staging buffer about to go
                self._staging.destroy()
            self._staging = self.device.create_buffer(
                size=max(16, 1 << (total - 1).bit_length()), label="wgnn readback",
                usage=self.wgpu.BufferUsage.MAP_READ | self.wgpu.BufferUsage.COPY_DST)
        try:
            for name, at in offsets.items():
                buffer, offset, size = self.locations[name]
                encoder.copy_buffer_to_buffer(buffer, offset, self._staging, at, _round4(size))
            if check:
                encoder.copy_buffer_to_buffer(self.status_buffers[0], 0, self._staging, status_offset, STATUS_BYTES)
        except Exception as exc:
            raise self._device_error(exc, [], "recording the readback copies") from None
        return _Staged(self._staging, offsets, status_offset, total)

    def _read_staged(self, staged: _Staged, values) -> list[int] | None:
        """Map the staging buffer once: decode each staged export into values; the status words
        when they were staged."""
        if staged.buffer is None:
            return None
        try:
            raw = memoryview(self.context.reader.read(staged.buffer, _round8(staged.size)))  # slices copy nothing
        except Exception as exc:
            raise self._device_error(exc, [], "reading the outputs back") from None
        # The decoded arrays view this run's own copy of the staging buffer: a graph output may be
        # handed to the caller as it is, where it is at least half of that copy (a small output
        # kept would otherwise keep every other export's bytes alive with it).
        own = getattr(values, "own", None)  # engine.session.RunValues
        for name, at in staged.offsets.items():
            values[name] = array = self._decode(name, raw[at:at + _round4(self.locations[name][2])])
            if own is not None and array.flags.writeable and 2 * array.nbytes >= staged.size:
                own(array)
        if staged.status_offset is None:
            return None
        self.status_reads += 1
        return np.frombuffer(raw[staged.status_offset:staged.status_offset + STATUS_BYTES], np.uint32).tolist()

    def _download_checked(self, name: str) -> np.ndarray:
        try:
            return self.download(name)
        except Exception as exc:
            raise self._device_error(exc, [], f'downloading tensor "{name}"') from None

    def _record(self, executions, encoder) -> None:
        """The executions, in one compute pass of encoder."""
        try:
            compute = encoder.begin_compute_pass()
            for execution in executions:
                execution.encode(compute)
            compute.end()
        except Exception as exc:
            raise self._device_error(exc, executions, "recording") from None

    # WebGPU command buffers are single-use, but a run's commands are the same every time (inputs
    # reach the buffers through queue writes, which the queue orders before a later submission).
    # So the next run's command buffer is recorded while the GPU runs this one, off the run's
    # critical path: on lavapipe, encoder + pass + finish are ~100-150 us of host time per run.
    def _record_run(self, segment, executions, check: bool) -> _RecordedRun:
        encoder = self.device.create_command_encoder()
        self._record(executions, encoder)
        staged = self._stage(encoder, segment.exports, check)
        try:
            commands = encoder.finish()
        except Exception as exc:
            raise self._device_error(exc, executions, "recording") from None
        return _RecordedRun(segment, commands, staged)

    def _submit_recorded(self, run: _RecordedRun, executions) -> None:
        try:
            self.device.queue.submit([run.commands])
        except Exception as exc:
            raise self._device_error(exc, executions, "submitting") from None

    def _record_ahead(self, segment, executions, check: bool) -> None:
        """Record the segment's next run now; on failure, the next run records (and reports) itself."""
        try:
            self._recorded_runs[id(segment)] = self._record_run(segment, executions, check)
        except Exception as exc:
            log.debug("recording the next run of a segment ahead failed (%s); it will record itself", exc)

    def _submit(self, executions, encoder=None) -> bool:
        """Record the executions into one compute pass and submit. True when the status must be
        read after it (_read_status, _raise_status)."""
        check = self._reset_status(executions)
        encoder = encoder or self.device.create_command_encoder()
        self._record(executions, encoder)
        self._finish(encoder, executions, check=check)
        return check

    def _finish(self, encoder, executions=(), *, check: bool = False) -> None:
        """Submit; with check, the same submission copies the status into its mappable buffer."""
        try:
            if check:
                status, readable = self.status_buffers
                encoder.copy_buffer_to_buffer(status, 0, readable, 0, STATUS_BYTES)
            self.device.queue.submit([encoder.finish()])
        except Exception as exc:
            raise self._device_error(exc, executions, "submitting") from None

    # ------------------------------------------------------------------ index validation
    def status_binding(self) -> dict:
        """The status buffer's binding, made on first use: models without validating kernels
        never have one."""
        if self.status_buffers is None:
            readable = self.device.create_buffer(
                size=STATUS_BYTES, label="wgnn status readback",
                usage=self.wgpu.BufferUsage.MAP_READ | self.wgpu.BufferUsage.COPY_DST)
            self.status_buffers = (self._buffer(STATUS_BYTES, "wgnn status"), readable)
        return {"buffer": self.status_buffers[0], "offset": 0, "size": STATUS_BYTES}

    def _reset_status(self, executions) -> bool:
        """Zero the status before a submission whose kernels check indices at run time; True
        then (the status is read after it), False (nothing to do) otherwise."""
        if not any(getattr(execution, "checks_status", False) for execution in executions):
            return False
        self.device.queue.write_buffer(self.status_buffers[0], 0, bytes(STATUS_BYTES))
        return True

    def _read_status(self) -> list[int]:
        """[flag, status id, check, value] as the last checking submission left them."""
        try:
            words = np.frombuffer(self.context.reader.read(self.status_buffers[1], STATUS_BYTES), np.uint32).tolist()
        except Exception as exc:
            raise self._device_error(exc, [], "reading the index status") from None
        self.status_reads += 1
        return words

    def _raise_status(self, executions, words: list[int]) -> None:
        """A kernel's report becomes the InputError the numpy backend would raise, naming the step
        (the first report of the submission wins)."""
        flag, status_id, check, value = words
        if not flag:
            return
        value = value - 2 ** 32 if value >= 2 ** 31 else value  # the kernel's i32
        for execution in executions:
            if execution.status_id == status_id:
                raise InputError(execution.status_error(check, value))
        raise InputError(f"a GPU kernel reported the bad index {value} (status id {status_id}, check {check})")

    def _device_error(self, exc: Exception, executions, doing: str) -> DeviceError:
        """A typed error naming the op at fault: wgpu validates a command buffer as a whole, so
        each step is recorded again on its own until one fails. A device that cannot take even
        an empty submission is lost: its context is dropped so new sessions get a new device."""
        culprit = None
        for execution in executions:
            try:
                encoder = self.device.create_command_encoder()
                compute = encoder.begin_compute_pass()
                execution.encode(compute)
                compute.end()
                encoder.finish()
            except Exception:
                culprit = execution
                break
        try:
            self.device.queue.submit([self.device.create_command_encoder().finish()])
            lost = False
        except Exception:
            lost = True
        detail = " ".join(str(exc).split())
        where = f" in {culprit.step.label}" if culprit else ""
        message = f"GPU error{where} while {doing} on {self.context.name}: {detail}"
        if lost:
            from .context import forget_context

            forget_context(self.context)
            message += ". The device is lost: create a new session (it gets a new device)"
        return DeviceError(message)

    def download(self, name: str) -> np.ndarray:
        from .layout import nc4hw4_dims, texture_extent, unpack_nc4hw4

        spec = self.specs[name]
        if spec.size == 0:
            return np.zeros(spec.shape, spec.dtype)
        placement = self.placement(name)
        if placement.storage == "texture":
            element = np.float16 if placement.half else np.float32
            blocks = math.prod(nc4hw4_dims(spec.shape)) * 4
            width, height, layers = texture_extent(spec)
            raw = self.device.queue.read_texture(
                {"texture": self.locations[name][0], "origin": (0, 0, 0)},
                {"offset": 0, "bytes_per_row": width * 4 * element().itemsize, "rows_per_image": height},
                (width, height, layers))
            # The texture may hold a spare layer: read the tensor's blocks only.
            return unpack_nc4hw4(np.frombuffer(raw, element, count=blocks).astype(np.float32), spec.shape)
        buffer, offset, size = self.locations[name]
        return self._decode(name, self.device.queue.read_buffer(buffer, offset, _round4(size)))

    def _decode(self, name: str, raw) -> np.ndarray:
        """The tensor from the bytes of its buffer storage."""
        from .layout import nc4hw4_dims, unpack_nc4hw4

        spec, placement = self.specs[name], self.placement(name)
        if placement.layout == "nc4hw4":
            element = np.float16 if placement.half else np.float32
            blocks = math.prod(nc4hw4_dims(spec.shape)) * 4
            return unpack_nc4hw4(np.frombuffer(raw, element, count=blocks).astype(np.float32, copy=False), spec.shape)
        array = np.frombuffer(raw, dtype=_NUMPY_GPU[spec.dtype], count=spec.size)
        return array.astype(spec.dtype, copy=False).reshape(spec.shape)  # read-only when raw is bytes


_NUMPY_GPU = {"float32": np.float32, "int64": np.int32, "int32": np.int32, "bool": np.uint32}


def to_gpu_array(name: str, value: np.ndarray) -> np.ndarray:
    """The 4-byte-per-element array uploaded for a tensor; int64 must fit in int32."""
    value = np.asarray(value)
    dtype = value.dtype.name
    if dtype == "int64" and value.size:
        low, high = int(value.min()), int(value.max())
        if low < -(2 ** 31) or high >= 2 ** 31:
            raise InputError(f'tensor "{name}": int64 value {low if low < -(2 ** 31) else high} does not '
                             "fit the GPU's int32 (run this op on the numpy provider)")
    target = _NUMPY_GPU.get(dtype)
    if target is None:
        raise WgnnError(f'tensor "{name}": dtype {dtype} cannot be stored on the GPU')
    return np.asarray(value, dtype=target, order="C").reshape(-1)


def _fits_int32(value: np.ndarray) -> bool:
    return int(value.min()) >= -(2 ** 31) and int(value.max()) < 2 ** 31


def _round4(n: int) -> int:
    return (n + 3) // 4 * 4


def _round8(n: int) -> int:
    return (n + 7) // 8 * 8


@dataclass
class _RecordedRun:
    """A segment's run recorded ahead: its command buffer and where it stages the outputs."""
    segment: object
    commands: object
    staged: _Staged


@dataclass
class _Staged:
    """Where a run's outputs (and status) lie in the staging buffer; buffer None: nothing staged."""
    buffer: object
    offsets: dict[str, int]
    status_offset: int | None
    size: int
