"""wgnn demo: build a zoo model, run it on the best available backend, time it and check it
against onnxruntime.

    wgnn demo --model resnet
    python -m wgnn.tools.cli demo --model bert --runs 10
"""
from __future__ import annotations

import math
import statistics
import time

from ..engine.errors import AdapterError, WgnnError


def best_providers() -> tuple[str, ...]:
    """("wgpu", "numpy") when the wgpu backend is registered, else ("numpy",)."""
    from ..backends import load_backends
    from ..backends.base import BACKENDS

    load_backends()
    return ("wgpu", "numpy") if "wgpu" in BACKENDS else ("numpy",)


def run_demo(name: str = "mobilenetv2", *, providers=None, runs: int = 5, batch: int = 1, seed: int = 0,
             adapter=None) -> dict:
    """Run zoo model `name`; returns what format_demo prints (also the --json output).

    Arguments:
        providers: backends in order of preference; default best_providers(). When the default
            picks wgpu but no adapter works, the demo falls back to numpy and says so.
        runs: timed runs after the first (which includes planning).
        adapter: GPU adapter choice (see wgnn.Config).
    """
    from ..engine.api import InferenceSession
    from ..engine.config import Config
    from ..models.zoo import build, example_inputs
    from .cli import compare_outputs, onnxruntime_outputs, summarize

    if runs < 1:
        raise WgnnError(f"--runs must be at least 1, got {runs}")
    if batch < 1:
        raise WgnnError(f"--batch must be at least 1, got {batch}")
    try:
        model = build(name)
    except KeyError as exc:
        raise WgnnError(str(exc.args[0])) from None
    feeds = example_inputs(model, batch, seed=seed)
    chosen = tuple(providers) if providers else best_providers()
    notes = []

    def start(backends):
        t0 = time.perf_counter()
        session = InferenceSession(model, config=Config(providers=tuple(backends), adapter=adapter))
        t1 = time.perf_counter()
        outputs = session.run(None, feeds)
        return session, outputs, t1 - t0, time.perf_counter() - t1

    try:
        session, outputs, load_s, first_s = start(chosen)
    except AdapterError as exc:
        if providers or chosen == ("numpy",):
            raise
        notes.append(f"wgpu has no usable adapter ({' '.join(str(exc).split())}); ran on numpy")
        chosen = ("numpy",)
        session, outputs, load_s, first_s = start(chosen)

    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t0)
    report = session.report()
    names = [o.name for o in session.get_outputs()]
    result = {
        "model": name,
        "onnx_nodes": len(model.graph.node),
        "parameters": int(sum(math.prod(t.dims) for t in model.graph.initializer)),
        "providers": list(chosen),
        "adapter": next((b.context.name for b in session.session.backends if hasattr(b, "context")), None),
        "ops_per_backend": report["ops_per_backend"],
        "fallbacks": len(report["fallbacks"]),
        "inputs": [{"name": k, "shape": list(v.shape), "dtype": v.dtype.name} for k, v in feeds.items()],
        "outputs": [summarize(n, v) for n, v in zip(names, outputs, strict=True)],
        "load_ms": round(load_s * 1e3, 3),
        "first_run_ms": round(first_s * 1e3, 3),
        "latency_ms": {"median": round(statistics.median(times) * 1e3, 3),
                       "min": round(min(times) * 1e3, 3), "runs": runs},
        "notes": notes,
    }
    try:
        reference = onnxruntime_outputs(model, feeds)
    except WgnnError as exc:
        result["onnxruntime"] = {"available": False, "reason": str(exc)}
    else:
        rows = compare_outputs(dict(zip(names, outputs, strict=True)), reference, tolerance=1e-4)
        worst = max((r["max_rel_error"] for r in rows if r["max_rel_error"] is not None), default=0.0)
        result["onnxruntime"] = {"available": True, "max_rel_error": worst, "ok": all(r["ok"] for r in rows)}
    return result


def format_demo(result: dict) -> str:
    """The demo result as a few readable lines."""
    used = ", ".join(f"{b} ({n} steps)" for b, n in result["ops_per_backend"].items())
    lines = [
        f"wgnn demo: {result['model']} ({result['onnx_nodes']} ONNX nodes, {result['parameters']:,} parameters)",
        (f"backend:   {used}  [providers: {', '.join(result['providers'])}; "
         f"{result['fallbacks']} fallback op(s)]"),
    ]
    if result.get("adapter"):
        lines.append(f"adapter:   {result['adapter']}")
    lines += [f"input:     {i['name']} {i['shape']} {i['dtype']}" for i in result["inputs"]]
    lines += [f"output:    {o['name']} {o['shape']} {o['dtype']}  min {o['min']:.4g}  max {o['max']:.4g}  "
              f"mean {o['mean']:.4g}" if o["min"] is not None else f"output:    {o['name']} {o['shape']} (empty)"
              for o in result["outputs"]]
    latency = result["latency_ms"]
    lines.append(f"latency:   median {latency['median']:.2f} ms over {latency['runs']} runs "
                 f"(load {result['load_ms']:.1f} ms, first run with planning {result['first_run_ms']:.1f} ms)")
    ort = result["onnxruntime"]
    if ort["available"]:
        lines.append(f"agreement: max rel error vs onnxruntime {ort['max_rel_error']:.3g} "
                     f"({'ok' if ort['ok'] else 'ABOVE 1e-4'})")
    else:
        lines.append(f"agreement: not checked ({ort['reason']})")
    lines += [f"note:      {n}" for n in result["notes"]]
    return "\n".join(lines)
