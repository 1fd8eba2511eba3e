"""wgnn next to its peers on the zoo models: `python -m wgnn.tools.peers [--out table.md]`.

Runs each zoo model (wgnn.models.zoo, batch 1) through wgnn's wgpu and numpy providers, onnxruntime
(CPU, 2 threads, no spinning) and, where installed, ncnn (its Vulkan device when it has one; models
converted by pnnx) and wonnx, all in one process: every runner is checked against onnxruntime and
warmed up, then the runners take turns, round after round, so a slow phase of a shared machine hits
all of them alike. Cells are medians of the rounds. Peers that are not installed are listed as "not
installed"; a peer that cannot convert or run a model gets "failed: reason" in its cell. A benchmark
tool: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from ..engine.errors import InputError, WgnnError
from .bench import ratio_interval

MODELS = ("mobilenetv2", "resnet", "bert", "unet")
ORT_THREADS = 2


class PeerUnavailable(Exception):
    """The peer (or something it needs) is not installed."""


@dataclass
class Runner:
    name: str
    run: object = None  # () -> list of np.ndarray
    status: str = "ok"  # ok | not installed | failed: ...
    samples: list[float] = field(default_factory=list)  # one per round
    first_samples: list[float] = field(default_factory=list)  # each round's first run
    error: float | None = None  # max |ours - onnxruntime| / max |onnxruntime| over the outputs


def _require(module: str) -> None:
    if find_spec(module) is None:
        raise PeerUnavailable(module)


def _ort_session(data: bytes):
    _require("onnxruntime")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = ORT_THREADS
    # Idle spinning threads would steal the cores from the runner timed next (docs/performance.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)


def _wgnn(providers: tuple[str, ...], adapter):
    def load(model, data: bytes, feeds: dict, workdir: Path):
        import wgnn

        if "wgpu" in providers:
            from ..backends.wgpu.context import gpu_available

            reason = gpu_available()
            if reason is not None:
                raise PeerUnavailable(reason)
        session = wgnn.InferenceSession(data, config=wgnn.Config(providers=providers, adapter=adapter))
        session.run(None, feeds)  # plans for the feeds' shapes
        session.wait_background()  # the rounds must not share the cores with it

        def run():
            return session.run(None, feeds)

        choice = getattr(session.session.backends[0], "device_choice", None) or {}
        if choice.get("lavapipe_threads") is not None:  # the session's own pick (Config.lavapipe_threads)
            run.device = f"{choice['lavapipe_threads']} lavapipe workers"
        return run

    return load


def _onnxruntime(model, data: bytes, feeds: dict, workdir: Path):
    run = _ort_session(data)
    return lambda: run(feeds)


def _ncnn(model, data: bytes, feeds: dict, workdir: Path):
    """pnnx converts the ONNX model (fp32 weights) for ncnn; ncnn runs on its first Vulkan device."""
    _require("ncnn")
    spec = find_spec("pnnx")
    if spec is None:
        raise PeerUnavailable("pnnx (converts the models for ncnn)")
    import ncnn

    onnx_path = workdir / f"{model.graph.name or 'model'}.onnx"
    onnx_path.write_bytes(data)
    types = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64", np.dtype(np.int32): "i32"}
    shapes = ",".join(f"[{','.join(map(str, v.shape))}]{types[v.dtype]}" for v in feeds.values())
    stem = workdir / "ncnn"
    # The pnnx executable itself: `import pnnx` would import torch.
    command = [str(Path(spec.submodule_search_locations[0]) / "pnnx"), str(onnx_path), f"inputshape={shapes}",
               "fp16=0", f"ncnnparam={stem}.param", f"ncnnbin={stem}.bin", f"ncnnpy={stem}.py",
               f"pnnxparam={stem}.pnnx.param", f"pnnxbin={stem}.pnnx.bin", f"pnnxpy={stem}_pnnx.py",
               f"pnnxonnx={stem}.pnnx.onnx"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=workdir, timeout=300)
    if done.returncode != 0 or not Path(f"{stem}.param").exists():
        raise WgnnError(f"pnnx could not convert the model: {(done.stderr or done.stdout).strip()[-200:]}")
    net = ncnn.Net()
    net.opt.use_vulkan_compute = ncnn.get_gpu_count() > 0
    net.opt.use_fp16_packed = net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = False  # fp32, as wgnn
    # ncnn's OpenMP threads spin 20 ms after each parallel region by default: they would steal the
    # cores from the runner timed next (measured: wgnn 1.3-1.6x slower beside it), as onnxruntime's
    # spinning would (see _ort_session).
    net.opt.openmp_blocktime = 0
    status, said = _with_stderr(lambda: net.load_param(f"{stem}.param") or net.load_model(f"{stem}.bin"))
    if status != 0:
        reasons = [line.strip() for line in said.splitlines() if line.strip() and not line.startswith("[")]
        raise WgnnError(f"ncnn could not load the converted model: {'; '.join(reasons)[-160:] or 'no reason given'}")
    outputs = len(model.graph.output)
    # ncnn has no batch axis: batch-1 inputs drop it; integer ids travel as floats.
    mats = [np.ascontiguousarray(v[0], dtype=np.float32) for v in feeds.values()]

    def run():
        extractor = net.create_extractor()
        for i, mat in enumerate(mats):
            extractor.input(f"in{i}", ncnn.Mat(mat))
        results = []
        for i in range(outputs):
            status, out = extractor.extract(f"out{i}")
            if status != 0:
                raise WgnnError(f"ncnn could not compute out{i}")
            results.append(np.array(out)[None])
        return results

    return run


def _with_stderr(call):
    """(call(), what native code wrote to stderr meanwhile): ncnn says why it refuses a model only there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            result = call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return result, sink.read()


