"""Kernel loader: .wgsl sources from kernels_wgsl/, shared fragments, a shared prelude, text
parameters ({{NAME}}), WGSL override constants, explicit bind group layouts, and a pipeline cache
per device.

A kernel names the fragments it shares with other kernels on lines of their own,
`// include: conv/dwpw_stage.wgsl`; a fragment may include others, and each file comes in once.
Fragments, then the prelude, are appended after the kernel (WGSL declarations are
order-independent), so line numbers in compiler messages are the kernel file's own.

Pipelines compile on worker threads (WGNN_COMPILE_THREADS, default one per core up to 8): a
session's prepare requests every pipeline its steps need, and they compile side by side while
prepare goes on; the session waits for them at the end of its resize, where a kernel that failed
raises KernelCompileError naming the step. wgpu-native releases the GIL in its calls and reports
an error on the calling thread, so the threads share the device safely. Pipelines only a later resize may
need are *deferred*: queued when the prepare ends, as background work, which the threads take only
when no work a run needs is queued (a priority queue in front of the pool). On lavapipe creating
MobileNetV2's 14 pipelines took 1.42-1.45 s on one thread and 0.80-1.16 s on two; drivers that
compile to machine code at pipeline creation (NVIDIA's, AMD's) gain the most.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import queue
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from importlib import resources

from ...engine.errors import WgnnError
from .tuning import tuned_constants
from .warmup import DriverWarmup, warmup_reason

log = logging.getLogger("wgnn.wgpu")
PARAM_PATTERN = re.compile(r"\{\{(\w+)\}\}")
INCLUDE_PATTERN = re.compile(r"^[ \t]*//[ \t]*include:[ \t]*(\S+)[ \t]*$", re.M)
# Binding kinds of a kernel, in binding order: tensors in buffers are read_write storage (one
# arena buffer may back several bindings of one dispatch), NC4HW4 textures are read as sampled
# 2-D array textures and written as rgba32float storage textures, parameters are a uniform block.
STORAGE, UNIFORM, TEXTURE_IN, TEXTURE_OUT = "storage", "uniform", "texture", "storage_texture"
TEXTURE_OUT_HALF = "storage_texture_half"  # rgba16float (precision fp16)


class KernelCompileError(WgnnError):
    """A WGSL kernel failed to compile; the message names the file and shows the compiler's."""


@cache
def kernel_source(path: str) -> str:
    """Source of kernels_wgsl/<path>, e.g. "elementwise/unary.wgsl"."""
    try:
        return resources.files("wgnn.kernels_wgsl").joinpath(path).read_text()
    except FileNotFoundError:
        raise WgnnError(f"kernel file kernels_wgsl/{path} not found "
                        "(is the package installed with its .wgsl data?)") from None


def included_fragments(path: str, source: str | None = None) -> list[str]:
    """The fragments kernels_wgsl/<path> includes, theirs after each, every file once, in order of
    first mention (never the kernel itself). `source`: the kernel's text, where it is not a
    packaged file (the shader harness's)."""
    order: list[str] = []

    def visit(name: str, text: str) -> None:
        for fragment in INCLUDE_PATTERN.findall(text):
            if fragment == path or fragment in order:
                continue
            if not fragment.endswith(".wgsl"):
                raise WgnnError(f"{name} includes {fragment!r}: fragments are .wgsl files under kernels_wgsl/")
            try:
                fragment_text = kernel_source(fragment)
            except WgnnError as exc:
                raise WgnnError(f"{name} includes {fragment}: {exc}") from None
            order.append(fragment)
            visit(fragment, fragment_text)

    visit(path, kernel_source(path) if source is None else source)
    return order


def substitute_params(name: str, text: str, params: dict[str, str]) -> str:
    def substitute(match):
        key = match.group(1)
        if key not in params:
            raise WgnnError(f"kernel {name} needs parameter {{{{{key}}}}}; given {sorted(params)}")
        return str(params[key])

    return PARAM_PATTERN.sub(substitute, text)


