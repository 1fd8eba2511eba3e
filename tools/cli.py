"""The wgnn command line.

    wgnn convert model.onnx model.wgnn
    wgnn info model.wgnn --shape input=1,3,224,224 [--json]
    wgnn run model.onnx [--input input=x.npy] [--compare onnxruntime] [--json]
    wgnn demo [--model resnet]
    wgnn adapters
    wgnn bench model.onnx [--vs onnxruntime] [--per-op] [--trace out.json]
    wgnn bench --kernels [--adapter all] [--quick]
    wgnn tune [--adapter A] [--show] [--clear]
    wgnn soak model.onnx [--runs N]
    wgnn conform [--ops REGEX] [--out report/]
    wgnn shader kernel.wgsl --input x=x.npy --output y:SHAPE [--ref mod:fn] [--time] [--watch]
    wgnn --version

Errors wgnn raises on purpose (missing file, bad model, bad feed ...) print one line
`wgnn: error: <message>` on stderr and exit with status 2; a failed comparison exits with 1.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ..engine.errors import InputError, ModelError, WgnnError

CONVERT_PROGRESS_NODES = 200  # show the progress bar from this many ONNX nodes on
ID_RANGE = 100  # random int inputs that are not masks are token ids in [0, ID_RANGE)


# ------------------------------------------------------------------------------------ helpers
def parse_shape_options(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """["name=1,3,224,224", ...] -> {"name": (1, 3, 224, 224)}; "name=" is a scalar."""
    shapes = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise InputError(f"--shape {item!r}: expected NAME=D0,D1,... (e.g. input=1,3,224,224)")
        try:
            shapes[name] = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            raise InputError(f"--shape {item!r}: dims must be integers separated by commas") from None
        if any(d < 0 for d in shapes[name]):
            raise InputError(f"--shape {item!r}: dims must not be negative")
    return shapes


def resolve_shapes(inputs, given: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Concrete shapes for the graph inputs: given ones as they are; in the others a symbolic dim
    takes the size it has in a given shape (same symbol), else 1."""
    declared = {t.name: t for t in inputs}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(declared)}")
    symbols: dict[str, int] = {}
    for name, shape in given.items():
        info = declared[name]
        if info.shape is not None and len(info.shape) == len(shape):
            for dim, size in zip(info.shape, shape, strict=True):
                if isinstance(dim, str):
                    symbols.setdefault(dim, size)
    shapes = {}
    for info in inputs:
        if info.name in given:
            shapes[info.name] = tuple(given[info.name])
        elif info.shape is None:
            raise InputError(f'input "{info.name}" has an unknown shape: pass --shape {info.name}=D0,D1,...')
        else:
            shapes[info.name] = tuple(d if isinstance(d, int) else symbols.get(d, 1) for d in info.shape)
    return shapes


def random_feeds(inputs, shapes: dict[str, tuple[int, ...]], seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the right dtype and shape: floats standard normal, ints token ids in
    [0, 100) unless the name says it is a mask (then ones), bools random."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in inputs:
        shape, dtype = shapes[info.name], np.dtype(info.dtype or "float32")
        if dtype.kind == "f":
            feeds[info.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[info.name] = rng.random(shape) < 0.5
        elif "mask" in info.name.lower():
            feeds[info.name] = np.ones(shape, dtype)
        else:
            feeds[info.name] = rng.integers(0, ID_RANGE, shape).astype(dtype)
    return feeds


def summarize(name: str, value: np.ndarray) -> dict:
    """name, shape, dtype, min/max/mean (None for empty tensors) of one output."""
    value = np.asarray(value)
    stats = {"min": None, "max": None, "mean": None}
    if value.size:
        as_float = value.astype(np.float64)
        stats = {"min": float(as_float.min()), "max": float(as_float.max()), "mean": float(as_float.mean())}
    return {"name": name, "shape": list(value.shape), "dtype": value.dtype.name, **stats}


def compare_outputs(ours: dict[str, np.ndarray], reference: dict[str, np.ndarray], tolerance: float) -> list[dict]:
    """Per output: max abs error and max rel error (max abs error / max |reference|; the abs
    error itself when the reference is all zeros); ok when shapes agree and rel <= tolerance."""
    rows = []
    for name, want in reference.items():
        row = {"name": name, "max_abs_error": None, "max_rel_error": None, "ok": False}
        if name not in ours:
            rows.append({**row, "error": "wgnn produced no output of this name"})
            continue
        got, want = np.asarray(ours[name]), np.asarray(want)
        if got.shape != want.shape:
            row["error"] = f"shape {list(got.shape)} != reference {list(want.shape)}"
        else:
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            abs_err = float(diff.max()) if diff.size else 0.0
            scale = float(np.abs(want.astype(np.float64)).max()) if want.size else 0.0
            rel_err = abs_err / scale if scale > 0 else abs_err  # NaN propagates and fails below
            row.update(max_abs_error=abs_err, max_rel_error=rel_err, ok=bool(rel_err <= tolerance))
        rows.append(row)
    return rows


def onnxruntime_outputs(model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run an ONNX model (path or ModelProto) in onnxruntime on the CPU; outputs by name."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise WgnnError("comparing needs onnxruntime: pip install onnxruntime") from None
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    try:
        session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, feeds), strict=True))
    except Exception as exc:  # onnxruntime's pybind exception types share no base but Exception
        raise WgnnError(f"onnxruntime could not run the model: {exc}") from None