def _wonnx(model, data: bytes, feeds: dict, workdir: Path):
    """wonnx wants every shape static and known: symbolic dims bound from the feeds, then shape
    inference. Its Gemm takes B as (K, N) only, so a constant B under transB=1 is stored transposed
    (the same model); its Python run() takes and returns flat sequences."""
    _require("wonnx")
    import onnx
    import wonnx
    from onnx import numpy_helper

    model = onnx.ModelProto.FromString(data)
    sizes = {}
    for value in model.graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, feeds[value.name].shape):
            if dim.dim_param:
                sizes[dim.dim_param] = size

    def bind(values):
        for value in values:
            for dim in value.type.tensor_type.shape.dim:
                if dim.dim_param:
                    dim.dim_value = sizes.get(dim.dim_param, 1)

    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        trans_b = next((a for a in node.attribute if a.name == "transB"), None)
        if node.op_type == "Gemm" and trans_b is not None and trans_b.i and node.input[1] in initializers:
            tensor = initializers[node.input[1]]
            tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor).T.copy(), tensor.name))
            trans_b.i = 0
    bind(list(model.graph.input) + list(model.graph.output))
    model = onnx.shape_inference.infer_shapes(model)
    bind(model.graph.value_info)
    session = wonnx.Session.from_bytes(model.SerializeToString())
    names = [o.name for o in model.graph.output]
    flat = {name: np.ascontiguousarray(value).reshape(-1) for name, value in feeds.items()}
    return lambda: [np.asarray(session.run(flat)[name]) for name in names]  # reshaped by relative_error


def peer_loaders(adapter) -> dict:
    """Peer name -> loader(model, onnx bytes, feeds, workdir) -> run()."""
    return {"wgnn wgpu": _wgnn(("wgpu", "numpy"), adapter), "wgnn numpy": _wgnn(("numpy",), None),
            "onnxruntime": _onnxruntime, "ncnn": _ncnn, "wonnx": _wonnx}


def relative_error(got: list, want: list) -> float:
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(float(np.abs(w).max(initial=0.0)), 1e-30)
        worst = max(worst, float(np.abs(g.reshape(w.shape) - w).max(initial=0.0)) / scale)
    return worst


WRONG_RESULT = 1e-3  # max relative error against onnxruntime past which a peer's run is not timed


