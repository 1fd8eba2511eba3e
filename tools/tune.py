"""`wgnn tune`: measure, per adapter, what the tuning cache (backends/wgpu/tuning.py) stores.

1. NC4HW4 storage: a few representative ops (Conv 3x3, depthwise 3x3, max pool, Add of two NC4HW4
   maps), each as a small model run through a real session, once with storage="buffer" and once
   with "texture", timed in turn; the storage with the smaller sum of medians becomes what
   storage="auto" means (fp32; fp16 too where f16 buffers can run, i.e. with shader-f16).
2. Workgroup sizes: the same ops with every candidate WG for the kernels they dispatch (only
   kernels in TUNABLE_KERNELS), timed in turn; the fastest WG is stored per kernel.
   In both, a choice other than the default must be MARGIN faster than the default to be taken.
3. Kernel variants: a Conv 3x3 64->64 at 28x28 (the tiled path forced, against the path the cost
   model picks without it: "tiled" / "registers"), a MatMul 256^3 (blocked, subgroup where the
   adapter has subgroups, tiled), an attention of 8 heads x 128 tokens x 64 (rows, tiled) and a
   LayerNorm -> Softmax over 512 rows of 768 (an invocation or a workgroup per row), each variant
   through its own session, timed in turn; a variant other than the adapter type's default must be
   MARGIN faster to be stored.
4. Providers: the providers probe (tuning.measure_providers) that providers=["auto"] decides by.

An op's time is the GPU time of its own steps from timestamp queries where the adapter has them
(layout conversions excluded), else the wall time of the submission that runs it. Every variant's
output is checked against the numpy backend first. Nothing here asserts a speed.
"""
from __future__ import annotations

import math
import statistics

import numpy as np

from ..engine.errors import WgnnError

ROUNDS, QUICK_ROUNDS = 7, 3
WARMUP, QUICK_WARMUP = 2, 1
# A non-default storage or workgroup size is stored only when it is this much faster than the default:
# smaller differences were within run-to-run noise here (2 shared cores), and would make the choice flip.
MARGIN = 0.05


def case_specs(quick: bool) -> list[dict]:
    """The measured ops: name, the op type timed, and sizes (quick: tiny, for smoke tests)."""
    c, s = (8, 8) if quick else (32, 28)
    d = 8 if quick else 64
    return [{"case": f"Conv 3x3 {c}->{c} @{s}", "kind": "conv", "op": "Conv", "channels": c, "size": s},
            {"case": f"depthwise 3x3 {d} @{s}", "kind": "depthwise", "op": "Conv", "channels": d, "size": s},
            {"case": f"MaxPool 3x3/2 {c} @{s}", "kind": "pool", "op": "Pool", "channels": c, "size": s},
            {"case": f"Add NC4HW4 {c} @{s}", "kind": "add", "op": "Binary", "channels": c, "size": s}]


def variant_specs(quick: bool) -> list[dict]:
    """The cases of the kernel families with variants (tuning.VARIANTS)."""
    m, (heads, tokens, head), (rows, width) = (32, (2, 16, 16), (16, 256)) if quick else (256, (8, 128, 64), (512, 768))
    c, s = (8, 8) if quick else (64, 28)
    return [{"case": f"Conv 3x3 {c}->{c} @{s} paths", "kind": "conv", "family": "conv", "op": ("Conv",),
             "channels": c, "size": s},
            {"case": f"MatMul {m}^3", "kind": "matmul", "family": "matmul", "op": ("MatMul",), "x": (m, m)},
            {"case": f"Attention {heads}x{tokens}x{head}", "kind": "attention", "family": "attention",
             "op": ("Attention",), "x": (heads, tokens, head)},
            {"case": f"LayerNorm + Softmax {rows}x{width}", "kind": "rows", "family": "rows",
             "op": ("LayerNorm", "Softmax"), "x": (rows, width)}]


def case_model(spec: dict):
    """The case as a wgnn Model (built in the IR: no onnx needed) and its feeds. Add takes the
    outputs of two 1x1 convs, so both of its inputs are NC4HW4 as in a real network. Attention
    takes its one input as Q, K (read transposed) and V."""
    from ..engine.graph import Graph, Model, TensorInfo

    rng = np.random.default_rng(0)
    kind = spec["kind"]
    if kind in ("matmul", "attention", "rows"):
        shape = spec["x"]
        inits, nodes = _variant_case(kind, shape, rng)
    else:
        c, s = spec["channels"], spec["size"]
        shape = (1, c, s, s)
        inits, nodes = _conv_case(kind, c, rng)
    graph = Graph(nodes, [TensorInfo("x", "float32", shape)], [TensorInfo("y", "float32", None)], inits,
                  name=spec["case"])
    return Model(graph, source="wgnn tune"), {"x": rng.standard_normal(shape).astype(np.float32)}


