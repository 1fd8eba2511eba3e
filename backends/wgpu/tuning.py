"""Per-adapter tuning: a JSON cache on disk of what was measured on an adapter, and the hooks that
use it.

- NC4HW4 storage: `Config(storage="auto")` takes the storage (texture or buffer) that `wgnn tune`
  measured faster on the adapter, else the built-in default (buffers in fp32, textures in fp16).
- Workgroup sizes: kernels in TUNABLE_KERNELS get the `WG` override constant `wgnn tune` measured
  best (the loader asks tuned_constants(); a dispatch sizes its grid from the kernel's WG), else
  the adapter's preferred size (preferred_workgroup: one SIMD group on CPU adapters, 64 elsewhere).
- Providers: `Config(providers=["auto"])` runs four probes (PROBES) on wgpu and on numpy once
  per adapter (measure_providers), stores each provider's fitted cost per run, per step and per
  MFLOP here, and each session picks for its model the provider predicted faster.
- Kernel variants: MatMul (blocked, subgroup, tiled), Attention (rows, tiled) and the row-wise ops
  (an invocation or a workgroup per row) take the variant `wgnn tune` measured faster on the
  adapter (tuned_variant), else their rule by adapter type (CPU adapters or real GPUs). Convs
  ("conv": registers or tiled) offer their workgroup-memory tiled path to the cost model where
  `wgnn tune` measured it faster than the path chosen without it (conv_paths.adapter_weights).

The cache file is `$WGNN_CACHE_DIR/tuning.json` (default `~/.cache/wgnn/tuning.json`); entries are
keyed by adapter name, backend, driver string and wgnn version, so a driver or wgnn update misses
and falls back to the defaults until measured again.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from ...engine.errors import WgnnError

log = logging.getLogger("wgnn.wgpu")

CACHE_ENV = "WGNN_CACHE_DIR"
CACHE_FILE = "tuning.json"
CACHE_FORMAT = 1
DEFAULT_WORKGROUP = 64  # backend.WORKGROUP (not imported: backend.py imports this module)
WORKGROUP_CANDIDATES = (8, 16, 32, 64, 128, 256)
# Kernels whose WG only says how many invocations share a workgroup: every invocation finds its work
# from linear_id(gid, nwg, WG), skips what lies past the count in params, and uses no workgroup
# memory or barriers, so any WG gives the same results. Kernels outside this set always get the WG
# their caller passes (matmul tiles, the RNN recurrence and the image kernel depend on it).
TUNABLE_KERNELS = frozenset({
    "conv/conv_nc4hw4.wgsl", "conv/conv4_nc4hw4.wgsl", "conv/conv_slide_nc4hw4.wgsl", "conv/depthwise_nc4hw4.wgsl",
    "conv/depthwise3x3_nc4hw4.wgsl", "conv/depthwise3x3s2_nc4hw4.wgsl", "conv/gemm1x1_nc4hw4.wgsl",
    "conv/conv_transpose_nc4hw4.wgsl", "conv/dwpw_nc4hw4.wgsl", "conv/dwpw_expand_nc4hw4.wgsl",
    "conv/conv_pw_nc4hw4.wgsl",
    "conv/conv_maxpool_nc4hw4.wgsl", "conv/conv_stem_nc4hw4.wgsl", "conv/conv_stem_maxpool_nc4hw4.wgsl",
    "conv/winograd2_input.wgsl", "conv/winograd2_output.wgsl", "conv/winograd4_input.wgsl",
    "conv/winograd4_output.wgsl", "conv/winograd_gemm.wgsl",
    "pool/pool_nc4hw4.wgsl", "pool/global_pool_nc4hw4.wgsl", "pool/global_pool_matmul_nc4hw4.wgsl",
    "pool/max_pool_indices.wgsl",
    "elementwise/binary_nc4hw4.wgsl", "elementwise/unary_nc4hw4.wgsl", "fused/fused_nc4hw4.wgsl",
    "layout/to_linear.wgsl", "layout/to_nc4hw4.wgsl", "norm/batch_norm_nc4hw4.wgsl",
    "quant/fake_quantize_nc4hw4.wgsl", "raster/boxes_nc4hw4.wgsl", "resize/resize_nc4hw4.wgsl",
    "elementwise/binary.wgsl", "elementwise/unary.wgsl", "elementwise/cast.wgsl", "fused/fused.wgsl",
    "movement/gather.wgsl", "norm/layer_norm.wgsl", "softmax/softmax.wgsl",
    # The register-blocked MatMuls share nothing; the subgroup one checks that its subgroup holds
    # the rows it shares and else loads alone, so any WG is right (matmul_tiled's tiles need 64).
    "matmul/matmul_blocked.wgsl", "matmul/matmul_subgroup.wgsl",
})
PROBE_ROUNDS = 9  # alternating runs of the providers probe (median of each)
PROBE_WARMUP = 2

_lock = threading.Lock()
_loaded: dict[str, tuple[tuple, dict]] = {}  # cache path -> (file identity, parsed document)
_trial: dict[str, int] | None = None  # set by trial_workgroups() while wgnn tune measures
_trial_variants: dict[str, str] | None = None  # set by trial_variants() while wgnn tune measures
# Kernel families with variants per adapter: family -> the variants (backends/wgpu/matmul.py,
# attention.py, reduce.py hold the rules when nothing was tuned).
VARIANTS = {"matmul": ("blocked", "subgroup", "tiled"), "attention": ("rows", "tiled"),
            "rows": ("invocation", "workgroup"), "conv": ("registers", "tiled")}
_announced: set[tuple] = set()  # (adapter key, what) logged at INFO already


# ------------------------------------------------------------------------------------ the cache
def cache_dir() -> Path:
    """The folder of the tuning cache: $WGNN_CACHE_DIR, else ~/.cache/wgnn."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "wgnn"


