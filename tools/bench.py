"""`wgnn bench MODEL`: cold start, latency over warm runs, optionally side by side with onnxruntime,
per-op time (GPU timestamp queries on wgpu, wall clock on numpy) and a Chrome/Perfetto trace.

Timed runs and profiled runs are separate: profiling gives each GPU step its own compute pass, which
costs time, so the latency figures come from ordinary runs and the per-op figures from extra ones.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from ..backends.numpy import blas as numpy_blas
from ..backends.numpy import compiled as numpy_compiled
from ..engine.errors import WgnnError

try:
    import resource  # POSIX only: page_faults()
except ImportError:
    resource = None


def page_faults() -> int | None:
    """Minor page faults of this process so far (all threads); None where the OS does not count
    them (no `resource` module: Windows). A warm run that reuses its memory makes none; one that
    maps fresh memory for its temporaries makes one per 4 KiB page (docs/performance.md)."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@dataclass
class OpSamples:
    """Times of one step (or one untimed GPU segment) over the profiled runs."""

    label: str
    op: str
    backend: str
    kernel: str
    shape: list[int] | None
    flops: int
    nbytes: int
    ms: list[float] = field(default_factory=list)


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples, np.float64), q))


def latency(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "p90": percentile(samples, 90), "min": min(samples),
            "max": max(samples), "samples": [round(s, 4) for s in samples]}


RESAMPLES = 2000