def render(path: str, params: dict[str, str]) -> str:
    """Kernel text with {{NAME}} parameters replaced, its fragments and the prelude appended."""
    parts = [substitute_params(path, kernel_source(path), params)]
    parts += [substitute_params(fragment, kernel_source(fragment), params) for fragment in included_fragments(path)]
    code = "\n".join(parts) + "\n" + kernel_source("prelude.wgsl")
    if re.search(r"\bf16\b", code):
        # The directive must come first; on the first line it keeps the file's line numbers.
        code = "enable f16; " + code
    return code


COMPILE_THREADS_ENV = "WGNN_COMPILE_THREADS"
MAX_COMPILE_THREADS = 8


def compile_threads() -> int:
    """Threads compiling pipelines: WGNN_COMPILE_THREADS, else one per core up to 8 (1: compile
    on the calling thread, when the pipeline is requested)."""
    value = os.environ.get(COMPILE_THREADS_ENV, "")
    if not value:
        return max(1, min(os.cpu_count() or 1, MAX_COMPILE_THREADS))
    if not value.isdigit() or int(value) < 1:
        raise WgnnError(f"{COMPILE_THREADS_ENV}={value}: give a number of threads, 1 or more")
    return int(value)


def compile_threads_for(context) -> int:
    """compile_threads() on the context's device; 1 on OpenGL: wgpu-hal's GL backend shares one
    context lock per adapter between pipeline creation and submissions and panics ("Could not lock
    adapter context") when a thread waits for it over a second, while llvmpipe's GL compile of a big
    kernel with a cold Mesa cache holds it longer. On the calling thread the compiles take turns
    with the runs."""
    return 1 if context.info.backend == "OpenGL" else compile_threads()


class Kernel:
    """A compiled pipeline, or one compiling (a Future): reading `pipeline` waits for it (once; then
    it is a plain attribute, so recording a run pays nothing) and raises the compile error, if any."""

    def __init__(self, pipeline, layout, bindings: tuple[str, ...], path: str, workgroup: int = 64):
        if isinstance(pipeline, Future):
            self._compiling = pipeline
        else:
            self.pipeline = pipeline
        self.layout = layout
        self.bindings = bindings
        self.path = path
        self.workgroup = workgroup  # its WG override constant: dispatch grids count workgroups of this size
        self.source: tuple = ()  # (code, bindings, constants, entry): what a warm-up builds again
        self.warmed_for: dict[tuple, Future] = {}  # binding traits -> the driver generating code for them
        self.warming: list[Future] = []  # warm-ups a resize waits for (warmup.py)
        self.start_now = None  # set while its compile is deferred (PipelineCache.get): starts it

    @property
    def compiled(self) -> bool:
        """Whether the pipeline is ready (or its compile failed: reading it raises)."""
        return "pipeline" in self.__dict__ or self._compiling.done()

    @property
    def pending(self) -> bool:
        """Whether the compile, or the warm-up, has not been waited for yet (it may have finished,
        or failed)."""
        return "pipeline" not in self.__dict__ or bool(self.warming)

    def __getattr__(self, name: str):
        # Only for attributes not set yet: `pipeline` while it compiles.
        if name != "pipeline":
            raise AttributeError(name)
        return self.wait()

    def wait(self):
        """The pipeline, once compiled (and warmed up, where asked); a KernelCompileError raises here."""
        if "pipeline" not in self.__dict__:
            if self.start_now is not None:
                self.start_now(self)
            self.pipeline = self._compiling.result()
        while self.warming:
            self.warming.pop().result()  # a warm-up never raises (warmup.py)
        return self.pipeline


