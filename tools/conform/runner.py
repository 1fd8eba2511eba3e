"""Runs cases on backend targets: "numpy" (the numpy backend alone) and each GPU adapter
("wgpu:<index> <name> (<backend>)", with numpy as the fallback, recording which steps fell back).

Each case is converted once (and written to .wgnn bytes and read back, as users load models) and
run on every target; an exception in one case and target is that result's error, never the run's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...engine.errors import AdapterError, ConversionError, UnsupportedOpError
from ..progress import progress
from .compare import compare_output, magnitude
from .sources import DEFAULT_DOMAINS, Case, constant_shape_inputs, default_opset, graph_ops, quiet

OUTCOMES = ("pass", "fallback", "fail", "error", "unsupported")
ERROR_CHARS = 2000  # exception texts are cut here: some list every node of a graph


@dataclass
class Target:
    id: str
    kind: str  # numpy | wgpu
    index: int | None = None
    info: dict = field(default_factory=dict)

    def session(self, model):
        from ...engine.api import InferenceSession
        from ...engine.config import Config

        if self.kind == "numpy":
            return InferenceSession(model, providers=["numpy"])
        return InferenceSession(model, config=Config(providers=("wgpu", "numpy"), adapter=self.index))

    def as_dict(self) -> dict:
        keys = ("name", "backend", "adapter_type", "driver", "vendor")
        return {"id": self.id, "kind": self.kind, "index": self.index, **{k: self.info.get(k) for k in keys}}


def gpu_target(info: dict) -> Target:
    return Target(f"wgpu:{info['index']} {info['name']} ({info['backend']})", "wgpu", info["index"], info)


def resolve_targets(spec: str | None) -> tuple[list[Target], str | None]:
    """Targets named by --adapters (comma separated: numpy, all, wgpu:<i>, an index, a backend
    type such as vulkan or gl, or a name substring), by default numpy and every adapter. Also
    returns why there is no GPU target, when there is none."""
    from ...backends.wgpu.context import adapters, gpu_available, select_adapter

    unavailable = gpu_available()
    found = [] if unavailable else [a.as_dict() for a in adapters()]
    items = [s.strip() for s in (spec or "numpy,all").split(",") if s.strip()]
    if not items:
        raise AdapterError("--adapters names no target")
    targets: list[Target] = []
    for item in items:
        if item == "numpy":
            chosen = [Target("numpy", "numpy")]
        elif item in ("all", "gpu", "wgpu"):
            chosen = [gpu_target(a) for a in found]
        else:
            if unavailable:
                raise AdapterError(f"--adapters {item}: no GPU adapter is usable here ({unavailable})")
            choice = item.split(":", 1)[1] if item.startswith("wgpu:") else item
            chosen = [gpu_target(found[select_adapter(choice)])]
        targets.extend(t for t in chosen if t.id not in {x.id for x in targets})
    return targets, unavailable


@dataclass
class Result:
    outcome: str
    error: str | None = None
    seconds: float = 0.0
    outputs: list[dict] = field(default_factory=list)
    fallbacks: list[dict] = field(default_factory=list)
    unsupported: str | None = None  # op (no converter), form (the converter refuses it), backend

    def worst(self, key: str):
        """The largest max_abs or max_rel over the outputs (None when nothing was compared)."""
        values = [o[key] for o in self.outputs if o.get(key) is not None]
        return max(values, key=magnitude, default=None)

    def as_dict(self) -> dict:
        row = {"outcome": self.outcome, "seconds": round(self.seconds, 4)}
        for key in ("error", "unsupported"):
            if getattr(self, key):
                row[key] = getattr(self, key)
        if self.outputs:
            row["max_abs"], row["max_rel"] = self.worst("max_abs"), self.worst("max_rel")
            if self.outcome not in ("pass", "fallback"):  # details only where something is wrong
                row["outputs"] = self.outputs
        if self.fallbacks:
            row["fallbacks"] = self.fallbacks
        return row


@dataclass
class CaseRun:
    case: Case
    claimed: bool
    conversion: dict
    inputs: list[dict]
    expected: list[dict]
    results: dict[str, Result]
    prepare_seconds: float = 0.0  # building the case (reference outputs) and converting it
    frozen: list[str] = field(default_factory=list)  # inputs fed as constants (--constant-shape-inputs)


def error_text(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " ..."


def describe(value) -> dict:
    if isinstance(value, np.ndarray):
        return {"shape": list(value.shape), "dtype": value.dtype.name}
    return {"type": "sequence" if isinstance(value, list) else "optional" if value is None else type(value).__name__}


def claimed_ops() -> set[str]:
    from ..convert.onnx import _load_table
    from ..convert.onnx.table import CONVERTERS

    _load_table()
    return set(CONVERTERS)


def _expanded_ops(model, claimed: set[str]) -> set[str]:
    """Op types (as graph_ops names them) the converter expands into the ops ONNX defines them by
    (tools/convert/onnx/functions.py): wgnn runs them, so their failures count."""
    from ..convert.onnx.functions import expandable

    opset = default_opset(model)
    calls = expandable(model, opset, claimed) if opset else set()
    return {op if domain in DEFAULT_DOMAINS else f"{domain}.{op}" for domain, op in calls}


def run_case(case: Case, targets: list[Target], claimed: set[str], constant_shapes: bool = False) -> CaseRun:
    from ...models.format import model_to_bytes, read_model
    from ..convert.onnx import convert_onnx

    applicable = [t for t in targets if case.backends is None or t.kind in case.backends]
    run = CaseRun(case, bool(case.ops) and all(op in claimed for op in case.ops), {"outcome": "ok"}, [], [], {})

    def everywhere(result: Result) -> CaseRun:
        run.results = {t.id: result for t in applicable}
        return run

    start = time.perf_counter()
    try:
        with quiet():
            loaded = case.load()
            if constant_shapes:
                loaded, run.frozen = constant_shape_inputs(loaded)
    except Exception as exc:
        run.conversion = {"outcome": "error", "error": f"building the case failed: {error_text(exc)}"}
        return everywhere(Result("error", run.conversion["error"]))
    finally:
        run.prepare_seconds = time.perf_counter() - start
    case.ops = graph_ops(loaded.model)  # models know their op types only once built
    missing = [op for op in case.ops if op not in claimed]
    if missing:  # ops the converter expands into their bodies are run, not missing
        expanded = _expanded_ops(loaded.model, claimed)
        missing = [op for op in missing if op not in expanded]
    run.claimed = not missing
    first_feeds, first_expected = loaded.data_sets[0]
    run.inputs = [{"name": k, **describe(v)} for k, v in first_feeds.items()]
    out_names = [vi.name for vi in loaded.model.graph.output]
    run.expected = [{"name": out_names[i] if i < len(out_names) else f"#{i}", **describe(v)}
                    for i, v in enumerate(first_expected)]
    if missing:  # what the converter would say, also for models it refuses earlier (no default opset)
        run.conversion = {"outcome": "unsupported", "kind": "op", "ops": missing,
                          "error": f"op types wgnn does not convert: {', '.join(missing)}"}
        return everywhere(Result("unsupported", run.conversion["error"], unsupported="op"))
    start = time.perf_counter()
    try:
        with quiet():
            model = read_model(model_to_bytes(convert_onnx(loaded.model)))
    except UnsupportedOpError as exc:
        run.conversion = {"outcome": "unsupported", "kind": "op", "error": error_text(exc),
                          "ops": sorted(exc.op_counts)}
        return everywhere(Result("unsupported", run.conversion["error"], unsupported="op"))
    except ConversionError as exc:
        run.conversion = {"outcome": "unsupported", "kind": "form", "error": error_text(exc)}
        return everywhere(Result("unsupported", run.conversion["error"], unsupported="form"))
    except Exception as exc:
        run.conversion = {"outcome": "error", "error": error_text(exc)}
        return everywhere(Result("error", f"conversion failed: {error_text(exc)}"))
    finally:
        run.prepare_seconds += time.perf_counter() - start
    for target in applicable:
        run.results[target.id] = run_on(target, model, loaded, case, out_names)
    return run


def run_on(target: Target, model, loaded, case: Case, out_names: list[str]) -> Result:
    start = time.perf_counter()
    result = Result("pass")
    try:
        with quiet():
            session = target.session(model)
            for feeds, expected in loaded.data_sets:
                got = session.run(None, feeds)
                if len(got) != len(expected):
                    result.outcome = "fail"
                    result.error = f"{len(got)} outputs, expected {len(expected)}"
                    break
                rows = [compare_output(out_names[i] if i < len(out_names) else f"#{i}", g, w, case.rtol, case.atol)
                        for i, (g, w) in enumerate(zip(got, expected))]
                result.outputs.extend(rows)  # every data set's rows count for the worst errors
                if not all(r["ok"] for r in rows):
                    result.outputs = rows  # the failing data set's details
                    result.outcome = "fail"
                    result.error = "; ".join(f"{r['name']}: {r['message']}" for r in rows if not r["ok"])
                    break
            if target.kind == "wgpu":
                result.fallbacks = [{"op": f["op"], "reasons": f["reasons"]} for f in session.report()["fallbacks"]]
                if result.fallbacks and result.outcome == "pass":
                    result.outcome = "fallback"
    except UnsupportedOpError as exc:
        result = Result("unsupported", error_text(exc), unsupported="backend")
    except Exception as exc:  # a crashing case is this result's error, not the run's
        result = Result("error", error_text(exc))
    result.seconds = time.perf_counter() - start
    return result


def run_cases(cases: list[Case], targets: list[Target], *, show_progress: bool = True,
              constant_shapes: bool = False) -> list[CaseRun]:
    claimed = claimed_ops()
    return [run_case(case, targets, claimed, constant_shapes)
            for case in progress(cases, f"conform ({len(targets)} target{'s' * (len(targets) > 1)})",
                                 enabled=show_progress)]