def ratio_interval(ours: list[float], theirs: list[float], *, resamples: int = RESAMPLES,
                   seed: int = 0) -> tuple[float, float] | None:
    """95% interval of median(ours) / median(theirs) by a paired bootstrap over the rounds (a round:
    one run of each runner, back to back: `wgnn bench --vs`, tools/peers.py): a resample draws
    whole rounds, so the two runners keep the machine phase they shared. None with fewer than 5
    rounds."""
    if len(ours) != len(theirs) or len(ours) < 5:
        return None
    rng = np.random.default_rng(seed)
    rounds = rng.integers(0, len(ours), size=(resamples, len(ours)))
    ratios = np.median(np.asarray(ours)[rounds], axis=1) / np.median(np.asarray(theirs)[rounds], axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def _op_type(step) -> str:
    kind = step.attrs.get("kind")
    return f"{step.op.op_type}.{kind}" if isinstance(kind, str) else step.op.op_type


def _step_bytes(step) -> int:
    """Bytes a step reads and writes once (inputs and outputs): the GB/s column's traffic."""
    return sum(s.nbytes for s in list(step.input_specs) + list(step.output_specs) if s is not None)


def _kernel_paths(execution) -> str:
    """The kernel column: the GPU step's shader paths, or the numpy step's prepared path."""
    if hasattr(execution, "variant"):
        return execution.variant()
    dispatches = getattr(execution, "dispatches", None)
    if dispatches is None:
        return "numpy"
    return ", ".join(dict.fromkeys(d.kernel.path for d in dispatches)) or "-"


def _onnxruntime_session(path):
    try:
        import onnxruntime as ort
    except ImportError:
        raise WgnnError("--vs onnxruntime needs onnxruntime: pip install onnxruntime") from None
    options = ort.SessionOptions()
    # Idle spinning threads would steal the 2 cores from the runner timed next (docs/performance.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's pybind exceptions share no base but Exception
        raise WgnnError(f"onnxruntime could not load the model: {exc}") from None


def _max_rel_error(ours: dict, reference: dict) -> float | None:
    from .cli import compare_outputs

    errors = [r["max_rel_error"] for r in compare_outputs(ours, reference, 0.0) if r["max_rel_error"] is not None]
    return max(errors) if errors else None


class _ColdStart:
    """Counts the pipelines compiled while active and the seconds spent compiling them, summed over
    the compile threads (loader.PipelineCache's counters; the cold start only)."""

    def __init__(self, backends):
        from ..backends.wgpu.loader import compile_threads_for

        self.backends = [b for b in backends if hasattr(b, "pipelines")]
        self.seconds = 0.0
        self.compiled = 0
        # 0: nothing compiles (no GPU backend)
        self.threads = compile_threads_for(self.backends[0].context) if self.backends else 0

    def __enter__(self):
        from ..backends.wgpu.context import open_contexts
        from ..backends.wgpu.loader import pipeline_cache

        # The resize may move a backend to another device (settle_device): every open one's counters
        caches = [pipeline_cache(c) for c in open_contexts()] if self.backends else []
        self.before = {id(c): (c.compiled, c.compile_seconds, *_warmups(c)) for c in caches}
        return self

    def __exit__(self, *exc):
        self.warmed, self.warmup_seconds = 0, 0.0
        for cache in {id(b.pipelines): b.pipelines for b in self.backends}.values():
            compiled, seconds, warmed, warmup_seconds = self.before.get(id(cache), (0, 0.0, 0, 0.0))
            self.compiled += cache.compiled - compiled
            self.seconds += cache.compile_seconds - seconds
            now_warmed, now_seconds = _warmups(cache)
            self.warmed += now_warmed - warmed
            self.warmup_seconds += now_seconds - warmup_seconds


def _warmups(cache) -> tuple[int, float]:
    """Kernels the driver generated code for ahead of the first run (warmup.py), and the seconds."""
    return (cache.warmup.count, cache.warmup.seconds) if cache.warmup is not None else (0, 0.0)


def bench_model(path, config, given_shapes: dict, *, warmup: int = 3, runs: int = 20, vs: str | None = None,
                profile: bool = False, seed: int = 0, show_progress: bool = True, driver_cache: str = "on",
                lavapipe_threads: int | None = None) -> dict:
    """Benchmark one model; returns the dict `wgnn bench --json` prints. With profile=True, also
    `runs` profiled runs: result["per_op"] (rows in session order) and result["trace_events"].
    driver_cache="off" turns the GPU drivers' on-disk shader caches off first (before any GPU use
    of the process), "empty" starts them empty in a temporary folder: either way the cold start is
    a first-ever run's, without and with the driver warm-ups; lavapipe_threads sets the worker
    threads of Mesa's CPU drivers (LP_NUM_THREADS), also before any GPU use."""
    from ..engine.interpreter import Interpreter
    from ..engine.session import Session
    from .cli import random_feeds, resolve_shapes
    from .progress import progress

    if warmup < 0 or runs < 1:
        raise WgnnError("--warmup must be >= 0 and --runs >= 1")
    if driver_cache == "off":
        from ..backends.wgpu.context import disable_driver_shader_cache

        disable_driver_shader_cache()
    elif driver_cache == "empty":
        from ..backends.wgpu.context import use_empty_driver_shader_cache

        use_empty_driver_shader_cache()
    elif driver_cache != "on":
        raise WgnnError(f"driver_cache must be 'on', 'off' or 'empty', got {driver_cache!r}")
    if lavapipe_threads is not None:
        from ..backends.wgpu.context import set_lavapipe_threads

        set_lavapipe_threads(lavapipe_threads)
    start = time.perf_counter()
    interp = Interpreter(path)  # parse (.wgnn) or convert (.onnx)
    load_ms = (time.perf_counter() - start) * 1e3
    shapes = resolve_shapes(interp.graph.inputs, given_shapes)
    feeds = random_feeds(interp.graph.inputs, shapes, seed)

    start = time.perf_counter()
    session = Session(interp, config)  # opens the GPU device on first use
    with _ColdStart(session.backends) as compiling:
        session.resize(shapes)
    prepare_ms = (time.perf_counter() - start) * 1e3
    quick_first = sum(1 for s in session.segments for _, ex in s.steps
                      for d in getattr(ex, "dispatches", ()) if getattr(d, "upgrade", None) is not None)
    start = time.perf_counter()
    first_outputs = session.run(feeds)
    first_run_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    background_tasks = session.wait_background()  # timed runs must not share the cores with it
    background = {"tasks": background_tasks, "ms": (time.perf_counter() - start) * 1e3, "quick_first": quick_first}

    runners = {"wgnn": lambda: session.run(feeds)}
    result_vs = None
    if vs == "onnxruntime":
        ort_session = _onnxruntime_session(path)
        names = [o.name for o in ort_session.get_outputs()]
        reference = dict(zip(names, ort_session.run(names, feeds), strict=True))
        runners["onnxruntime"] = lambda: ort_session.run(names, feeds)
        result_vs = {"name": vs, "max_rel_error": _max_rel_error(first_outputs, reference)}
    for _ in range(warmup):
        for run in runners.values():
            run()
    samples: dict[str, list[float]] = {name: [] for name in runners}
    faults = 0  # during wgnn's runs only
    threads_before = _thread_runs(session)
    for _ in progress(range(runs), "bench", enabled=show_progress):
        for name, run in runners.items():  # alternate, so a slow phase of the machine hits both
            before = page_faults() if name == "wgnn" else None
            begin = time.perf_counter()
            run()
            samples[name].append((time.perf_counter() - begin) * 1e3)
            if before is not None:
                faults += page_faults() - before

    report = session.report()
    gpu_segments = [s for s in session.segments if s.backend.name == "wgpu"]
    gpu_backend = next((b for b in session.backends if hasattr(b, "context")), None)
    context = gpu_backend.context if gpu_backend else None
    device_choice = (gpu_backend.device_choice or {}) if gpu_backend else {}
    result = {
        "model": str(path), "providers": [backend.name for backend in session.backends],
        "providers_choice": session.providers_choice, "adapter": context.name if context else None,
        "numpy_blas": numpy_blas.describe() if any(s.backend.name == "numpy" for s in session.segments) else None,
        "numpy_compiled": numpy_compiled.describe(config.numpy_threads)
        if any(s.backend.name == "numpy" for s in session.segments)
        else None,
        "lavapipe_threads": context.lavapipe_threads if context else None,
        "lavapipe_threads_why": device_choice.get("why") if context and context.lavapipe_threads is not None else None,
        # how long reads of the outputs poll before they wait (backends/wgpu/readback.py)
        "readback_poll_us": round(getattr(context.reader, "spin_seconds", 0.0) * 1e6) if context else None,
        "storage": config.storage, "precision": config.precision,
        "input_shapes": {k: list(v) for k, v in shapes.items()}, "warmup": warmup, "runs": runs,
        "latency_ms": latency(samples["wgnn"]),
        "page_faults_per_run": None if page_faults() is None else faults / runs,
        "numpy_thread_runs": _thread_runs(session, since=threads_before),
        "cold_start_ms": {"load": load_ms, "prepare": prepare_ms, "shader_compile": compiling.seconds * 1e3,
                          "first_run": first_run_ms},
        "pipelines_compiled": compiling.compiled,
        "compile_threads": compiling.threads,
        "driver_shader_cache": driver_cache,
        "driver_warmups": {"kernels": compiling.warmed, "seconds": compiling.warmup_seconds},
        "background": background,
        "dispatches": sum(len(ex.dispatches) for s in gpu_segments for _, ex in s.steps),
        "views": report["views"],  # steps that share their input's storage and dispatch nothing
        "encode_us_per_step": _encode_cost(gpu_segments, runs),
        "steps_per_backend": report["ops_per_backend"],
        "segments": len(session.segments),
        "fallbacks": len(report["fallbacks"]),
        "flops": int(report["flops"]),
    }
    if result_vs is not None:
        theirs = latency(samples[vs])
        result_vs.update(latency_ms=theirs, ratio=result["latency_ms"]["median"] / theirs["median"],
                         ratio_interval=ratio_interval(samples["wgnn"], samples[vs]))
        result["vs"] = result_vs
    if profile:
        result.update(_profile(session, feeds, runs, show_progress))
    return result


def _thread_runs(session, since: dict | None = None) -> dict | None:
    """The numpy backend's runs by thread cap where its runs choose it (NumpyBackend.thread_runs),
    counted from `since` on; None where they do not."""
    backend = next((b for b in session.backends if hasattr(b, "thread_runs")), None)
    now = backend.thread_runs() if backend is not None else None
    if now is None or since is None:
        return now
    return {key: count - since[key] for key, count in now.items()}


def _encode_cost(segments, runs: int) -> float | None:
    """Host time to record one GPU step into a command buffer (median over `runs` recordings of
    every GPU segment, not submitted). run() records a segment's next run while the GPU runs the
    current one, so this is host work beside the GPU's, on its critical path only where the GPU
    finishes first."""
    steps = [execution for segment in segments for _, execution in segment.steps]
    if not steps:
        return None
    device = segments[0].backend.device
    samples = []
    for _ in range(max(runs, 3)):
        encoder = device.create_command_encoder()
        begin = time.perf_counter()
        compute = encoder.begin_compute_pass()
        for execution in steps:
            execution.encode(compute)
        compute.end()
        encoder.finish()
        samples.append((time.perf_counter() - begin) * 1e6 / len(steps))
    return statistics.median(samples)


def _profile(session, feeds: dict, runs: int, show_progress: bool) -> dict:
    """`runs` profiled runs: per-op medians and trace events."""
    from .progress import progress

    ops: dict[int, OpSamples] = {}  # id(step) or id(segment) -> samples, in session order
    order: list[int] = []
    methods: dict[str, str] = {}
    for segment in session.segments:
        for step, execution in segment.steps:
            ops[id(step)] = OpSamples(step.label, _op_type(step), segment.backend.name, _kernel_paths(execution),
                                      list(step.output_specs[0].shape) if step.output_specs else None,
                                      int(step.flops), _step_bytes(step))
            order.append(id(step))
    events: list[dict] = []
    cpu_times: list[tuple] = []  # (step, execution, start s, ms) of numpy steps in the current run
    profilers, wrapped = [], []
    for backend in session.backends:
        if hasattr(backend, "enable_profiling"):
            most = max((len(s.steps) for s in session.segments if s.backend is backend), default=1)
            profilers.append(backend.enable_profiling(most))
            methods[backend.name] = profilers[-1].method
    for segment in session.segments:
        if segment.backend.name == "wgpu":
            continue
        methods[segment.backend.name] = "wall"
        for step, execution in segment.steps:
            wrapped.append(execution)
            execution.run = _timed_run(execution.run, step, execution, cpu_times)
    walls: list[float] = []
    try:
        origin = None
        for index in progress(range(runs), "profile", enabled=show_progress):
            cpu_times.clear()
            begin = time.perf_counter()
            session.run(feeds)
            walls.append((time.perf_counter() - begin) * 1e3)
            origin = begin if origin is None else origin
            for step, _, start, ms in cpu_times:
                ops[id(step)].ms.append(ms)
                events.append(_event(ops[id(step)], (start - origin) * 1e6, ms, index, 2))
            for profiler in profilers:
                for record in profiler.take():
                    _gpu_record(record, ops, order, events, origin, index)
    finally:
        for backend in session.backends:
            if hasattr(backend, "disable_profiling"):
                backend.disable_profiling()
        for execution in wrapped:
            del execution.run
    rows = [ops[key] for key in order if ops[key].ms]
    medians = [statistics.median(op.ms) for op in rows]
    total = sum(medians)
    table_rows = []
    for op, ms in zip(rows, medians, strict=True):
        seconds = ms / 1e3
        table_rows.append({
            "op": op.label, "op_type": op.op, "backend": op.backend, "kernel": op.kernel, "shape": op.shape,
            "median_ms": ms, "percent": 100 * ms / total if total > 0 else 0.0,
            "gflops": op.flops / seconds / 1e9 if op.flops and seconds > 0 else None,
            "gbps": op.nbytes / seconds / 1e9 if op.nbytes and seconds > 0 else None})
    return {"per_op": {"methods": methods, "profiled_runs": runs, "total_ms": total,
                       "wall_ms_median": statistics.median(walls), "rows": table_rows},
            "trace_events": events}


def _timed_run(run, step, execution, sink: list):
    def timed(inputs, outputs):
        start = time.perf_counter()
        result = run(inputs, outputs)
        sink.append((step, execution, start, (time.perf_counter() - start) * 1e3))
        return result

    return timed


def _gpu_record(record: dict, ops: dict, order: list, events: list, origin: float, run: int) -> None:
    """One profiled GPU segment run -> samples and trace events (the GPU times placed after the
    segment's wall-clock start). Without timestamps the whole segment is one row."""
    steps = record["steps"]
    base_us = (record["start"] - origin) * 1e6
    if record["method"] != "timestamp-query":
        key = id(steps[0][0]) ^ 1  # stands for the segment; never a step id (ids are even)
        if key not in ops:
            labels = [s.label for s, *_ in steps]
            ops[key] = OpSamples(f"{len(steps)} steps from {labels[0]}", "segment (wall clock)", "wgpu", "-",
                                 None, sum(int(s.flops) for s, *_ in steps), sum(_step_bytes(s) for s, *_ in steps))
            order.insert(order.index(id(steps[0][0])), key)
        ops[key].ms.append(record["wall_ms"])
        events.append(_event(ops[key], base_us, record["wall_ms"], run, 1))
        return
    for step, _, begin, end in steps:
        if begin is None:
            continue
        op = ops[id(step)]
        op.ms.append(end - begin)
        events.append(_event(op, base_us + begin * 1e3, end - begin, run, 1))


def _event(op: OpSamples, ts_us: float, ms: float, run: int, tid: int) -> dict:
    return {"name": op.label, "cat": op.backend, "ph": "X", "ts": round(ts_us, 3), "dur": round(ms * 1e3, 3),
            "pid": 1, "tid": tid, "args": {"op": op.op, "kernel": op.kernel, "shape": op.shape, "run": run}}


def trace_document(events: list[dict]) -> dict:
    """Chrome / Perfetto JSON trace: GPU ops on thread 1, CPU (numpy) ops on thread 2."""
    names = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
             for tid, name in ((1, "wgpu (GPU time)"), (2, "numpy (CPU)"))]
    return {"traceEvents": names + events, "displayTimeUnit": "ms"}