def is_wgnn_file(path: Path) -> bool:
    from ..models.format import FILE_IDENTIFIER, MAGIC_OFFSET

    with open(path, "rb") as f:
        head = f.read(MAGIC_OFFSET + 4)
    return head[MAGIC_OFFSET:MAGIC_OFFSET + 4] == FILE_IDENTIFIER


def _existing_file(path: str) -> Path:
    """The model file named on the command line; "zoo:NAME" (or "zoo:NAME:KEY=VALUE,...", the
    builder's options, e.g. zoo:mobilenetv2:size=224) writes that zoo model to a temporary .onnx
    file first, so every command (and --compare onnxruntime) works on zoo models."""
    if path.startswith("zoo:"):
        import atexit
        import shutil
        import tempfile

        import onnx

        from ..models.zoo import build, parse_spec

        try:
            name, options = parse_spec(path[4:])  # its messages name the model and option
        except ValueError as e:
            raise ModelError(str(e)) from None
        try:
            model = build(name, **options)
        except ValueError as e:  # sizes the builder refuses
            raise ModelError(f"{path}: {e}") from None
        except MemoryError as e:  # sizes too large for this machine's memory
            raise ModelError(f"{path}: too large to build here ({e})") from None
        folder = tempfile.mkdtemp(prefix="wgnn-zoo-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        target = Path(folder) / f"{name}.onnx"
        onnx.save(model, str(target))
        return target
    p = Path(path)
    if not p.exists():
        raise ModelError(f"model file not found: {p}")
    if p.is_dir():
        raise ModelError(f"model path is a directory, not a file: {p}")
    return p


def _human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


def _human_count(n: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{int(n)} {unit}".strip()


def _shape_text(shape) -> str:
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _number(x) -> str:
    return "-" if x is None else f"{x:.6g}"


def table(headers: list[str], rows: list[list]) -> str:
    """A plain-text table with aligned columns."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _op_label(node) -> str:
    kind = node.attrs.get("kind")
    return f"{node.op_type}.{kind}" if isinstance(kind, str) else node.op_type


def _providers(values: list[str] | None) -> tuple[str, ...]:
    names = [p.strip() for v in values or ["numpy"] for p in v.split(",") if p.strip()]
    return tuple(names) or ("numpy",)


def _numpy_threads(args) -> int | str:
    value = getattr(args, "numpy_threads", None)
    return "auto" if value is None else value


# ----------------------------------------------------------------------------------- commands
def _config(args):
    from ..engine.config import Config

    return Config(providers=_providers(args.provider), adapter=getattr(args, "adapter", None),
                  numpy_threads=_numpy_threads(args))


def cmd_adapters(args) -> int:
    from .. import adapters
    from ..backends.wgpu.context import gpu_available, select_adapter

    found = adapters()
    if args.json:
        print(json.dumps({"adapters": found, "unavailable": gpu_available()}, indent=2))
        return 0
    if not found:
        print(f"no GPU adapter: {gpu_available()}")
        return 1
    best = select_adapter(None)
    rows = [[("*" if a["index"] == best else "") + str(a["index"]), a["name"], a["backend"], a["adapter_type"],
             a["driver"], ", ".join(a["features"]) or "-",
             _human_bytes(a["limits"].get("max-storage-buffer-binding-size", 0)),
             a["limits"].get("max-texture-dimension-3d", "-"),
             a["limits"].get("max-compute-workgroups-per-dimension", "-")] for a in found]
    headers = ["#", "name", "backend", "type", "driver", "features", "max binding", "max 3D tex", "max groups"]
    print(table(headers, rows))
    print("* = chosen by default (set WGNN_ADAPTER or --adapter to pick another)")
    return 0


def cmd_convert(args) -> int:
    """ONNX -> .wgnn, with a summary of what changed."""
    from ..models.format import save_model
    from .convert.onnx import convert_onnx

    source = _existing_file(args.input)
    if is_wgnn_file(source):
        raise ModelError(f"{source} is already a .wgnn file; convert takes an ONNX model")
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        raise ModelError("converting ONNX needs the onnx package: pip install 'wgnn[convert]'") from None
    try:
        onnx_nodes = len(onnx.load(str(source), load_external_data=False).graph.node)
    except (DecodeError, ValueError) as exc:
        raise ModelError(f"{source} is not a readable ONNX model: {exc}") from None
    start = time.perf_counter()
    model = convert_onnx(source, optimize=not args.no_optimize,
                         show_progress=onnx_nodes >= CONVERT_PROGRESS_NODES)
    save_model(model, args.output)
    seconds = time.perf_counter() - start
    params = sum(int(v.size) for v in model.graph.initializers.values())
    param_bytes = sum(int(v.nbytes) for v in model.graph.initializers.values())
    summary = {"input": str(source), "output": str(args.output), "onnx_nodes": onnx_nodes,
               "wgnn_nodes": len(model.graph.nodes), "parameters": params, "parameter_bytes": param_bytes,
               "file_bytes": Path(args.output).stat().st_size, "seconds": round(seconds, 3)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"converted {source} -> {args.output} in {seconds:.2f} s")
    print(f"  nodes:      {onnx_nodes} ONNX -> {summary['wgnn_nodes']} wgnn")
    print(f"  parameters: {params:,} ({_human_bytes(param_bytes)})")
    print(f"  output:     {args.output} ({_human_bytes(summary['file_bytes'])})")
    return 0


def cmd_info(args) -> int:
    """Inputs/outputs, op histogram, parameters, FLOPs and planned memory for given shapes."""
    from ..engine.interpreter import Interpreter

    path = _existing_file(args.model)
    interp = Interpreter(path)
    graph = interp.graph
    shapes = resolve_shapes(graph.inputs, parse_shape_options(args.shape))
    session = interp.create_session(_config(args))
    session.resize(shapes)
    report = session.report()
    info = {
        "model": str(path),
        "format": "wgnn" if is_wgnn_file(path) else "onnx",
        "producer": f"{interp.model.producer_name} {interp.model.producer_version}".strip(),
        "source": interp.model.source,
        "inputs": [{"name": t.name, "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}
                   for t in graph.inputs],
        "outputs": [{"name": t.name, "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)}
                    for t in graph.outputs],
        "nodes": len(graph.nodes),
        "ops": dict(sorted(Counter(_op_label(n) for n in graph.nodes).items(), key=lambda kv: (-kv[1], kv[0]))),
        "parameters": {"count": sum(int(v.size) for v in graph.initializers.values()),
                       "bytes": sum(int(v.nbytes) for v in graph.initializers.values())},
        "input_shapes": {k: list(v) for k, v in shapes.items()},
        "output_shapes": {t.name: list(session.shapes.specs[t.name].shape) for t in graph.outputs},
        "flops": int(report["flops"]),
        "memory": report["memory"],
        "ops_per_backend": report["ops_per_backend"],
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"model: {path} ({info['format']}; {info['producer'] or 'unknown producer'})")
    if info["source"]:
        print(f"source: {info['source']}")
    print("\ninputs:")
    print(table(["name", "dtype", "shape", "planned shape"],
                [[t["name"], t["dtype"], _shape_text(t["shape"]), _shape_text(shapes[t["name"]])]
                 for t in info["inputs"]]))
    print("\noutputs:")
    print(table(["name", "dtype", "shape", "planned shape"],
                [[t["name"], t["dtype"], _shape_text(t["shape"]), _shape_text(info["output_shapes"][t["name"]])]
                 for t in info["outputs"]]))
    print(f"\nops ({info['nodes']} nodes):")
    print(table(["op", "count"], [[op, n] for op, n in info["ops"].items()]))
    params = info["parameters"]
    print(f"\nparameters: {params['count']:,} ({_human_bytes(params['bytes'])})")
    print(f"FLOPs:      {_human_count(info['flops'], 'FLOPs')} for the planned shapes")
    for backend, memory in info["memory"].items():
        print(f"memory ({backend}): planned peak {_human_bytes(memory['planned_peak_bytes'])}, "
              f"{_human_bytes(memory['naive_bytes'])} without reuse")
    return 0


def cmd_run(args) -> int:
    """Run a model on given or random inputs; optionally compare with onnxruntime."""
    from ..engine.interpreter import Interpreter

    path = _existing_file(args.model)
    if args.compare and is_wgnn_file(path):
        raise WgnnError(f"--compare {args.compare} needs the ONNX model, and {path} is a .wgnn file: "
                        "run the comparison on the .onnx file it was converted from")
    interp = Interpreter(path)
    inputs = interp.graph.inputs
    declared = {t.name for t in inputs}
    feeds, sources = {}, {}
    for item in args.input or []:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise InputError(f"--input {item!r}: expected NAME=FILE.npy")
        if name not in declared:
            raise InputError(f"--input {item!r}: the model has no input {name!r}; its inputs are {sorted(declared)}")
        if not Path(file).is_file():
            raise InputError(f"--input {item!r}: file not found: {file}")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(f"--input {item!r}: cannot read {file} as .npy: {exc}") from None
        sources[name] = file
    given = {name: tuple(value.shape) for name, value in feeds.items()}
    given.update({k: v for k, v in parse_shape_options(args.shape).items() if k not in feeds})
    shapes = resolve_shapes(inputs, given)
    missing = [t for t in inputs if t.name not in feeds]
    feeds.update(random_feeds(missing, shapes, args.seed))
    sources.update({t.name: "random" for t in missing})

    providers = _providers(args.provider)
    session = interp.create_session(_config(args))
    start = time.perf_counter()
    outputs = session.run(feeds)
    seconds = time.perf_counter() - start
    result = {
        "model": str(path), "providers": list(providers),
        "ops_per_backend": session.report()["ops_per_backend"],
        "inputs": [{"name": n, "shape": list(v.shape), "dtype": v.dtype.name, "source": sources[n]}
                   for n, v in feeds.items()],
        "outputs": [summarize(n, v) for n, v in outputs.items()],
        "seconds": round(seconds, 6),
    }
    status = 0
    if args.compare:
        rows = compare_outputs(outputs, onnxruntime_outputs(path, feeds), args.tolerance)
        ok = all(r["ok"] for r in rows)
        result["compare"] = {"reference": args.compare, "tolerance": args.tolerance, "outputs": rows, "ok": ok}
        status = 0 if ok else 1
    if args.json:
        print(json.dumps(result, indent=2))
        return status
    print(f"model: {path}   providers: {', '.join(providers)}   "
          f"ran in {seconds * 1e3:.1f} ms (first run, planning included)")
    print(table(["input", "shape", "dtype", "source"],
                [[i["name"], _shape_text(i["shape"]), i["dtype"], i["source"]] for i in result["inputs"]]))
    print()
    print(table(["output", "shape", "dtype", "min", "max", "mean"],
                [[o["name"], _shape_text(o["shape"]), o["dtype"], _number(o["min"]), _number(o["max"]),
                  _number(o["mean"])] for o in result["outputs"]]))
    if args.compare:
        print(f"\ncompared with {args.compare} (tolerance {args.tolerance:g} on max rel error):")
        print(table(["output", "max abs error", "max rel error", "result"],
                    [[r["name"], _number(r["max_abs_error"]), _number(r["max_rel_error"]),
                      "ok" if r["ok"] else f"FAIL {r.get('error', '')}".strip()] for r in rows]))
    return status


def cmd_demo(args) -> int:
    from .demo import demo_agrees, format_demo, run_demo

    result = run_demo(args.model, providers=_providers(args.provider) if args.provider else None,
                      runs=args.runs, batch=args.batch, seed=args.seed, adapter=args.adapter)
    print(json.dumps(result, indent=2) if args.json else format_demo(result))
    return 0 if demo_agrees(result) else 1


def version_text() -> str:
    from .. import __version__

    lines = [f"wgnn {__version__}"]
    try:
        import wgpu

        lines.append(f"wgpu {wgpu.__version__}")
    except ImportError:
        lines.append("wgpu not installed")
        return "\n".join(lines)
    from .. import adapters
    from ..backends.wgpu.context import gpu_available, select_adapter

    found = adapters()
    if found:
        best = found[select_adapter(None)]
        lines.append(f"adapter {best['name']} ({best['backend']}, {best['driver']}); "
                     f"{len(found)} adapter(s): see `wgnn adapters`")
    else:
        lines.append(f"no GPU adapter ({gpu_available()}): models run on numpy")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from .demo import DEFAULT_MODEL, demo_models

    parser = argparse.ArgumentParser(prog="wgnn", description="wgnn: neural-network inference with WGSL/wgpu "
                                     "and a numpy reference backend.")
    parser.add_argument("--version", action="store_true", help="print the wgnn and wgpu versions")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine decides (fallbacks ...)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    shape_help = "input shape NAME=D0,D1,... (repeatable); symbolic dims default to 1"
    from ..engine.config import NUMPY_THREADS_HELP

    provider_help = "backend(s) in order of preference, e.g. wgpu,numpy (repeatable; default numpy)"

    adapter_help = "GPU adapter: index, name substring, vulkan/metal/d3d12/gl, high-performance or low-power"

    p = sub.add_parser("adapters", help="list the GPU adapters wgpu finds, with features and limits")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_adapters)

    p = sub.add_parser("convert", help="convert an ONNX model to .wgnn")
    p.add_argument("input", help="the .onnx model, or zoo:NAME")
    p.add_argument("output", help="the .wgnn file to write")
    p.add_argument("--no-optimize", action="store_true", help="skip the graph passes (folding, clean-up)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=cmd_convert)

    p = sub.add_parser("info", help="inputs, outputs, ops, parameters, FLOPs and memory of a model")
    p.add_argument("model", help="a .wgnn or .onnx model, or zoo:NAME")
    p.add_argument("--shape", action="append", metavar="NAME=DIMS", help=shape_help)
    p.add_argument("--provider", action="append", help=provider_help)
    p.add_argument("--adapter", help=adapter_help)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_info)

    p = sub.add_parser("run", help="run a model on given or random inputs")
    p.add_argument("model", help="a .wgnn or .onnx model, or zoo:NAME")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input from a .npy file (repeatable)")
    p.add_argument("--shape", action="append", metavar="NAME=DIMS", help=shape_help)
    p.add_argument("--compare", choices=["onnxruntime"], help="also run the ONNX model in onnxruntime and compare")
    p.add_argument("--tolerance", type=float, default=1e-4, help="max rel error allowed by --compare (default 1e-4)")
    p.add_argument("--provider", action="append", help=provider_help)
    p.add_argument("--adapter", help=adapter_help)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--numpy-threads", type=int, metavar="N", help=NUMPY_THREADS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("demo", help="classify the shipped handwritten digits on the GPU (or run a zoo model)")
    p.add_argument("--model", default=DEFAULT_MODEL, choices=demo_models(),
                   help=f"{DEFAULT_MODEL} (default: the shipped digits classifier) or a zoo model")
    p.add_argument("--provider", action="append", help="backends (default: wgpu,numpy when wgpu is available)")
    p.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    p.add_argument("--batch", type=int, help="images per inference (default: all held-out digits; zoo models 1)")
    p.add_argument("--adapter", help=adapter_help)
    p.add_argument("--seed", type=int, default=0, help="digits: picks the digits drawn; zoo models: the random inputs")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_demo)

    from .commands import register_all

    register_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `wgnn` command. Returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage and the error
        return int(exc.code or 0)
    if args.version:
        print(version_text())
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        return args.handler(args)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (Python flushes stdout at exit)
        return 0
    except (WgnnError, OSError) as exc:
        message = " ".join(str(exc).split())  # one line, however the message was built
        print(f"wgnn: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wgnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
