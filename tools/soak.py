"""Soak test: run one session many times and check that memory stays flat and results stay the same;
then run it from several threads (a session per thread, and one shared session) and compare with
single-threaded results.

Memory is sampled every K runs after a garbage collection: the process RSS (/proc/self/statm, or
the peak from getrusage where /proc is missing) and, when wgpu is loaded, wgpu-py's object report
(wgpu.diagnostics.object_counts: live GPU objects and the bytes of buffers and textures) and
wgpu-native's own counts. After the warm-up runs, the growth of each is the median of the last
third of the samples minus the median of the first third; the session passes when every growth is
within its threshold (RSS: --max-rss-growth-mb; GPU objects and bytes: --max-gpu-growth, default 0).

    wgnn soak MODEL [--provider wgpu,numpy] [--runs 10000] [--threads 4] [--json]
    python -m wgnn.tools.soak MODEL ...
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..engine.errors import InputError

DEFAULT_RUNS = 10_000
DEFAULT_RSS_GROWTH_MB = 8.0
RTOL, ATOL = 1e-5, 1e-6  # results of repeated and threaded runs vs the first single-threaded run


# -------------------------------------------------------------------------------- measurements
def rss_bytes() -> tuple[int, str]:
    """Resident set size of this process and how it was measured."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"), "/proc/self/statm"
    except (OSError, ValueError, IndexError):
        import resource

        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, "getrusage (peak RSS)"


def gpu_counts() -> dict | None:
    """Live wgpu objects and their resource bytes (wgpu-py), plus wgpu-native's counts; None when
    wgpu was never loaded."""
    if "wgpu" not in sys.modules:
        return None
    import wgpu

    totals = wgpu.diagnostics.object_counts.get_dict().get("total", {})
    native = wgpu.diagnostics.wgpu_native_counts.get_dict().get("total", {})
    return {"objects": int(totals.get("count", 0)), "bytes": int(totals.get("resource_mem", 0)),
            "native_objects": int(native.get("count", 0)), "native_bytes": int(native.get("mem", 0))}


def sample(run: int, gpu: bool = True) -> dict:
    gc.collect()  # count what is alive, not what awaits collection
    rss, _ = rss_bytes()
    return {"run": run, "rss": rss, "gpu": gpu_counts() if gpu else None}


