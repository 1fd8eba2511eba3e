"""wgnn demo: classify the shipped handwritten digits on the GPU (the default), or run a zoo model.

    wgnn demo                           # the digits model on the best adapter
    wgnn demo --adapter gl --json       # on another adapter, as JSON
    wgnn demo --model resnet            # a zoo model, checked against onnxruntime

The digits demo loads models/data/digits.wgnn (a small CNN trained by tools/train_digits.py) and its
held-out images (models/data/digits_test.npz) from the installed package: no network, no
scikit-learn. The uint8 images become the model's normalised input with wgnn.image on the same
device (options from the model's "wgnn.image" metadata); the demo prints the accuracy, per-digit
counts, a few digits drawn as text, the agreement with the numpy backend and the latency.
"""
from __future__ import annotations

import io
import json
import math
import statistics
import time
from importlib import resources

import numpy as np

from ..engine.errors import AdapterError, WgnnError

DEFAULT_MODEL = "digits"
# Held-out result of the shipped digits.wgnn on the numpy provider, as
# `python -m wgnn.tools.train_digits` printed it (docs/getting-started.md records it too).
DIGITS_RECORDED_CORRECT = 348
DIGITS_TEST_IMAGES = 360
RAMP = " .:-=+*#%@"  # pixel intensity 0..255 -> character, darkest first
SHOWN = 5  # digits drawn in the terminal


def demo_models() -> list[str]:
    """Names `wgnn demo --model` accepts: the digits model, then the zoo."""
    from ..models.zoo import ZOO

    return [DEFAULT_MODEL, *sorted(ZOO)]


def best_providers() -> tuple[str, ...]:
    """("wgpu", "numpy") when the wgpu backend is registered, else ("numpy",)."""
    from ..backends import load_backends
    from ..backends.base import BACKENDS

    load_backends()
    return ("wgpu", "numpy") if "wgpu" in BACKENDS else ("numpy",)


def run_demo(name: str = DEFAULT_MODEL, *, providers=None, runs: int = 5, batch: int | None = None, seed: int = 0,
             adapter=None) -> dict:
    """Run the demo of model `name` ("digits" or a zoo model); returns what format_demo prints (also
    the --json output).

    Arguments:
        providers: backends in order of preference; default best_providers(). When the default
            picks wgpu but no adapter works, the demo falls back to numpy and says so.
        runs: timed runs after the first (which includes planning).
        batch: images per inference (digits: default all held-out images) or the zoo model's batch
            (default 1).
        seed: digits: picks the correctly classified digits drawn; zoo: seed of the random inputs.
        adapter: GPU adapter choice (see wgnn.Config).
    """
    if runs < 1:
        raise WgnnError(f"--runs must be at least 1, got {runs}")
    if batch is not None and batch < 1:
        raise WgnnError(f"--batch must be at least 1, got {batch}")
    if name == DEFAULT_MODEL:
        return run_digits_demo(providers=providers, runs=runs, batch=batch, seed=seed, adapter=adapter)
    return run_zoo_demo(name, providers=providers, runs=runs, batch=batch or 1, seed=seed, adapter=adapter)


def format_demo(result: dict) -> str:
    """The demo result as readable lines."""
    return format_digits_demo(result) if result["model"] == DEFAULT_MODEL else format_zoo_demo(result)


# ------------------------------------------------------------------------------------ digits
def load_digits_data() -> tuple[object, np.ndarray, np.ndarray]:
    """(the digits Model, held-out images uint8 [N, 8, 8], labels [N]) from the package data."""
    from ..engine.interpreter import load_model

    data = resources.files("wgnn.models").joinpath("data")
    try:
        model = load_model(data.joinpath("digits.wgnn").read_bytes())
        with np.load(io.BytesIO(data.joinpath("digits_test.npz").read_bytes())) as test:
            images, labels = test["images"], test["labels"].astype(np.int64)
    except FileNotFoundError as exc:
        raise WgnnError(f"the digits demo data is missing from the package ({exc.filename}); reinstall wgnn "
                        "or rebuild it with `python -m wgnn.tools.train_digits`") from None
    return model, images, labels


def draw_digits(images: np.ndarray, captions: list[str]) -> list[str]:
    """uint8 [k, H, W] images side by side as text, two characters per pixel, captions below."""
    levels = (images.astype(np.int64) * len(RAMP)) // 256
    width = 2 * images.shape[2]
    lines = []
    for row in range(images.shape[1]):
        lines.append("  ".join("".join(RAMP[v] * 2 for v in image[row]) for image in levels).rstrip())
    lines.append("  ".join(c.center(width) for c in captions).rstrip())
    return lines