def _load(name: str, loader, model, data: bytes, feeds: dict, reference: list, workdir: Path) -> Runner:
    runner = Runner(name)
    try:
        runner.run = loader(model, data, feeds, workdir)
        runner.error = relative_error(runner.run(), reference)
        if runner.error > WRONG_RESULT:  # not timed: a fast wrong answer is no result
            runner.status = f"wrong result (max relative error {runner.error:.1e} against onnxruntime)"
    except PeerUnavailable as exc:
        runner.status = f"not installed ({exc})"
    except BaseException as exc:  # Rust panics (wonnx) derive from BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        text = " ".join(str(exc).split()) or type(exc).__name__
        runner.status = f"failed: {text[:160]}"
    return runner


IMAGE_MODELS = ("mobilenetv2", "resnet", "unet")  # zoo builders with a size= (input side) option


def compare_model(name: str, peers: list[str], *, runs: int, warmup: int, adapter=None, size: int | None = None,
                  seq: int = 8, turn: int = 1) -> dict:
    """One zoo model through every peer; returns {"model", "peers": {peer: cell}}. size: the
    input side of the image models (zoo default 32); seq: the sequence length of bert's inputs.
    Each round every runner takes a turn of `turn` runs in a row. With turn > 1 a round's sample is
    the median of its turn's runs after the first, and the first runs (right after another
    runner) are kept apart in the cell's "first_of_turn": a run after an idle or busy spell
    costs some 0.2-0.4 ms more on this machine, whoever runs (docs/performance.md)."""
    from ..models.zoo import build, example_inputs

    model = build(name, **({"size": size} if size and name in IMAGE_MODELS else {}))
    feeds = example_inputs(model, 1, seq=seq)
    data = model.SerializeToString()
    reference = _ort_session(data)(feeds)
    loaders = peer_loaders(adapter)
    with tempfile.TemporaryDirectory(prefix="wgnn-peers-") as tmp:
        runners = [_load(p, loaders[p], model, data, feeds, reference, Path(tmp)) for p in peers]
        live = [r for r in runners if r.status == "ok"]
        for runner in live:
            for _ in range(warmup):
                runner.run()
        for _ in range(runs):
            for runner in live:  # alternate: one turn of each per round
                times = []
                for _ in range(turn):
                    start = time.perf_counter()
                    runner.run()
                    times.append((time.perf_counter() - start) * 1e3)
                runner.samples.append(statistics.median(times[1:]) if turn > 1 else times[0])
                runner.first_samples.append(times[0])
    cells = {}
    for runner in runners:
        cell = {"status": runner.status}
        if runner.status == "ok":
            cell.update(median_ms=statistics.median(runner.samples), min_ms=min(runner.samples),
                        max_ms=max(runner.samples), max_rel_error=runner.error, samples_ms=runner.samples)
            if turn > 1:
                cell["first_of_turn"] = {"median_ms": statistics.median(runner.first_samples),
                                         "samples_ms": runner.first_samples}
            if getattr(runner.run, "device", None):
                cell["device"] = runner.run.device
        cells[runner.name] = cell
    base = cells.get("onnxruntime", {}).get("median_ms")
    for cell in cells.values():
        if base and "median_ms" in cell:
            cell["ratio_to_onnxruntime"] = cell["median_ms"] / base
    return {"model": name, "inputs": {k: list(v.shape) for k, v in feeds.items()}, "peers": cells}