def _conv_case(kind: str, c: int, rng) -> tuple[dict, list]:
    from ..engine.graph import Node

    pads = {"pads": [1, 1, 1, 1]}
    inits: dict[str, np.ndarray] = {"b": rng.standard_normal(c).astype(np.float32)}
    if kind == "conv":
        inits["w"] = (rng.standard_normal((c, c, 3, 3)) / math.sqrt(9 * c)).astype(np.float32)
        return inits, [Node("Conv", ["x", "w", "b"], ["y"], pads, "conv")]
    if kind == "depthwise":
        inits["w"] = (rng.standard_normal((c, 1, 3, 3)) / 3).astype(np.float32)
        return inits, [Node("Conv", ["x", "w", "b"], ["y"], {**pads, "group": c}, "depthwise")]
    if kind == "pool":
        return {}, [Node("Pool", ["x"], ["y"], {"kind": "max", "kernel_shape": [3, 3], "strides": [2, 2], **pads},
                         "pool")]
    inits["w1"] = (rng.standard_normal((c, c, 1, 1)) / math.sqrt(c)).astype(np.float32)
    inits["w2"] = (rng.standard_normal((c, c, 1, 1)) / math.sqrt(c)).astype(np.float32)
    return inits, [Node("Conv", ["x", "w1", "b"], ["a"], {}, "conv_a"), Node("Conv", ["x", "w2"], ["c"], {}, "conv_b"),
                   Node("Binary", ["a", "c"], ["y"], {"kind": "add"}, "add")]


def _variant_case(kind: str, shape: tuple, rng) -> tuple[dict, list]:
    from ..engine.graph import Node

    if kind == "matmul":
        w = (rng.standard_normal((shape[1], shape[1])) / math.sqrt(shape[1])).astype(np.float32)
        return {"w": w}, [Node("MatMul", ["x", "w"], ["y"], {}, "matmul")]
    if kind == "attention":
        return {}, [Node("Attention", ["x", "x", "x"], ["y"], {"trans_k": 1, "alpha": 1 / math.sqrt(shape[-1])},
                         "attention")]
    width = shape[-1]
    inits = {name: rng.standard_normal(width).astype(np.float32) for name in ("scale", "bias")}
    return inits, [Node("LayerNorm", ["x", "scale", "bias"], ["n"], {"axis": -1}, "layer_norm"),
                   Node("Softmax", ["n"], ["y"], {"axis": -1, "kind": "softmax"}, "softmax")]


class TimedCase:
    """One case on one configuration: planned, checked against numpy, warmed up, then profiled;
    measure() runs it once and returns the op's milliseconds."""

    def __init__(self, spec: dict, config, reference: np.ndarray, warmup: int):
        from ..engine.interpreter import Interpreter
        from ..engine.session import Session

        self.spec = spec
        self.model, self.feeds = case_model(spec)
        self.session = Session(Interpreter(self.model), config)
        got = self.session.run(self.feeds)["y"]
        self.session.wait_background()  # times the kernels a session keeps, on cores of its own
        fallbacks = self.session.report()["fallbacks"]
        if fallbacks:
            raise WgnnError(f"{spec['case']}: ran on the CPU: {fallbacks[0]['reasons']}")
        tolerance = 2e-2 if config.precision == "fp16" else 1e-4
        if not np.allclose(got, reference, rtol=tolerance, atol=tolerance):
            raise WgnnError(f"{spec['case']}: wrong results with {describe(config)} "
                            f"(max abs error {float(np.abs(got - reference).max()):.3g})")
        for _ in range(warmup):
            self.session.run(self.feeds)
        self.backend = next(b for b in self.session.backends if hasattr(b, "enable_profiling"))
        steps = [(step, ex) for seg in self.session.segments for step, ex in seg.steps]
        self.ops = spec["op"] if isinstance(spec["op"], tuple) else (spec["op"],)
        self.kernels = sorted({d.kernel.path for step, ex in steps if step.op.op_type in self.ops
                               for d in getattr(ex, "dispatches", [])})
        self.workgroups = sorted({d.kernel.workgroup for step, ex in steps if step.op.op_type in self.ops
                                  for d in getattr(ex, "dispatches", [])})
        self.profiler = self.backend.enable_profiling(len(steps))

    def measure(self) -> float:
        self.session.run(self.feeds)
        total = 0.0
        for record in self.profiler.take():
            if record["method"] != "timestamp-query":
                total += record["wall_ms"]
                continue
            total += sum(end - begin for step, _, begin, end in record["steps"]
                         if begin is not None and step.op.op_type in self.ops)
        return total

    def close(self) -> None:
        self.backend.disable_profiling()