def cache_path() -> Path:
    return cache_dir() / CACHE_FILE


def wgnn_version() -> str:
    from ... import __version__

    return __version__


def adapter_key(info) -> str:
    """The cache key of an adapter (a context.AdapterInfo): what must match for a measurement to
    still hold."""
    return f"{info.name} | {info.backend} | {info.driver} | wgnn {wgnn_version()}"


def load_cache() -> dict:
    """The cache document {"format", "entries": {key: entry}}; empty when there is none. A file
    that cannot be read is reported once and treated as empty (sessions never fail on it)."""
    path = cache_path()
    try:
        stat = path.stat()
    except OSError:
        return {"format": CACHE_FORMAT, "entries": {}}
    identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _lock:
        known = _loaded.get(str(path))
        if known is not None and known[0] == identity:
            return known[1]
    try:
        document = json.loads(path.read_text())
        if not isinstance(document, dict) or not isinstance(document.get("entries"), dict):
            raise ValueError("no 'entries' object")
        if document.get("format") != CACHE_FORMAT:
            raise ValueError(f"format {document.get('format')!r}, this wgnn reads {CACHE_FORMAT}")
    except (OSError, ValueError) as exc:
        log.warning("ignoring the tuning cache %s: %s (run `wgnn tune --clear`, then `wgnn tune`)", path, exc)
        document = {"format": CACHE_FORMAT, "entries": {}}
    with _lock:
        _loaded[str(path)] = (identity, document)
    return document


def cache_entry(info) -> dict | None:
    """The cached measurements of an adapter, or None."""
    return load_cache()["entries"].get(adapter_key(info))


