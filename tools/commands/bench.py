"""`wgnn bench MODEL`: cold start (load, prepare with shader compilation, first run), median and p90
latency over warm runs, optionally side by side with onnxruntime (--vs), per-op time (--per-op) and a
Chrome/Perfetto trace (--trace). `wgnn bench --kernels`: the adapter's FMA peak, copy bandwidth and
dispatch cost, and wgnn's kernels against them (tools/bench_kernels.py). Benchmarks are tools:
nothing here asserts a speed."""
from __future__ import annotations

import json
from pathlib import Path

from ...engine.errors import InputError, WgnnError


def register(subparsers) -> None:
    from ...engine.config import NUMPY_THREADS_HELP, PRECISIONS, STORAGES

    p = subparsers.add_parser(
        "bench", help="latency, cold start and per-op GPU time of a model (optionally vs onnxruntime)",
        description="Benchmark a model: cold start split into load, prepare (shader compilation counted apart) "
                    "and first run; median and p90 latency over warm runs; dispatches per run. --vs onnxruntime "
                    "alternates onnxruntime runs on the same inputs; --per-op and --trace time every op in extra "
                    "profiled runs (GPU timestamp queries on wgpu, wall clock on numpy). --kernels (no MODEL) "
                    "measures the adapter(s) instead: FMA peak, copy bandwidth, dispatch cost and wgnn's MatMul "
                    "and Conv kernels as fractions of them.")
    p.add_argument("model", nargs="?", help="a .wgnn or .onnx model, or zoo:NAME (not with --kernels)")
    p.add_argument("--provider", action="append",
                   help="backend(s) in order of preference, e.g. wgpu,numpy (repeatable; default numpy)")
    p.add_argument("--adapter", help="GPU adapter: index, name substring, vulkan/metal/d3d12/gl, ... "
                                      "(--kernels: also a comma list or all)")
    p.add_argument("--storage", choices=STORAGES, default="auto", help="NC4HW4 storage on the GPU (default auto)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default), fp16 feature maps, or fp16-arith (16-bit storage and arithmetic)")
    p.add_argument("--shape", action="append", metavar="NAME=DIMS",
                   help="input shape NAME=D0,D1,... (repeatable); symbolic dims default to 1")
    p.add_argument("--warmup", type=int, default=3, metavar="N", help="untimed runs before timing (default 3)")
    p.add_argument("--runs", type=int, default=None, metavar="N", help="timed runs (default 20; --kernels 5)")
    p.add_argument("--vs", choices=["onnxruntime"], help="also time onnxruntime (CPU), alternating run by run")
    p.add_argument("--per-op", action="store_true", help="time every op in --runs extra profiled runs")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace of the profiled runs")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    first_ever = p.add_mutually_exclusive_group()
    first_ever.add_argument("--no-driver-cache", action="store_true",
                            help="turn the GPU drivers' on-disk shader caches off (Mesa, NVIDIA), so the cold start "
                                 "is a machine's first-ever run: lavapipe compiles each kernel at its first dispatch")
    first_ever.add_argument("--empty-driver-cache", action="store_true",
                            help="start the drivers' shader caches empty, in a temporary folder: a first-ever run "
                                 "with the cache on, which lavapipe's code generation fills ahead of the first run, "
                                 "side by side (driver warm-ups)")
    p.add_argument("--lavapipe-threads", type=int, metavar="N",
                   help="worker threads of Mesa's CPU drivers for the process (LP_NUM_THREADS): 0 runs each "
                        "dispatch on the driver's queue thread, faster for small models on few cores (default: the "
                        "session picks 0 for a model with little work per dispatch, else one per core)")
    p.add_argument("--numpy-threads", type=int, metavar="N", help=NUMPY_THREADS_HELP)
    p.add_argument("--kernels", action="store_true",
                   help="benchmark the adapter(s) and wgnn's kernels instead of a model (--runs defaults to 5)")
    p.add_argument("--quick", action="store_true", help="--kernels with small sizes (seconds, for smoke tests)")
    p.add_argument("--case", action="append", metavar="NAME",
                   help="--kernels: only the kernel cases whose name contains NAME (repeatable)")
    p.add_argument("--alternate", metavar="VARIABLE=V1,V2,...",
                   help="--kernels --case: time each case with the environment variable at each value in turn "
                        "(an empty value: unset), in rounds, and print each value's time against the first's "
                        "(e.g. WGNN_ATTENTION_SPLIT=,0,64)")
    p.add_argument("--rounds", type=int, default=4, metavar="N", help="--alternate: rounds of all values (default 4)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args) -> int:
    from ...engine.config import Config
    from ..bench import bench_model, trace_document
    from ..cli import _existing_file, _numpy_threads, _providers, is_wgnn_file, parse_shape_options

    if args.warmup < 0:
        raise InputError("--warmup must be 0 or more")
    if args.runs is not None and args.runs < 1:
        raise InputError("--runs must be at least 1")
    if args.kernels:
        return cmd_bench_kernels(args)
    if args.quick or args.case or args.alternate:
        raise InputError("--quick, --case and --alternate go with --kernels")
    if args.model is None:
        raise InputError("give a MODEL to benchmark, or --kernels to benchmark the adapter")
    args.runs = 20 if args.runs is None else args.runs
    path = _existing_file(args.model)
    if args.vs and is_wgnn_file(path):
        raise WgnnError(f"--vs {args.vs} needs the ONNX model, and {path} is a .wgnn file")
    config = Config(providers=_providers(args.provider), adapter=args.adapter, storage=args.storage,
                    precision=args.precision, numpy_threads=_numpy_threads(args))
    driver_cache = "off" if args.no_driver_cache else "empty" if args.empty_driver_cache else "on"
    result = bench_model(path, config, parse_shape_options(args.shape), warmup=args.warmup, runs=args.runs,
                         vs=args.vs, profile=bool(args.per_op or args.trace), seed=args.seed,
                         show_progress=not args.json, driver_cache=driver_cache,
                         lavapipe_threads=args.lavapipe_threads)
    events = result.pop("trace_events", [])
    if args.trace:
        Path(args.trace).write_text(json.dumps(trace_document(events)))
        result["trace"] = {"file": str(args.trace), "events": len(events)}
    if not args.per_op:
        result.pop("per_op", None)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_bench(result))
    return 0