def describe(config) -> str:
    return f"storage={config.storage} precision={config.precision}"


def reference_output(spec: dict) -> np.ndarray:
    from ..engine.config import Config
    from ..engine.interpreter import Interpreter
    from ..engine.session import Session

    model, feeds = case_model(spec)
    return Session(Interpreter(model), Config(providers=("numpy",))).run(feeds)["y"]


def compare(variants: dict[str, TimedCase], rounds: int) -> dict[str, float]:
    """Median ms of each variant, timed in turn round after round."""
    from ..backends.wgpu.tuning import alternate

    try:
        samples = alternate({name: case.measure for name, case in variants.items()}, rounds)
    finally:
        for case in variants.values():
            case.close()
    return {name: round(statistics.median(values), 4) for name, values in samples.items()}


def tune_storage(index: int, specs: list[dict], references: dict, precision: str, rounds: int, warmup: int) -> dict:
    from ..backends.wgpu.tuning import default_storage
    from ..engine.config import Config

    cases, totals = {}, {"buffer": 0.0, "texture": 0.0}
    for spec in specs:
        variants = {storage: TimedCase(spec, Config(providers=("wgpu",), adapter=index, storage=storage,
                                                    precision=precision), references[spec["case"]], warmup)
                    for storage in ("buffer", "texture")}
        cases[spec["case"]] = compare(variants, rounds)
        for storage, ms in cases[spec["case"]].items():
            totals[storage] += ms
    totals = {k: round(v, 4) for k, v in totals.items()}
    default = default_storage(precision == "fp16")
    other = "buffer" if default == "texture" else "texture"
    choice = other if totals[other] < totals[default] * (1 - MARGIN) else default
    return {"choice": choice, "default": default, "total_ms": totals, "cases": cases}


def tune_workgroups(context, specs: list[dict], references: dict, storage: str, candidates, rounds: int,
                    warmup: int) -> dict:
    from ..backends.wgpu.tuning import TUNABLE_KERNELS, preferred_workgroup, trial_workgroups, workgroup_limit
    from ..engine.config import Config

    sizes = [size for size in candidates if size <= workgroup_limit(context)]
    preferred = preferred_workgroup(context)
    config = Config(providers=("wgpu",), adapter=context.index, storage=storage)
    result = {}
    for spec in specs:
        with trial_workgroups({}):
            probe = TimedCase(spec, config, references[spec["case"]], 0)
            probe.close()
        kernels = [k for k in probe.kernels if k in TUNABLE_KERNELS]
        if not kernels:
            continue
        variants = {}
        for size in sizes:
            # The trial is read while the session plans (pipelines are built then), not while it runs.
            with trial_workgroups(dict.fromkeys(kernels, size)):
                variants[str(size)] = TimedCase(spec, config, references[spec["case"]], warmup)
            if variants[str(size)].workgroups != [size]:
                raise WgnnError(f"{spec['case']}: asked for WG {size}, the kernels ran with "
                                f"{variants[str(size)].workgroups}")
        ms = compare(variants, rounds)
        best = min(sizes, key=lambda size: ms[str(size)])
        if preferred in sizes and ms[str(best)] >= ms[str(preferred)] * (1 - MARGIN):
            best = preferred
        result[spec["case"]] = {"kernels": kernels, "ms": ms, "best": best, "preferred": preferred}
    return result


VARIANT_ENVS = ("WGNN_MATMUL_VARIANT", "WGNN_ATTENTION_VARIANT", "WGNN_ROW_KERNEL", "WGNN_CONV_PATH")


def refuse_forced_variants() -> None:
    """Measuring the variants with a variable forcing one would time one kernel under every name."""
    import os

    forced = [name for name in VARIANT_ENVS if os.environ.get(name, "").strip()]
    if forced:
        raise WgnnError(f"{', '.join(forced)} force kernel variants: unset {'it' if len(forced) == 1 else 'them'} "
                        "to measure the variants")