def save_entry(info, updates: dict) -> Path:
    """Merge updates into the adapter's entry (created with its identity fields) and write the
    cache atomically. Returns the file's path."""
    path = cache_path()
    document = load_cache()
    entries = dict(document["entries"])
    entry = dict(entries.get(adapter_key(info)) or {"adapter": info.name, "backend": info.backend,
                                                    "driver": info.driver, "wgnn": wgnn_version()})
    entry.update(updates)
    entry["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    entries[adapter_key(info)] = entry
    _write(path, {"format": CACHE_FORMAT, "entries": entries})
    return path


def clear_cache(infos=None) -> int:
    """Remove the cache file (infos None), or only the entries of the given adapters. Returns the
    number of entries removed."""
    path = cache_path()
    document = load_cache()
    if infos is None:
        removed = len(document["entries"])
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with _lock:
            _loaded.pop(str(path), None)
        return removed
    keys = {adapter_key(info) for info in infos}
    entries = {k: v for k, v in document["entries"].items() if k not in keys}
    removed = len(document["entries"]) - len(entries)
    if removed:
        _write(path, {"format": CACHE_FORMAT, "entries": entries})
    return removed


def _write(path: Path, document: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        os.replace(temporary, path)  # readers see the old or the new file, never half of one
    except OSError as exc:
        raise WgnnError(f"could not write the tuning cache {path}: {exc} (set {CACHE_ENV} to a writable "
                        "folder)") from None
    with _lock:
        _loaded.pop(str(path), None)


def _announce(info, what: str, message: str, *args) -> None:
    """Log a tuning decision at INFO once per adapter and decision (sessions are made often)."""
    key = (adapter_key(info), what, *args)
    if key not in _announced:
        _announced.add(key)
        log.info(message, *args)


# ------------------------------------------------------------------------- workgroup sizes
def preferred_workgroup(context) -> int:
    """The WG of tunable kernels when nothing was tuned. A CPU adapter (lavapipe, llvmpipe) runs a
    workgroup as its SIMD groups one after another, and groups whose lanes are all past a kernel's
    count still run the kernel's body under an empty mask: a 1-invocation gemm1x1 dispatch cost
    106 us at WG 64 and 66 us at WG 8 (docs/performance.md). So there a workgroup is one SIMD
    group: its vector bits, as the device name says them ("llvmpipe (LLVM 15.0.6, 256 bits)"),
    over 32-bit lanes. GPUs keep 64."""
    if context.info.adapter_type != "CPU":
        return DEFAULT_WORKGROUP
    bits = re.search(r"(\d+) bits", context.info.name)
    return min(max(4, int(bits.group(1)) // 32) if bits else 8, workgroup_limit(context))


def workgroup_limit(context) -> int:
    return min(context.limits.get("max-compute-invocations-per-workgroup", 256),
               context.limits.get("max-compute-workgroup-size-x", 256))


def tuned_workgroup(context, kernel_path: str, default: int) -> int:
    """The WG the kernel kernels_wgsl/<kernel_path> runs with on this adapter: the tuned size when
    the cache has one (and the adapter allows it), else the adapter's preferred size. Kernels
    outside TUNABLE_KERNELS keep the caller's default."""
    if kernel_path not in TUNABLE_KERNELS:
        return default
    preferred = preferred_workgroup(context)
    if _trial is not None:  # wgnn tune is measuring: its candidate, never an older cached choice
        return _trial.get(kernel_path, preferred)
    entry = cache_entry(context.info)
    size = (entry or {}).get("workgroups", {}).get(kernel_path)
    if not isinstance(size, int) or size == preferred:
        return preferred
    most = workgroup_limit(context)
    if not 1 <= size <= most:
        log.debug("tuned WG %s of %s exceeds %s's limit %d: using %d", size, kernel_path, context.name, most, preferred)
        return preferred
    _announce(context.info, "wg", "%s runs with tuned workgroup size %d on %s", kernel_path, size, context.name)
    return size


def tuned_constants(context, path: str, constants: dict | None) -> dict:
    """The override constants a pipeline of `path` is compiled with: WG replaced by the tuned size
    where the caller passed the default. (The loader calls this, so every pipeline of a kernel,
    those compiled ahead of a resize too, gets the same size.)"""
    constants = dict(constants or {})
    if constants.get("WG") == DEFAULT_WORKGROUP:
        constants["WG"] = tuned_workgroup(context, path, DEFAULT_WORKGROUP)
    return constants


def kernel_grid(backend, invocations: int, kernel) -> tuple[int, int, int]:
    """The dispatch grid of `invocations` invocations of a kernel compiled with WG = kernel.workgroup:
    backend.grid() counts groups of the default size, so it is asked for as many of those as the
    kernel needs groups (same 2-D split past the per-dimension limit)."""
    workgroup = getattr(kernel, "workgroup", DEFAULT_WORKGROUP)
    if workgroup == DEFAULT_WORKGROUP:
        return backend.grid(invocations)
    return backend.grid(math.ceil(invocations / workgroup) * DEFAULT_WORKGROUP)


@contextlib.contextmanager
def trial_workgroups(sizes: dict[str, int]):
    """While active, tunable kernels get sizes[path] (else the preferred size), not the cached choice:
    for measuring candidates. Pipelines are keyed by their constants, so nothing is overwritten."""
    global _trial
    previous, _trial = _trial, dict(sizes)
    try:
        yield
    finally:
        _trial = previous


# --------------------------------------------------------------------------- kernel variants
def tuned_variant(context, family: str) -> str | None:
    """The variant of `family` (a VARIANTS key) wgnn tune measured faster on this adapter, the
    candidate while wgnn tune measures, or None (the family's own rule decides)."""
    if _trial_variants is not None:
        return _trial_variants.get(family)
    choice = ((cache_entry(context.info) or {}).get("variants") or {}).get(family)
    if choice not in VARIANTS[family]:
        return None
    _announce(context.info, "variant", "%s kernels on %s: %s, tuned (%s)", family, context.name, choice,
              str(cache_path()))
    return choice


def trial_variant(family: str) -> str | None:
    """The candidate of `family` wgnn tune is measuring now, else None."""
    return None if _trial_variants is None else _trial_variants.get(family)


@contextlib.contextmanager
def trial_variants(choices: dict[str, str]):
    """While active, tuned_variant() answers from `choices` (None for a family not named): for
    measuring candidates. Read while a session plans, so each variant's session keeps its kernels."""
    global _trial_variants
    previous, _trial_variants = _trial_variants, dict(choices)
    try:
        yield
    finally:
        _trial_variants = previous


# ---------------------------------------------------------------------------------- storage
def default_storage(half: bool) -> str:
    """NC4HW4 storage when nothing was measured: buffers in fp32, textures in fp16 (every adapter has
    rgba16float; f16 buffers need shader-f16)."""
    return "texture" if half else "buffer"


def tuned_storage(context, half: bool) -> str:
    """What Config(storage="auto") means on this adapter: the measured choice for the precision
    when the cache has one, else default_storage(). Says which at INFO level."""
    precision = "fp16" if half else "fp32"
    entry = cache_entry(context.info) or {}
    choice = entry.get("storage", {}).get(precision)
    if choice == "buffer" and half and "shader-f16" not in context.features:
        choice = None  # a hand-edited entry: f16 buffers cannot run here
    if choice in ("texture", "buffer"):
        timing = entry.get("storage_ms", {}).get(precision, {})
        _announce(context.info, "storage", "storage='auto' on %s (%s): %s, tuned (%s; %s)", context.name, precision,
                  choice, ", ".join(f"{k} {v:.3f} ms" for k, v in sorted(timing.items())) or "measured",
                  str(cache_path()))
        return choice
    choice = default_storage(half)
    _announce(context.info, "storage", "storage='auto' on %s (%s): %s, the default (no tuning entry in %s; "
              "`wgnn tune` measures one)", context.name, precision, choice, str(cache_path()))
    return choice


# -------------------------------------------------------------------------------- providers
# The probe in four forms (probe_model's kind and size): one step and nine steps of almost no
# work, and the CNN at the zoo's size and at 9x its work in the same steps; from their times
# each provider's cost per run, per step and per MFLOP on the adapter (fit_provider_costs).
PROBES = (("steps", 1), ("steps", 9), ("cnn", 32), ("cnn", 96))
PROVIDERS_RECORD = 2  # the cache record's form: 1 held one probe's medians, which named a provider for every model


def probe_model(kind: str = "cnn", size: int = 32):
    """A model providers=["auto"] times, built in the IR (no onnx needed). kind "cnn": a small CNN
    (3x3 convs with ReLU 3->16 and 16->16, max pool, 16->32, global average pool, a dense layer) on
    a 1x3xSIZExSIZE input; "steps": SIZE 1x1 convs 4->4 one after the other on a 1x4x8x8 input
    (a step each, almost no work)."""
    from ...engine.graph import Graph, Model, Node, TensorInfo

    rng = np.random.default_rng(0)

    def weight(shape):
        return (rng.standard_normal(shape) * math.sqrt(2.0 / math.prod(shape[1:]))).astype(np.float32)

    if kind == "steps":
        shape = (1, 4, 8, 8)
        inits = {f"w{i}": weight((4, 4, 1, 1)) for i in range(size)}
        nodes = [Node("Conv", ["x" if i == 0 else f"h{i}", f"w{i}"], ["y" if i == size - 1 else f"h{i + 1}"], {},
                      f"conv{i}") for i in range(size)]
    else:
        shape = (1, 3, size, size)
        inits = {"w1": weight((16, 3, 3, 3)), "w2": weight((16, 16, 3, 3)), "w3": weight((32, 16, 3, 3)),
                 "b1": np.zeros(16, np.float32), "b2": np.zeros(16, np.float32), "b3": np.zeros(32, np.float32),
                 "fc": weight((32, 10))}
        conv = {"pads": [1, 1, 1, 1], "activation": "relu"}
        nodes = [Node("Conv", ["x", "w1", "b1"], ["c1"], conv, "conv1"),
                 Node("Conv", ["c1", "w2", "b2"], ["c2"], conv, "conv2"),
                 Node("Pool", ["c2"], ["p"], {"kind": "max", "kernel_shape": [2, 2], "strides": [2, 2]}, "pool"),
                 Node("Conv", ["p", "w3", "b3"], ["c3"], conv, "conv3"),
                 Node("GlobalPool", ["c3"], ["g"], {"kind": "avg"}, "gap"),
                 Node("Flatten", ["g"], ["f"], {"axis": 1}, "flatten"),
                 Node("MatMul", ["f", "fc"], ["y"], {}, "dense")]
    graph = Graph(nodes, [TensorInfo("x", "float32", shape)], [TensorInfo("y", "float32", None)], inits,
                  name="providers-probe")
    feeds = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    return Model(graph, source="wgnn providers probe"), feeds


def alternate(measures: dict, rounds: int) -> dict[str, list[float]]:
    """Samples of each measure() (milliseconds), taken in turn round after round so a slow phase of
    the machine hits all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            samples[name].append(measure())
    return samples


def wall_ms(session, feeds) -> float:
    start = time.perf_counter()
    session.run(feeds)
    return (time.perf_counter() - start) * 1e3


def session_work(session) -> tuple[int, float]:
    """(steps, MFLOP) a resized session runs per run: what the providers' costs are counted in."""
    return len(session.steps), sum(step.flops or 0 for step in session.steps) / 1e6


def measure_providers(adapter: int, *, rounds: int = PROBE_ROUNDS, warmup: int = PROBE_WARMUP) -> dict:
    """Time each PROBES form of probe_model() end to end (upload, run, download: session.run) on
    ["wgpu", "numpy"] and on ["numpy"], all alternating, and fit each provider's costs
    (fit_provider_costs). Returns the cache record."""
    from ...engine.config import Config
    from ...engine.interpreter import Interpreter
    from ...engine.session import Session

    sessions, probes, fallbacks = {}, [], 0
    for kind, size in PROBES:
        model, feeds = probe_model(kind, size)
        interpreter = Interpreter(model)
        pair = {"wgpu": Session(interpreter, Config(providers=("wgpu", "numpy"), adapter=adapter)),
                "numpy": Session(interpreter, Config(providers=("numpy",)))}
        outputs = {name: session.run(feeds)["y"] for name, session in pair.items()}
        pair["wgpu"].wait_background()
        if not np.allclose(outputs["wgpu"], outputs["numpy"], rtol=1e-3, atol=1e-4):
            raise WgnnError("the providers probe gave different results on wgpu and numpy")
        fallbacks += len(pair["wgpu"].report()["fallbacks"])
        steps, mflop = session_work(pair["numpy"])
        probes.append({"kind": kind, "size": size, "steps": steps, "mflop": round(mflop, 3)})
        for name, session in pair.items():
            sessions[(len(probes) - 1, name)] = (session, feeds)
    for _ in range(warmup):
        for session, feeds in sessions.values():
            session.run(feeds)
    samples = alternate({key: (lambda s=s, f=f: wall_ms(s, f)) for key, (s, f) in sessions.items()}, rounds)
    for (index, name), values in samples.items():
        probes[index][f"{name}_ms"] = round(statistics.median(values), 4)
    return {"form": PROVIDERS_RECORD, "probes": probes, "costs": fit_provider_costs(probes), "rounds": rounds,
            "model": "steps: N 1x1 convs 4->4 on 1x4x8x8; cnn: 3x3 convs 3->16, 16->16, pool, 16->32, dense on 1x3xNxN",
            "fallbacks": fallbacks}


def fit_provider_costs(probes: list[dict]) -> dict[str, dict[str, float]]:
    """Each provider's milliseconds per run, per step and per MFLOP, from the probes' medians
    (least squares of ms = run + steps x step + MFLOP x mflop; a negative cost, noise, becomes 0
    and the others are fitted again)."""
    rows = np.array([[1.0, p["steps"], p["mflop"]] for p in probes])
    costs = {}
    for name in ("wgpu", "numpy"):
        times = np.array([p[f"{name}_ms"] for p in probes])
        kept = [0, 1, 2]
        while True:
            solution, *_ = np.linalg.lstsq(rows[:, kept], times, rcond=None)
            if (solution >= 0).all() or len(kept) == 1:
                break
            kept.pop(int(np.argmin(solution)))
        fitted = dict.fromkeys(("run_ms", "step_ms", "mflop_ms"), 0.0)
        for column, value in zip(kept, solution, strict=True):
            fitted[("run_ms", "step_ms", "mflop_ms")[column]] = float(max(value, 0.0))
        costs[name] = {key: round(value, 6) for key, value in fitted.items()}
    return costs


def predicted_ms(costs: dict[str, float], steps: int, mflop: float) -> float:
    """A provider's predicted milliseconds per run for a model of `steps` steps and `mflop` MFLOP."""
    return costs["run_ms"] + steps * costs["step_ms"] + mflop * costs["mflop_ms"]


def choose_providers(choice: dict, steps: int, mflop: float) -> dict:
    """providers=["auto"] for one resized model: the provider predicted faster by the adapter's
    fitted costs (choice["costs"], from resolve_auto_providers). Returns the choice for the model:
    its providers, work and both predictions."""
    predicted = {name: round(predicted_ms(costs, steps, mflop), 4) for name, costs in choice["costs"].items()}
    providers = ["wgpu", "numpy"] if predicted["wgpu"] < predicted["numpy"] else ["numpy"]
    return {**choice, "providers": providers, "model_steps": steps, "model_mflop": round(mflop, 3),
            "predicted_ms": predicted}


def crossover_mflop(costs: dict[str, dict[str, float]], steps: int) -> float | None:
    """The work (MFLOP) from which wgpu is predicted faster for a model of `steps` steps, or None
    where numpy is predicted faster at any size (its cost per MFLOP no higher)."""
    gpu, cpu = costs["wgpu"], costs["numpy"]
    gain = cpu["mflop_ms"] - gpu["mflop_ms"]
    if gain <= 0:
        return None
    fixed = gpu["run_ms"] + steps * gpu["step_ms"] - cpu["run_ms"] - steps * cpu["step_ms"]
    return max(0.0, fixed / gain)


def describe_provider_costs(record) -> str:
    """A providers record in a line: each provider's fitted costs, and from how much work wgpu is
    predicted faster for a model of 50 steps."""
    if not _valid_record(record):
        return "- (an earlier form of the probe: measured again when providers=['auto'] needs it)"
    costs = record["costs"]
    parts = [f"{name} {costs[name]['run_ms']:.3f} + {costs[name]['step_ms']:.4f}/step + "
             f"{costs[name]['mflop_ms']:.5f}/MFLOP ms" for name in ("wgpu", "numpy")]
    crossover = crossover_mflop(costs, 50)
    verdict = ("numpy for every model of 50 steps" if crossover is None
               else f"wgpu from {crossover:.0f} MFLOP for a model of 50 steps")
    return f"{'; '.join(parts)}: {verdict}"


def resolve_auto_providers(adapter=None) -> tuple[tuple[str, ...], dict]:
    """What providers=["auto"] means for the adapter Config(adapter=...) names: ("wgpu", "numpy")
    where wgpu can be the faster for some model (one of its fitted costs lower than numpy's: the
    session then picks per model at each resize, choose_providers), else ("numpy",). Uses the cache;
    measures (and stores) once when the adapter has no entry. Returns (providers, the choice with
    the adapter's fitted costs)."""
    from .context import get_context, gpu_available

    unavailable = gpu_available()
    if unavailable is not None:
        choice = {"providers": ["numpy"], "reason": f"no GPU adapter: {unavailable}"}
        log.info("providers=['auto']: numpy (%s)", choice["reason"])
        return ("numpy",), choice
    context = get_context(adapter)
    record = (cache_entry(context.info) or {}).get("providers")
    source = "cache"
    if not _valid_record(record):
        source = "measured"
        try:
            record = measure_providers(context.index)
        except WgnnError as exc:
            choice = {"providers": ["numpy"], "adapter": context.name, "reason": f"the probe failed: {exc}"}
            log.warning("providers=['auto'] on %s: numpy (the probe failed: %s)", context.name, exc)
            return ("numpy",), choice
        try:
            save_entry(context.info, {"providers": record})
        except WgnnError as exc:  # a read-only home: the choice still holds for this process
            log.warning("%s", exc)
    costs = record["costs"]
    gpu, cpu = costs["wgpu"], costs["numpy"]
    # For some model of at least one step: at its smallest (one step, no work) or its largest.
    can_win = (gpu["step_ms"] < cpu["step_ms"] or gpu["mflop_ms"] < cpu["mflop_ms"]
               or gpu["run_ms"] + gpu["step_ms"] < cpu["run_ms"] + cpu["step_ms"])
    providers = ("wgpu", "numpy") if can_win else ("numpy",)
    choice = {"providers": list(providers), "adapter": context.name, "adapter_index": context.index,
              "costs": costs, "source": source, "cache": str(cache_path())}
    log.info("providers=['auto'] on %s: %s (ms per run + per step + per MFLOP: wgpu %.3f + %.4f + %.4f, "
             "numpy %.3f + %.4f + %.4f; %s, %s)", context.name,
             "wgpu or numpy by each model's work" if can_win else "numpy for every model",
             gpu["run_ms"], gpu["step_ms"], gpu["mflop_ms"], cpu["run_ms"], cpu["step_ms"], cpu["mflop_ms"],
             source, cache_path())
    return providers, choice


def _valid_record(record) -> bool:
    if not isinstance(record, dict) or record.get("form") != PROVIDERS_RECORD:
        return False
    costs = record.get("costs")
    return (isinstance(costs, dict) and isinstance(record.get("probes"), list) and record["probes"]
            and all(isinstance(costs.get(name), dict) and all(isinstance(costs[name].get(key), (int, float))
                                                             for key in ("run_ms", "step_ms", "mflop_ms"))
                    for name in ("wgpu", "numpy")))