def _shown(predicted: np.ndarray, labels: np.ndarray, seed: int) -> list[int]:
    """Indices to draw: up to half misclassified ones, the rest correct ones of other digits
    (picked with seed)."""
    wrong = list(np.flatnonzero(predicted != labels)[:SHOWN // 2])
    rng = np.random.default_rng(seed)
    chosen = [int(i) for i in wrong]
    for digit in rng.permutation(10):
        if len(chosen) == SHOWN:
            break
        candidates = np.flatnonzero((labels == digit) & (predicted == labels))
        if candidates.size and digit not in {int(labels[i]) for i in chosen}:
            chosen.append(int(rng.choice(candidates)))
    return chosen


def run_digits_demo(*, providers=None, runs: int = 5, batch: int | None = None, seed: int = 0, adapter=None) -> dict:
    from ..engine.api import InferenceSession
    from ..engine.config import Config
    from ..image import ImageProcessor

    model, images, labels = load_digits_data()
    options = json.loads(model.metadata["wgnn.image"])
    total = len(labels)
    batch = min(batch or total, total)
    chosen = tuple(providers) if providers else best_providers()
    notes = []

    def classify(backends):
        """Preprocess and classify every held-out image in batches; returns what timing needs."""
        prep = ImageProcessor(**options, provider="wgpu" if "wgpu" in backends else "numpy", adapter=adapter)
        t0 = time.perf_counter()
        session = InferenceSession(model, config=Config(providers=tuple(backends), adapter=adapter))
        load_s = time.perf_counter() - t0
        inputs, logits, first_s = [], [], 0.0
        for start in range(0, total, batch):
            x = prep(images[start:start + batch, :, :, None])
            t1 = time.perf_counter()
            logits.append(session.run(None, {"image": x})[0])
            first_s = first_s or time.perf_counter() - t1
            inputs.append(x)
        return prep, session, np.concatenate(inputs), np.concatenate(logits), load_s, first_s

    try:
        prep, session, x, logits, load_s, first_s = classify(chosen)
    except AdapterError as exc:
        if providers or chosen == ("numpy",):
            raise
        notes.append(f"wgpu has no usable adapter ({' '.join(str(exc).split())}); ran on numpy")
        chosen = ("numpy",)
        prep, session, x, logits, load_s, first_s = classify(chosen)

    # Latency of one batch (the first). One untimed run first: a smaller last batch re-planned the
    # session for its shape.
    sample = images[:batch, :, :, None]
    feed = {"image": x[:batch]}
    session.run(None, feed)
    infer_times, prep_times = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        prep(sample)
        t1 = time.perf_counter()
        session.run(None, feed)
        prep_times.append(t1 - t0)
        infer_times.append(time.perf_counter() - t1)

    # The numpy backend's answer, from numpy preprocessing: the reference.
    reference_prep = ImageProcessor(**options, provider="numpy")
    reference_x = reference_prep(images[..., None])
    reference = InferenceSession(model, providers=["numpy"]).run(None, {"image": reference_x})[0]

    predicted, expected = logits.argmax(1), reference.argmax(1)
    correct = int(np.sum(predicted == labels))
    report = session.report()
    shown = _shown(predicted, labels, seed)
    median = statistics.median(infer_times)
    return {
        "model": DEFAULT_MODEL,
        "description": "small CNN trained on scikit-learn's 8x8 handwritten digits (tools/train_digits.py)",
        "source": model.source,
        "parameters": int(sum(v.size for v in model.graph.initializers.values())),
        "providers": list(chosen),
        "adapter": prep.device_name or next((b.context.name for b in session.session.backends
                                             if hasattr(b, "context")), None),
        "ops_per_backend": report["ops_per_backend"],
        "fallbacks": len(report["fallbacks"]),
        "preprocess": {"provider": prep.provider, **options,
                       "max_abs_diff_vs_numpy": float(np.abs(x - reference_x).max())},
        "images": total,
        "batch": batch,
        "correct": correct,
        "accuracy": correct / total,
        "recorded": {"correct": DIGITS_RECORDED_CORRECT, "images": DIGITS_TEST_IMAGES},
        "per_class": [{"digit": d, "correct": int(np.sum((labels == d) & (predicted == d))),
                       "total": int(np.sum(labels == d))} for d in range(10)],
        "confused": [{"index": int(i), "true": int(labels[i]), "predicted": int(predicted[i])}
                     for i in np.flatnonzero(predicted != labels)],
        "shown": [{"index": i, "true": int(labels[i]), "predicted": int(predicted[i]),
                   "pixels": images[i].tolist()} for i in shown],
        "numpy_agreement": {"identical_predictions": float(np.mean(predicted == expected)),
                            "max_abs_logit_diff": float(np.abs(logits - reference).max()),
                            "numpy_correct": int(np.sum(expected == labels))},
        "load_ms": round(load_s * 1e3, 3),
        "first_run_ms": round(first_s * 1e3, 3),
        "latency_ms": {"median": round(median * 1e3, 3), "min": round(min(infer_times) * 1e3, 3),
                       # 1 ns resolution: a fast batch of 360 images takes ~3 us per image
                       "per_image": round(median * 1e3 / batch, 6),
                       "preprocess_median": round(statistics.median(prep_times) * 1e3, 3), "runs": runs},
        "notes": notes,
    }


def format_digits_demo(result: dict) -> str:
    used = ", ".join(f"{b} ({n} steps)" for b, n in result["ops_per_backend"].items())
    total, correct = result["images"], result["correct"]
    recorded, prep = result["recorded"], result["preprocess"]
    lines = [
        f"wgnn demo: handwritten digits, {result['parameters']:,}-parameter CNN (tools/train_digits.py)",
        (f"backend:   {used}  [providers: {', '.join(result['providers'])}; "
         f"{result['fallbacks']} fallback op(s)]"),
    ]
    if result.get("adapter"):
        lines.append(f"adapter:   {result['adapter']}")
    normalise = ", ".join(f"{k} {' '.join(f'{v:g}' for v in prep[k])}" for k in ("mean", "std"))
    lines += [
        (f"input:     {total} held-out uint8 {prep['size'][0]}x{prep['size'][1]} images -> wgnn.image on "
         f"{prep['provider']} ({prep['source']}, {normalise})"),
        (f"accuracy:  {correct}/{total} = {correct / total:.2%}  (recorded at training: "
         f"{recorded['correct']}/{recorded['images']})"),
    ]
    for label, key in (("digit", "digit"), ("correct", "correct"), ("of", "total")):
        lines.append(f"{label:<10} " + " ".join(f"{c[key]:>3}" for c in result["per_class"]))
    shown = result["shown"]
    captions = [f"{s['predicted']} (true {s['true']})" + ("" if s["predicted"] == s["true"] else " !")
                for s in shown]
    lines.append("")
    lines += ["  " + line for line in draw_digits(np.array([s["pixels"] for s in shown], np.uint8), captions)]
    lines.append("")
    agree = result["numpy_agreement"]
    lines.append(f"agreement: {agree['identical_predictions']:.2%} of predictions as on the numpy backend; "
                 f"max abs difference: logits {agree['max_abs_logit_diff']:.3g}, "
                 f"input {prep['max_abs_diff_vs_numpy']:.3g}")
    latency = result["latency_ms"]
    lines.append(f"latency:   median {latency['median']:.2f} ms per batch of {result['batch']} "
                 f"({latency['per_image'] * 1e3:.1f} us per image) over {latency['runs']} runs, "
                 f"+ {latency['preprocess_median']:.2f} ms preprocessing")
    lines.append(f"           load {result['load_ms']:.1f} ms, "
                 f"first batch with planning {result['first_run_ms']:.1f} ms")
    lines += [f"note:      {n}" for n in result["notes"]]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- zoo
def run_zoo_demo(name: str, *, providers=None, runs: int = 5, batch: int = 1, seed: int = 0, adapter=None) -> dict:
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


def format_zoo_demo(result: dict) -> str:
    """A zoo demo result as a few readable lines."""
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


def demo_agrees(result: dict) -> bool:
    """Whether the demo reproduced its reference: the digits within one image of the accuracy
    recorded at training (GPU float rounding may flip a borderline digit), a zoo model within
    1e-4 of onnxruntime (when onnxruntime could run)."""
    if "recorded" in result:
        return abs(result["correct"] - result["recorded"]["correct"]) <= 1
    reference = result.get("onnxruntime", {})
    return not reference.get("available") or bool(reference.get("ok"))