def default_variants(context) -> dict[str, str]:
    """Each family's variant by the adapter's type (what runs where nothing was tuned)."""
    from ..backends.wgpu.attention import default_variant
    from ..backends.wgpu.conv_paths import default_conv_variant
    from ..backends.wgpu.matmul import resolve_variant
    from ..backends.wgpu.reduce import default_row_kernel

    return {"matmul": resolve_variant(None, context), "attention": default_variant(context),
            "rows": default_row_kernel(context), "conv": default_conv_variant(context)}


def tune_variants(context, specs: list[dict], references: dict, storage: str, rounds: int, warmup: int) -> dict:
    """Each family's variants on its case, timed in turn: {family: {case, ms, choice, default}}."""
    from ..backends.wgpu.tuning import VARIANTS, trial_variants
    from ..engine.config import Config

    config = Config(providers=("wgpu",), adapter=context.index, storage=storage)
    defaults = default_variants(context)
    result = {}
    for spec in specs:
        family = spec["family"]
        candidates = [v for v in VARIANTS[family] if v != "subgroup" or "subgroup" in context.features]
        variants = {}
        for variant in candidates:
            with trial_variants({family: variant}):  # read while the session plans its kernels
                variants[variant] = TimedCase(spec, config, references[spec["case"]], warmup)
        ms = compare(variants, rounds)
        default = defaults[family]
        best = min(candidates, key=lambda v: ms[v])
        if ms[best] >= ms[default] * (1 - MARGIN):
            best = default
        result[family] = {"case": spec["case"], "ms": ms, "choice": best, "default": default,
                          "kernels": {v: case.kernels for v, case in variants.items()}}
    return result


def tune_adapter(index: int, *, quick: bool = False, rounds: int | None = None, show_progress: bool = True) -> dict:
    """Measure storage, workgroup sizes and providers on adapter `index` and store them in the cache.
    Returns what was stored plus the per-case details."""
    from ..backends.wgpu.context import get_context
    from ..backends.wgpu.tuning import (
        WORKGROUP_CANDIDATES,
        cache_path,
        measure_providers,
        preferred_workgroup,
        save_entry,
    )
    from .progress import progress

    refuse_forced_variants()
    context = get_context(index)
    rounds = rounds or (QUICK_ROUNDS if quick else ROUNDS)
    warmup = QUICK_WARMUP if quick else WARMUP
    specs, varied = case_specs(quick), variant_specs(quick)
    references = {spec["case"]: reference_output(spec) for spec in specs + varied}
    precisions = ["fp32"] + (["fp16"] if not quick and "shader-f16" in context.features else [])
    candidates = sorted({preferred_workgroup(context), 64}) if quick else WORKGROUP_CANDIDATES
    steps = [("storage", p) for p in precisions] + [("workgroups", None), ("variants", None), ("providers", None)]
    storage: dict[str, dict] = {}
    workgroups: dict = {}
    variants: dict = {}
    providers: dict = {}
    method = "timestamp-query" if "timestamp-query" in context.features else "wall"
    for what, precision in progress(steps, f"tuning adapter {index}", enabled=show_progress):
        if what == "storage":
            storage[precision] = tune_storage(index, specs, references, precision, rounds, warmup)
        elif what == "workgroups":
            workgroups = tune_workgroups(context, specs, references, storage["fp32"]["choice"], candidates, rounds,
                                         warmup)
        elif what == "variants":
            variants = tune_variants(context, varied, references, storage["fp32"]["choice"], rounds, warmup)
            sizes = {kernel: row["best"] for row in workgroups.values() for kernel in row["kernels"]}
            # Stored before the providers probe, so the probe runs with the tuned settings.
            save_entry(context.info, {
                "storage": {p: r["choice"] for p, r in storage.items()},
                "storage_ms": {p: r["total_ms"] for p, r in storage.items()},
                "workgroups": sizes, "variants": {family: row["choice"] for family, row in variants.items()},
                "method": method, "quick": quick, "rounds": rounds,
                "cases": {"storage": {p: r["cases"] for p, r in storage.items()}, "workgroups": workgroups,
                          "variants": variants}})
        else:
            providers = measure_providers(index, rounds=rounds, warmup=warmup)
            save_entry(context.info, {"providers": providers})
    return {"index": index, "adapter": context.name, "method": method, "quick": quick, "rounds": rounds,
            "storage": storage, "workgroups": workgroups, "variants": variants, "providers": providers,
            "cache": str(cache_path())}


def tune(adapters: list[int], **options) -> dict:
    """`wgnn tune` on each adapter index in turn."""
    return {"adapters": [tune_adapter(index, **options) for index in adapters]}