def cmd_bench_kernels(args) -> int:
    from ..bench_kernels import bench_kernels, format_kernels, parse_adapters

    if args.model is not None:
        raise InputError("--kernels benchmarks the adapter and takes no MODEL")
    for option in ("vs", "per_op", "trace", "shape", "provider", "no_driver_cache", "empty_driver_cache"):
        if getattr(args, option):
            raise InputError(f"--{option.replace('_', '-')} does not go with --kernels")
    if args.lavapipe_threads is not None:
        from ...backends.wgpu.context import set_lavapipe_threads

        set_lavapipe_threads(args.lavapipe_threads)
    runs = 5 if args.runs is None else args.runs
    if args.alternate:
        return bench_alternate(args, runs)
    result = bench_kernels(parse_adapters(args.adapter), quick=args.quick, warmup=args.warmup,
                           runs=runs, show_progress=not args.json, cases=args.case)
    print(json.dumps(result, indent=2) if args.json else format_kernels(result))
    return 0


def bench_alternate(args, runs: int) -> int:
    """--kernels --case ... --alternate VARIABLE=V1,V2,...: the cases with each value in turn."""
    import re

    from ..bench_kernels import alternate, format_alternate, parse_adapters

    variable, _, listed = args.alternate.partition("=")
    values = listed.split(",")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable) or len(values) < 2:
        raise InputError(f"--alternate {args.alternate!r}: expected VARIABLE=V1,V2,... with two values or more "
                         "(an empty value: unset)")
    if not args.case:
        raise InputError("--alternate needs --case: the kernel cases to time")
    if args.rounds < 1:
        raise InputError(f"--rounds {args.rounds}: expected 1 or more")
    results = [alternate(index, args.case, variable, values, rounds=args.rounds, quick=args.quick,
                         warmup=args.warmup, runs=runs, show_progress=not args.json)
               for index in parse_adapters(args.adapter)]
    print(json.dumps(results, indent=2) if args.json else "\n\n".join(format_alternate(r) for r in results))
    return 0