def layout_entries(wgpu, bindings: tuple[str, ...]) -> list[dict]:
    """Bind group layout entries for a kernel's binding kinds, in binding order."""
    entries = []
    for index, kind in enumerate(bindings):
        layout_entry = {"binding": index, "visibility": wgpu.ShaderStage.COMPUTE}
        if kind == TEXTURE_IN:
            layout_entry["texture"] = {"sample_type": wgpu.TextureSampleType.unfilterable_float,
                                       "view_dimension": wgpu.TextureViewDimension.d2_array}
        elif kind in (TEXTURE_OUT, TEXTURE_OUT_HALF):
            texture_format = wgpu.TextureFormat.rgba16float if kind == TEXTURE_OUT_HALF else \
                wgpu.TextureFormat.rgba32float
            layout_entry["storage_texture"] = {"access": wgpu.StorageTextureAccess.write_only,
                                               "format": texture_format,
                                               "view_dimension": wgpu.TextureViewDimension.d2_array}
        else:
            kind_type = wgpu.BufferBindingType.uniform if kind == UNIFORM else wgpu.BufferBindingType.storage
            layout_entry["buffer"] = {"type": kind_type}
        entries.append(layout_entry)
    return entries


class PipelineCache:
    """Compiled pipelines keyed by (source hash, entry point, constants, bindings)."""

    def __init__(self, context):
        self.context = context
        self.pipelines: dict[tuple, Kernel] = {}
        self.compiled = 0  # pipelines created (tests assert resize creates none)
        self.compile_seconds = 0.0  # summed over the threads
        self._lock = threading.Lock()  # the table (sessions on several threads share the cache)
        self._timing = threading.Lock()
        self._workers: ThreadPoolExecutor | None = None
        self.warmup: DriverWarmup | None = None  # made with the worker threads, where it helps
        self._deferred: list[tuple] = []  # (runner, its Future, work, *args): tasks start_deferred() starts
        self._queue: queue.PriorityQueue = queue.PriorityQueue()  # (background, order, task)
        self._order = itertools.count()

    def get(self, path: str, bindings: tuple[str, ...], *, params: dict[str, str] | None = None,
            constants: dict[str, float] | None = None, entry: str = "main", deferred: bool = False) -> Kernel:
        """The kernel, compiling. deferred: a variant only a later resize may need; its compile
        waits until start_deferred(), at the end of the session's prepare, so that the work the
        first run needs goes first (it starts at once where asked for without deferred, or waited
        for)."""
        code = render(path, params or {})
        constants = tuned_constants(self.context, path, constants)  # a tuned WG where wgnn tune measured one
        key = (hashlib.sha1(code.encode()).hexdigest(), entry, tuple(sorted(constants.items())), bindings)
        with self._lock:
            kernel = self.pipelines.get(key)
            if kernel is None:
                kernel = self.pipelines[key] = self._compile(path, code, bindings, constants, entry, deferred)
                kernel.source = (code, bindings, constants, entry)
        if not deferred:
            self.start_now(kernel)
        return kernel

    def warm(self, kernel: Kernel, traits: tuple, *, deferred: bool = False) -> Future | None:
        """Have a driver that generates code lazily generate this kernel's code now, for bindings of
        these traits (one per binding: warmup.texture_traits, params_traits; None for a buffer), where
        warm-ups apply (warmup.py). Only kernels a session dispatches are warmed, not variants
        compiled for a later resize. Returns the warm-up (None where none applies); one not
        deferred is also left for kernel.wait(), a deferred one starts with start_deferred()."""
        with self._lock:
            if self.warmup is None:
                return None
            started = kernel.warmed_for.get(traits)
            if started is None:
                # Another set of traits' warm-up of this kernel to come: start after the last. Two
                # at once would both miss Mesa's cache, where the code does not depend on what differs
                # (measured: one 1x2 dwpw kernel generated twice side by side, 1.4 and 1.7 s).
                running = next((f for f in reversed(kernel.warmed_for.values()) if not f.done()), None)
                started = kernel.warmed_for[traits] = Future()
                task = (self._run_into, started, self.warmup.warm, *kernel.source, traits)
                if deferred:
                    self._deferred.append(task)
                elif running is not None:
                    running.add_done_callback(lambda _: self._submit(task))
                else:
                    self._submit(task)
            if not deferred and not started.done():
                kernel.warming.append(started)
        if not deferred:
            self._promote(started)
        return started

    def has_driver_code(self, kernel: Kernel, traits: tuple) -> bool:
        """Whether the driver holds this kernel's code for bindings of these traits before its first
        dispatch: always where the driver generates it when the pipeline is created (no warm-ups),
        else when a warm-up finished, in this process or (the record) an earlier one."""
        if self.warmup is None:
            return True
        started = kernel.warmed_for.get(traits)
        return (started is not None and started.done()) or self.warmup.recorded(*kernel.source, traits)

    def start_deferred(self) -> list[Future]:
        """Start the deferred compiles and warm-ups, after the work asked for so far; returns them."""
        with self._lock:
            tasks, self._deferred = self._deferred, []
        futures = [task[1] for task in tasks]
        for task in tasks:
            self._submit(task, background=True)
        return futures

    def start_now(self, kernel: Kernel) -> None:
        """A kernel whose compile was deferred, needed now: start its compile at once (if it waits)."""
        if kernel.start_now is not None:
            self._promote(kernel._compiling)
            kernel.start_now = None

    def _promote(self, future: Future) -> None:
        """Start the deferred task that fills `future` at once, if it waits still."""
        with self._lock:
            for task in self._deferred:
                if task[1] is future:
                    self._deferred.remove(task)
                    self._submit(task)
                    break

    def _submit(self, task: tuple, *, background: bool = False) -> None:
        """Queue a task for the compile threads: a free thread takes the first queued task a run
        needs, else the first background one (a warm-up chained after another, _run_into, must not
        wait behind the background work started in the meantime)."""
        self._queue.put((int(background), next(self._order), task))
        self._workers.submit(self._run_next)

    def _run_next(self) -> None:
        _, _, (runner, *args) = self._queue.get_nowait()  # one per submission: never empty here
        runner(*args)

    @staticmethod
    def _run_into(future: Future, work, *args) -> None:
        try:
            future.set_result(work(*args))
        except BaseException as exc:  # handed to whoever waits, as the executor's own tasks do
            future.set_exception(exc)

    def _compile(self, path, code, bindings, constants, entry, deferred=False) -> Kernel:
        """The kernel, its pipeline compiling on a worker thread (or compiled, with one thread)."""
        device = self.context.device
        try:
            layout = device.create_bind_group_layout(entries=layout_entries(self.context.wgpu, bindings))
        except Exception as exc:
            raise KernelCompileError(f"kernels_wgsl/{path}: bad bindings {bindings} on {self.context.name}: "
                                     f"{exc}") from None
        self.compiled += 1
        workgroup = int(constants.get("WG", 64))
        threads = compile_threads_for(self.context)
        build = (path, code, layout, constants, entry)
        if threads == 1:
            return Kernel(self._build(*build), layout, bindings, path, workgroup)
        if self._workers is None:
            self._workers = ThreadPoolExecutor(threads, thread_name_prefix="wgnn-compile")
            reason = warmup_reason(self.context, threads)
            if reason is None:
                self.warmup = DriverWarmup(self.context)
            else:
                log.debug("no driver warm-ups on %s: %s", self.context.name, reason)
        compiling = Future()
        kernel = Kernel(compiling, layout, bindings, path, workgroup)
        task = (self._run_into, compiling, self._build, *build)
        if deferred:
            kernel.start_now = self.start_now
            self._deferred.append(task)
        else:
            self._submit(task)
        return kernel

    def _build(self, path, code, layout, constants, entry):
        device = self.context.device
        start = time.perf_counter()
        try:
            module = device.create_shader_module(code=code, label=path)
            pipeline = device.create_compute_pipeline(
                layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
                compute={"module": module, "entry_point": entry, "constants": constants})
        except Exception as exc:
            raise KernelCompileError(f"kernels_wgsl/{path} failed to compile on {self.context.name}:\n{exc}") from None
        finally:
            with self._timing:
                self.compile_seconds += time.perf_counter() - start
        return pipeline


def pipeline_cache(context) -> PipelineCache:
    cache = context.pipelines.get("cache")
    if cache is None:
        cache = context.pipelines["cache"] = PipelineCache(context)
    return cache