def _growth(values: list[int]) -> int:
    third = max(1, len(values) // 3)
    return int(statistics.median(values[-third:]) - statistics.median(values[:third]))


def mismatch(got: dict, want: dict) -> str | None:
    """Why two runs' outputs differ beyond RTOL/ATOL, or None."""
    for name, reference in want.items():
        value = got.get(name)
        if value is None or value.shape != reference.shape or value.dtype != reference.dtype:
            return f"output {name}: {None if value is None else (value.dtype, value.shape)} vs " \
                   f"{(reference.dtype, reference.shape)}"
        if not np.allclose(value, reference, rtol=RTOL, atol=ATOL, equal_nan=True):
            diff = np.abs(value.astype(np.float64) - reference.astype(np.float64))
            return f"output {name}: max abs difference {float(np.nanmax(diff)):.3g}"
    return None


# ------------------------------------------------------------------------------------- soaking
@dataclass(frozen=True)
class Thresholds:
    """Allowed growth after warm-up: RSS in bytes, GPU objects and GPU bytes."""

    rss_bytes: int = int(DEFAULT_RSS_GROWTH_MB * (1 << 20))
    gpu_objects: int = 0
    gpu_bytes: int = 0


def soak_session(session, feeds: dict, *, runs: int = DEFAULT_RUNS, sample_every: int | None = None,
                 warmup: int | None = None, thresholds: Thresholds = Thresholds(), show_progress: bool = False,
                 label: str = "soak", gpu: bool | None = None) -> dict:
    """Run session.run(feeds) `runs` times; memory samples, growth verdicts and output stability.

    Arguments:
        session: a wgnn Session (engine.session.Session).
        feeds: input name -> array.
        sample_every: runs between samples (default runs // 100, at least 1).
        warmup: runs excluded from the growth verdict (default runs // 10, at least one sample).
        show_progress: draw a progress bar on stderr (when it is a terminal).
        gpu: sample wgpu's object report (default: when the session's providers include wgpu).
    """
    from .progress import progress

    if runs < 1:
        raise InputError("runs must be at least 1")
    every = sample_every or max(1, runs // 100)
    warm = warmup if warmup is not None else max(every, runs // 10)
    if gpu is None:
        gpu = "wgpu" in getattr(getattr(session, "config", None), "providers", ())
    reference = session.run(feeds)
    samples = [sample(0, gpu)]
    unstable: list[str] = []
    start = time.perf_counter()
    for run in progress(range(1, runs + 1), label, enabled=show_progress):
        outputs = session.run(feeds)
        if run % every == 0 or run == runs:
            samples.append(sample(run, gpu))
            problem = mismatch(outputs, reference)
            if problem and len(unstable) < 5:
                unstable.append(f"run {run}: {problem}")
    seconds = time.perf_counter() - start
    steady = [s for s in samples if s["run"] >= warm] or samples[-1:]
    result = {"runs": runs, "sample_every": every, "warmup_runs": warm, "seconds": round(seconds, 3),
              "ms_per_run": round(1e3 * seconds / runs, 4), "rss_source": rss_bytes()[1],
              "outputs_stable": not unstable, "unstable": unstable, "samples": samples}
    rss = [s["rss"] for s in steady]
    metrics = {"rss": {"before": samples[0]["rss"], "after_warmup": rss[0], "after": rss[-1],
                       "growth": _growth(rss), "limit": thresholds.rss_bytes}}
    if steady[0]["gpu"] is not None:
        for key, limit in (("objects", thresholds.gpu_objects), ("bytes", thresholds.gpu_bytes)):
            values = [s["gpu"][key] for s in steady]
            metrics[f"gpu_{key}"] = {"before": samples[0]["gpu"][key],
                                     "after_warmup": values[0], "after": values[-1], "growth": _growth(values),
                                     "limit": limit}
        native = [s["gpu"]["native_bytes"] for s in steady]
        metrics["gpu_native_bytes"] = {"before": samples[0]["gpu"]["native_bytes"], "after_warmup": native[0],
                                       "after": native[-1], "growth": _growth(native),
                                       "limit": None}  # reported only: wgpu-native's own bookkeeping
    for metric in metrics.values():
        metric["flat"] = metric["limit"] is None or metric["growth"] <= metric["limit"]
    result["memory"] = metrics
    result["flat"] = all(m["flat"] for m in metrics.values())
    result["ok"] = result["flat"] and result["outputs_stable"]
    return result


def check_threads(interpreter, config, shapes: dict, *, threads: int = 4, runs: int = 50, seed: int = 0) -> dict:
    """Each thread runs its own feeds `runs` times, first on a session of its own, then all on one
    shared session; every output is compared with a single-threaded run of the same feeds."""
    from .cli import random_feeds

    inputs = interpreter.graph.inputs
    feeds = [random_feeds(inputs, shapes, seed + t) for t in range(threads)]
    shared = interpreter.create_session(config)
    references = [shared.run(f) for f in feeds]
    result = {"threads": threads, "runs_per_thread": runs}
    for mode in ("own_session", "shared_session"):
        problems: list[str] = []
        lock = threading.Lock()
        sessions = [interpreter.create_session(config) if mode == "own_session" else shared
                    for _ in range(threads)]
        barrier = threading.Barrier(threads)

        def work(t: int, sessions=sessions, problems=problems, lock=lock, barrier=barrier) -> None:
            try:
                barrier.wait()  # start together: as much overlap as the session allows
                for run in range(runs):
                    problem = mismatch(sessions[t].run(feeds[t]), references[t])
                    if problem:
                        with lock:
                            problems.append(f"thread {t} run {run}: {problem}")
                        return
            except Exception as exc:  # reported, not raised: the other threads' results still count
                with lock:
                    problems.append(f"thread {t}: {type(exc).__name__}: {exc}")

        start = time.perf_counter()
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        result[mode] = {"ok": not problems, "problems": problems[:10],
                        "seconds": round(time.perf_counter() - start, 3)}
    result["ok"] = result["own_session"]["ok"] and result["shared_session"]["ok"]
    return result


def default_targets() -> list[tuple[str, ...]]:
    """numpy, and the GPU with numpy fallback when wgpu finds an adapter."""
    from ..backends.wgpu.context import gpu_available

    return [("numpy",)] + ([("wgpu", "numpy")] if gpu_available() is None else [])


def soak_model(model, *, targets: list[tuple[str, ...]] | None = None, adapter=None, shapes: dict | None = None,
               runs: int = DEFAULT_RUNS, sample_every: int | None = None, warmup: int | None = None,
               thresholds: Thresholds = Thresholds(), threads: int = 4, thread_runs: int = 50, seed: int = 0,
               show_progress: bool = False) -> dict:
    """Soak a model (path, bytes, ModelProto or Model) on each provider list in targets, then check
    threads. Returns {"model", "input_shapes", "targets": [...], "ok"}."""
    from ..engine.config import Config
    from ..engine.interpreter import Interpreter
    from .cli import random_feeds, resolve_shapes

    interpreter = Interpreter(model)
    shapes = resolve_shapes(interpreter.graph.inputs, shapes or {})
    feeds = random_feeds(interpreter.graph.inputs, shapes, seed)
    report = {"model": str(model) if isinstance(model, (str, os.PathLike)) else type(model).__name__,
              "input_shapes": {k: list(v) for k, v in shapes.items()}, "targets": []}
    for providers in targets or default_targets():
        config = Config(providers=providers, adapter=adapter if "wgpu" in providers else None)
        session = interpreter.create_session(config)
        result = soak_session(session, feeds, runs=runs, sample_every=sample_every, warmup=warmup,
                              thresholds=thresholds, show_progress=show_progress,
                              label=f"soak {','.join(providers)}")
        result["providers"] = list(providers)
        result["steps_per_backend"] = session.report()["ops_per_backend"]
        if threads > 1:
            result["threads"] = check_threads(interpreter, config, shapes, threads=threads, runs=thread_runs,
                                              seed=seed + 1)
            result["ok"] = result["ok"] and result["threads"]["ok"]
        report["targets"].append(result)
        del session
    report["ok"] = all(t["ok"] for t in report["targets"])
    return report


# ---------------------------------------------------------------------------------------- text
def _size(n) -> str:
    if n is None:
        return "-"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def format_report(report: dict) -> str:
    lines = [f"model: {report['model']}   inputs: "
             + ", ".join(f"{k} {v}" for k, v in report["input_shapes"].items())]
    for t in report["targets"]:
        lines.append("")
        lines.append(f"[{','.join(t['providers'])}] {t['runs']} runs in {t['seconds']:.1f} s "
                     f"({t['ms_per_run']:.3f} ms/run), samples every {t['sample_every']} runs, "
                     f"warm-up {t['warmup_runs']} runs: {'OK' if t['ok'] else 'FAILED'}")
        for name, m in t["memory"].items():
            bytes_like = name != "gpu_objects"
            show = _size if bytes_like else (lambda v: "-" if v is None else str(v))
            limit = "reported" if m["limit"] is None else f"limit {show(m['limit'])}"
            lines.append(f"  {name:17} before {show(m.get('before'))}, after warm-up {show(m['after_warmup'])}, "
                         f"end {show(m['after'])}, growth {show(m['growth'])} ({limit}) "
                         f"{'flat' if m['flat'] else 'GROWS'}")
        stable = "equal to the first run's at every sample" if t["outputs_stable"] else t["unstable"]
        lines.append(f"  outputs: {stable}")
        threads = t.get("threads")
        if threads:
            for mode in ("own_session", "shared_session"):
                r = threads[mode]
                lines.append(f"  threads ({threads['threads']} x {threads['runs_per_thread']} runs, "
                             f"{mode.replace('_', ' ')}): {'match single-threaded' if r['ok'] else r['problems']} "
                             f"in {r['seconds']:.2f} s")
    lines.append("")
    lines.append("soak: OK" if report["ok"] else "soak: FAILED")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- CLI
def add_arguments(p) -> None:
    p.add_argument("model", help="a .wgnn or .onnx model, or zoo:NAME")
    p.add_argument("--provider", action="append",
                   help="backend(s) in order of preference, e.g. wgpu,numpy (repeatable: one soak each; "
                        "default: numpy, and wgpu,numpy when a GPU adapter exists)")
    p.add_argument("--adapter", help="GPU adapter: index, name substring, vulkan/metal/d3d12/gl, ...")
    p.add_argument("--shape", action="append", metavar="NAME=DIMS",
                   help="input shape NAME=D0,D1,... (repeatable); symbolic dims default to 1")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"runs per provider (default {DEFAULT_RUNS})")
    p.add_argument("--sample-every", type=int, metavar="K", help="runs between memory samples (default runs/100)")
    p.add_argument("--warmup", type=int, metavar="N", help="runs left out of the growth verdict (default runs/10)")
    p.add_argument("--max-rss-growth-mb", type=float, default=DEFAULT_RSS_GROWTH_MB,
                   help=f"allowed RSS growth after warm-up in MiB (default {DEFAULT_RSS_GROWTH_MB:g})")
    p.add_argument("--max-gpu-growth", type=int, default=0, metavar="N",
                   help="allowed growth of live GPU objects (count) and of their bytes (default 0)")
    p.add_argument("--threads", type=int, default=4, help="threads of the thread check (default 4; 1: skip it)")
    p.add_argument("--thread-runs", type=int, default=50, help="runs per thread (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--json", action="store_true", help="print JSON (samples included)")


def run_from_args(args) -> int:
    from .cli import _existing_file, _providers, parse_shape_options

    if args.runs < 1 or args.threads < 1 or args.thread_runs < 1:
        raise InputError("--runs, --threads and --thread-runs must be at least 1")
    if args.sample_every is not None and args.sample_every < 1:
        raise InputError("--sample-every must be at least 1")
    path = _existing_file(args.model)
    targets = [_providers([p]) for p in args.provider] if args.provider else None
    thresholds = Thresholds(int(args.max_rss_growth_mb * (1 << 20)), args.max_gpu_growth, args.max_gpu_growth)
    report = soak_model(path, targets=targets, adapter=args.adapter, shapes=parse_shape_options(args.shape),
                        runs=args.runs, sample_every=args.sample_every, warmup=args.warmup, thresholds=thresholds,
                        threads=args.threads, thread_runs=args.thread_runs, seed=args.seed,
                        show_progress=not args.json)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    from ..engine.errors import WgnnError

    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.soak", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except WgnnError as exc:
        print(f"wgnn soak: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