def _ms(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _rate(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _warmup_text(warmups: dict | None) -> str:
    if not warmups or not warmups["kernels"]:
        return ""
    return (f"; the driver generated {warmups['kernels']} kernels' code during prepare "
            f"({warmups['seconds'] * 1e3:.0f} ms over the threads)")


def _background_text(background: dict | None) -> str:
    if not background or not background["tasks"]:
        return ""
    quick = (f"; {background['quick_first']} step(s) ran a kernel quicker to generate until then"
             if background["quick_first"] else "")
    return (f"\nafter the first run: {background['tasks']} background task(s) (deferred pipelines, kernels' "
            f"code) finished {background['ms']:.0f} ms later, before the timed runs{quick}")


def format_bench(result: dict) -> str:
    from ..cli import _shape_text, table

    cold, lat = result["cold_start_ms"], result["latency_ms"]
    adapter = f"   adapter: {result['adapter']}" if result["adapter"] else ""
    if result.get("lavapipe_threads") is not None:
        adapter += f", {result['lavapipe_threads']} lavapipe worker threads"
        if result.get("lavapipe_threads_why"):
            adapter += f" ({result['lavapipe_threads_why']})"
    if result.get("readback_poll_us"):
        adapter += f", outputs polled for up to {result['readback_poll_us']} us"
    if result.get("numpy_blas"):  # its kernels choose their products' sizes by it (backends/numpy/blas.py)
        adapter += f"   numpy's BLAS: {result['numpy_blas']}; compiled loops: {result.get('numpy_compiled')}"
    auto = result.get("providers_choice") or {}
    if "predicted_ms" in auto:  # providers=["auto"]: why this model runs where it does
        adapter += (f"   (auto: predicted wgpu {auto['predicted_ms']['wgpu']:.3f} ms, numpy "
                    f"{auto['predicted_ms']['numpy']:.3f} ms for {auto['model_mflop']:.1f} MFLOP)")
    lines = [f"model: {result['model']}   providers: {', '.join(result['providers'])}{adapter}",
             "inputs: " + ", ".join(f"{n} {_shape_text(s)}" for n, s in result["input_shapes"].items()),
             f"cold start: load {cold['load']:.1f} ms, prepare {cold['prepare']:.1f} ms (shader compilation "
             f"{cold['shader_compile']:.1f} ms, {result['pipelines_compiled']} pipelines"
             + (f", {result['compile_threads']} threads" if result.get("compile_threads", 0) > 1 else "") + "), "
             f"first run {cold['first_run']:.1f} ms"
             + (" (drivers' shader caches off)" if result.get("driver_shader_cache") == "off" else
                " (drivers' shader caches empty)" if result.get("driver_shader_cache") == "empty" else "")
             + _warmup_text(result.get("driver_warmups")) + _background_text(result.get("background")),
             "steps: " + ", ".join(f"{b} {n}" for b, n in result["steps_per_backend"].items())
             + f"; {result['dispatches']} GPU dispatches per run; {result['views']} view(s); "
               f"{result['segments']} segment(s); "
               f"{result['fallbacks']} fallback(s)"
             + (f"; host encoding {result['encode_us_per_step']:.1f} us per GPU step, recorded ahead of the run"
                if result.get("encode_us_per_step") is not None else ""),
             ""]
    heading = ["runner", "median ms", "p90 ms", "min ms", "max ms"]
    rows = [["wgnn", _ms(lat["median"]), _ms(lat["p90"]), _ms(lat["min"]), _ms(lat["max"])]]
    vs = result.get("vs")
    if vs:
        theirs = vs["latency_ms"]
        rows.append([vs["name"], _ms(theirs["median"]), _ms(theirs["p90"]), _ms(theirs["min"]), _ms(theirs["max"])])
    lines.append(f"latency over {result['runs']} runs after {result['warmup']} warm-up"
                 + (f", alternating with {vs['name']} on the same inputs:" if vs else ":"))
    lines.append(table(heading, rows))
    if result.get("page_faults_per_run") is not None:
        lines.append(f"host page faults per wgnn run: {result['page_faults_per_run']:.1f} (minor; 0 when a run "
                     "reuses its memory)")
    thread_runs = result.get("numpy_thread_runs")
    if thread_runs is not None:
        lines.append(f"numpy loops' threads, chosen per run: {thread_runs['threads']} runs on their threads, "
                     f"{thread_runs['one_thread']} on one (probes included), {thread_runs['switches']} switch(es)")
    if vs:
        error = "-" if vs["max_rel_error"] is None else f"{vs['max_rel_error']:.2g}"
        interval = vs.get("ratio_interval")
        spread = f" (95% interval x{interval[0]:.2f}-{interval[1]:.2f})" if interval else ""
        lines.append(f"ratio wgnn / {vs['name']} (medians): x{vs['ratio']:.2f}{spread}   "
                     f"max rel error of the outputs: {error}")
    per_op = result.get("per_op")
    if per_op:
        methods = ", ".join(f"{b}: {m}" for b, m in per_op["methods"].items())
        lines += ["", f"per op: median of {per_op['profiled_runs']} profiled runs ({methods}); total "
                      f"{per_op['total_ms']:.3f} ms of {per_op['wall_ms_median']:.3f} ms per profiled run"]
        if "wall" in per_op["methods"].get("wgpu", ""):
            lines.append("  (this adapter has no timestamp-query: GPU segments are timed whole by wall clock)")
        lines.append(table(["op", "type", "backend", "kernel", "shape", "ms", "%", "GFLOP/s", "GB/s"],
                           [[r["op"], r["op_type"], r["backend"], r["kernel"], _shape_text(r["shape"]),
                             _ms(r["median_ms"]), f"{r['percent']:.1f}", _rate(r["gflops"]), _rate(r["gbps"])]
                            for r in per_op["rows"]]))
    if "trace" in result:
        lines += ["", f"wrote {result['trace']['file']} ({result['trace']['events']} events; open in "
                      "https://ui.perfetto.dev or chrome://tracing)"]
    return "\n".join(lines)