def environment(adapter) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("wgnn", "numpy", "onnxruntime", "wgpu", "ncnn", "pnnx", "wonnx"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    gpu = None
    try:
        from ..backends.wgpu.context import adapters, lavapipe_threads, select_adapter

        info = adapters()[select_adapter(adapter)]
        threads = lavapipe_threads(info)
        gpu = f"{info.name} ({info.backend}, {info.driver}" + (
            f"; {threads} worker threads" if threads is not None else "") + ")"
    except WgnnError:
        pass
    from ..backends.numpy import blas, compiled

    return {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
            "blas": blas.describe(), "compiled": compiled.describe(), "adapter": gpu, "versions": versions}


def markdown(result: dict) -> str:
    peers = result["peer_names"]
    env = result["environment"]
    turn = result.get("turn", 1)
    rounds = (f"over {result['runs']} alternating rounds after {result['warmup']} warm-up" if turn == 1 else
              f"after {result['warmup']} warm-up, over {result['runs']} rounds in which each runner ran {turn} "
              "times in a row (each turn's first run left out, given below the table)")
    lines = [f"Median ms {rounds} (batch 1); in parentheses the ratio to onnxruntime's median.", "",
             "| model | " + " | ".join(peers) + " |", "|---|" + "---|" * len(peers)]
    notes: list[str] = []
    for row in result["models"]:
        cells = []
        for peer in peers:
            cell = row["peers"][peer]
            if cell["status"].startswith(("failed", "wrong")):
                notes.append(f"{peer} on {row['model']}: {cell['status']}")
                cells.append(f"{cell['status'].split(' (')[0].split(':')[0]} [{len(notes)}]")
            elif cell["status"] != "ok":
                cells.append(cell["status"].split(" (")[0])
            else:
                ratio = cell.get("ratio_to_onnxruntime") if peer != "onnxruntime" else None
                cells.append(f"{cell['median_ms']:.2f}" + (f" (x{ratio:.1f})" if ratio else ""))
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"[{i}] {note.replace('|', '/')}" for i, note in enumerate(notes, 1)]
    lines += target_ratios(result)
    if turn > 1:
        firsts = [f"{row['model']} {peer} {cell['first_of_turn']['median_ms']:.2f}" for row in result["models"]
                  for peer, cell in row["peers"].items() if "first_of_turn" in cell]
        lines.append("Each turn's first run (right after another runner), median ms: " + ", ".join(firsts) + ".")
        lines += target_ratios(result, first_of_turn=True)
    devices = [f"{row['model']} {cell['device']}" for row in result["models"]
               for peer, cell in row["peers"].items() if peer == "wgnn wgpu" and cell.get("device")]
    if devices:
        lines.append("wgnn wgpu's device per model: " + ", ".join(devices) + ".")
    missing = sorted({f"{peer}: {cell['status']}" for row in result["models"] for peer, cell in row["peers"].items()
                      if cell["status"].startswith("not installed")})
    if missing:
        lines.append("Not installed: " + "; ".join(missing) + ".")
    errors = [f"{row['model']} {peer} {cell['max_rel_error']:.1e}" for row in result["models"]
              for peer, cell in row["peers"].items() if cell.get("max_rel_error") is not None and peer != "onnxruntime"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines += ["Largest relative error against onnxruntime: " + (", ".join(errors) or "-") + ".",
              f"Machine: {env['cpus']} CPUs ({env['machine']}), Python {env['python']}; GPU adapter: "
              f"{env['adapter'] or 'none'}; {versions} (numpy's BLAS: {env['blas']}; its compiled loops: "
              f"{env.get('compiled', '-')}). "
              f"onnxruntime: CPU, {ORT_THREADS} threads, no spinning; "
              "ncnn: fp32 on its Vulkan device (pnnx-converted); wonnx: its own wgpu device."]
    return "\n".join(lines)


# The ratios the targets are about: wgnn's wgpu backend over the GPU peers on the same
# adapter, and its numpy backend over onnxruntime.
TARGET_RATIOS = (("wgnn wgpu", "ncnn"), ("wgnn wgpu", "wonnx"), ("wgnn numpy", "onnxruntime"))


def target_ratios(result: dict, first_of_turn: bool = False) -> list[str]:
    """One line per target pair (TARGET_RATIOS): the first runner's median over the second's, per
    model both ran right, with its 95% interval where the rounds allow one; of the turns' first
    runs with first_of_turn."""
    lines = []
    for mine, peer in TARGET_RATIOS:
        ratios = []
        for row in result["models"]:
            ours, theirs = row["peers"].get(mine), row["peers"].get(peer)
            if ours and theirs and ours["status"] == theirs["status"] == "ok":
                if first_of_turn:
                    ours, theirs = ours["first_of_turn"], theirs["first_of_turn"]
                text = f"{row['model']} x{ours['median_ms'] / theirs['median_ms']:.2f}"
                interval = ratio_interval(ours.get("samples_ms", []), theirs.get("samples_ms", []))
                if interval is not None:
                    text += f" (x{interval[0]:.2f}-{interval[1]:.2f})"
                ratios.append(text)
        if ratios:
            which = "each turn's first runs" if first_of_turn else "medians"
            lines.append(f"{mine} / {peer} ({which}, same rounds; 95% interval): " + ", ".join(ratios) + ".")
    return lines


def run_peers(models: list[str], peers: list[str], *, runs: int = 21, warmup: int = 3, adapter=None,
              show_progress: bool = True, size: int | None = None, seq: int = 8, turn: int = 1) -> dict:
    from .progress import progress

    rows = [compare_model(m, peers, runs=runs, warmup=warmup, adapter=adapter, size=size, seq=seq, turn=turn)
            for m in progress(models, "peers", enabled=show_progress)]
    return {"runs": runs, "warmup": warmup, "turn": turn, "peer_names": peers, "models": rows,
            "environment": environment(adapter)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"zoo models (default {','.join(MODELS)})")
    parser.add_argument("--peers", default=",".join(peer_loaders(None)),
                        help="runners, comma separated (default: all of " + ", ".join(peer_loaders(None)) + ")")
    parser.add_argument("--runs", type=int, default=21, help="timed rounds (default 21)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs of each runner first (default 3)")
    parser.add_argument("--turn", type=int, default=1, metavar="N",
                        help="runs of each runner in a row per round (default 1); with N > 1 the table gives the "
                             "runs after each turn's first, and the first runs apart")
    parser.add_argument("--adapter", help="GPU adapter for wgnn wgpu (index, name, vulkan/gl, ...)")
    parser.add_argument("--size", type=int, help="input side of the image models (default: the zoo's 32; "
                        "224 for ImageNet-sized inputs; unet needs a multiple of 4)")
    parser.add_argument("--seq", type=int, default=8, help="sequence length of bert's inputs (default 8)")
    parser.add_argument("--lavapipe-threads", type=int, metavar="N",
                        help="worker threads of Mesa's CPU drivers (LP_NUM_THREADS), for wgnn and the GPU peers "
                             "alike (they share the process)")
    parser.add_argument("--out", metavar="FILE.md", help="also write the markdown table here")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    try:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        peers = [p.strip().replace("-", " ") for p in args.peers.split(",") if p.strip()]  # wgnn-numpy too
        from ..models.zoo import ZOO

        unknown = [m for m in models if m not in ZOO] + [p for p in peers if p not in peer_loaders(None)]
        if unknown or not models or not peers:
            raise InputError(f"unknown model or peer {unknown}; models: {', '.join(ZOO)}; "
                             f"peers: {', '.join(peer_loaders(None))}")
        if args.runs < 1 or args.warmup < 0 or args.turn < 1:
            raise InputError("--runs and --turn must be at least 1 and --warmup 0 or more")
        if (args.size is not None and args.size < 4) or args.seq < 1:
            raise InputError("--size must be at least 4 and --seq at least 1")
        if find_spec("onnxruntime") is None:
            raise InputError("the peers table needs onnxruntime (the reference): pip install onnxruntime")
        if args.lavapipe_threads is not None:
            from ..backends.wgpu.context import set_lavapipe_threads

            set_lavapipe_threads(args.lavapipe_threads)
        result = run_peers(models, peers, runs=args.runs, warmup=args.warmup, adapter=args.adapter,
                           show_progress=not args.json, size=args.size, seq=args.seq, turn=args.turn)
    except WgnnError as exc:
        print(f"peers: error: {exc}", file=sys.stderr)
        return 2
    table = markdown(result)
    if args.out:
        Path(args.out).write_text(table + "\n")
    print(json.dumps(result, indent=2) if args.json else table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