def format_tuning(result: dict) -> str:
    from ..backends.wgpu.tuning import describe_provider_costs
    from .cli import table

    lines = []
    for entry in result["adapters"]:
        timing = ("GPU timestamp queries" if entry["method"] == "timestamp-query"
                  else "wall clock around submit + wait (no timestamp-query)")
        lines += [f"adapter {entry['index']}: {entry['adapter']}   timing: {timing}"
                  f"{'   (--quick: tiny sizes)' if entry['quick'] else ''}", ""]
        for precision, found in entry["storage"].items():
            rows = [[case, f"{ms['buffer']:.3f}", f"{ms['texture']:.3f}"] for case, ms in found["cases"].items()]
            rows.append(["total", f"{found['total_ms']['buffer']:.3f}", f"{found['total_ms']['texture']:.3f}"])
            lines += [f"NC4HW4 storage ({precision}): median ms of the op over {entry['rounds']} alternating runs "
                      f"-> storage='auto' is {found['choice']} (default {found['default']}; another choice must "
                      f"be {MARGIN:.0%} faster)", table(["case", "buffer", "texture"], rows), ""]
        if entry["workgroups"]:
            sizes = sorted({int(s) for row in entry["workgroups"].values() for s in row["ms"]})
            rows = [[case, ", ".join(row["kernels"]), *(f"{row['ms'][str(s)]:.3f}" for s in sizes), row["best"]]
                    for case, row in entry["workgroups"].items()]
            preferred = next(iter(entry["workgroups"].values())).get("preferred", 64)
            lines += [f"workgroup size (WG): median ms of the op per size (the adapter's preferred {preferred} "
                      f"unless another size is {MARGIN:.0%} faster)",
                      table(["case", "kernels", *(f"WG {s}" for s in sizes), "best"], rows), ""]
        if entry["variants"]:
            rows = [[family, row["case"], ", ".join(f"{v} {ms:.3f}" for v, ms in row["ms"].items()), row["choice"],
                     row["default"]] for family, row in entry["variants"].items()]
            lines += [f"kernel variants: median ms of the op(s) per variant (the adapter type's default unless "
                      f"another is {MARGIN:.0%} faster)",
                      table(["family", "case", "ms", "choice", "default"], rows), ""]
        p = entry["providers"]
        rows = [[f"{probe['kind']} {probe['size']}", str(probe["steps"]), f"{probe['mflop']:.1f}",
                 f"{probe['wgpu_ms']:.3f}", f"{probe['numpy_ms']:.3f}"] for probe in p["probes"]]
        lines += [f"providers probe ({p['model']}), median ms per run over {p['rounds']} alternating runs",
                  table(["probe", "steps", "MFLOP", "wgpu ms", "numpy ms"], rows),
                  f"fitted ms per run: {describe_provider_costs(p)}; providers=['auto'] takes the provider "
                  "predicted faster for each model", ""]
    if result["adapters"]:
        lines.append(f"stored in {result['adapters'][0]['cache']}")
    return "\n".join(lines)


def format_cache(document: dict, path: str) -> str:
    """`wgnn tune --show`: one row per cached adapter (workgroup sizes: the common one, then the
    kernels that differ)."""
    from collections import Counter

    from ..backends.wgpu.tuning import describe_provider_costs
    from .cli import table

    entries = document["entries"]
    if not entries:
        return f"no tuning cache entries in {path} (run `wgnn tune`)"
    rows = []
    for entry in entries.values():
        storage = ", ".join(f"{p} {choice}" for p, choice in sorted(entry.get("storage", {}).items())) or "-"
        tuned = entry.get("workgroups")
        sizes = "-"
        if tuned:
            common = Counter(tuned.values()).most_common(1)[0][0]
            others = [f"{k.split('/')[-1]}={v}" for k, v in sorted(tuned.items()) if v != common]
            sizes = f"all {common}" + (f" except {', '.join(others)}" if others else "")
        variants = ", ".join(f"{family} {choice}" for family, choice in sorted(entry.get("variants", {}).items()))
        probe = entry.get("providers")
        providers = describe_provider_costs(probe) if probe else "-"
        rows.append([f"{entry['adapter']} ({entry['backend']})", entry["driver"], entry["wgnn"],
                     entry.get("updated", "-"), storage, sizes, variants or "-", providers])
    return (f"{path}\n"
            + table(["adapter", "driver", "wgnn", "measured", "storage auto", "workgroup sizes", "kernel variants",
                     "providers auto"], rows))
