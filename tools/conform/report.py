"""The conformance report as JSON-ready data: environment, per-target summary, the op x target
matrix, unsupported ops, failures of claimed ops, GPU results that differ from numpy, every case;
and the comparison with a baseline report (regressions)."""
from __future__ import annotations

import json
import platform
import sys
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from ...engine.errors import InputError
from .compare import FP16_ATOL, FP16_RTOL, magnitude
from .runner import OUTCOMES, CaseRun, Target
from .sources import MODEL_ATOL, MODEL_RTOL, SUITE_ATOL, SUITE_RTOL

SCHEMA = 1
PASSING = ("pass", "fallback")  # fallback: right values, but some step ran on the CPU


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # not installed, or its native library fails to load
        return None


def environment(targets: list[Target], gpu_unavailable: str | None) -> dict:
    from ... import __version__, adapters

    try:
        found = adapters()
    except Exception as exc:  # the report is still worth writing without the adapter list
        found, gpu_unavailable = [], gpu_unavailable or str(exc)
    keys = ("index", "name", "backend", "adapter_type", "driver", "vendor", "features")
    return {
        "wgnn": __version__, "wgpu": _version("wgpu"), "onnx": _version("onnx"),
        "onnxruntime": _version("onnxruntime"), "numpy": _version("numpy"),
        "python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
        "adapters": [{k: a.get(k) for k in keys} for a in found],
        "gpu_unavailable": gpu_unavailable,
        "targets": [t.as_dict() for t in targets],
    }


def _counts() -> dict:
    return dict.fromkeys(OUTCOMES, 0)


def build_report(runs: list[CaseRun], targets: list[Target], *, env: dict, command: str, sources: list[str],
                 seconds: float, constant_shape_inputs: bool = False) -> dict:
    ids = [t.id for t in targets]
    summary = {t: {"total": 0, **_counts(), "seconds": 0.0, "by_source": {}} for t in ids}
    matrix: dict[str, dict[str, dict]] = defaultdict(dict)
    unsupported_ops: Counter = Counter()
    unsupported_forms, claimed_failures = [], {t: [] for t in ids}
    cases = []
    for run in runs:
        case = run.case
        if run.conversion.get("kind") == "op":
            unsupported_ops.update(run.conversion.get("ops", []))
        elif run.conversion.get("kind") == "form":
            unsupported_forms.append({"case": case.id, "op": case.op, "reason": run.conversion["error"]})
        for target, result in run.results.items():
            row = summary[target]
            row["total"] += 1
            row[result.outcome] += 1
            row["seconds"] += result.seconds
            by_source = row["by_source"].setdefault(case.source, {"total": 0, **_counts()})
            by_source["total"] += 1
            by_source[result.outcome] += 1
            cell = matrix[case.op].setdefault(target, {**_counts(), "worst_abs": None, "worst_rel": None})
            cell[result.outcome] += 1
            for key, worst in (("max_abs", "worst_abs"), ("max_rel", "worst_rel")):
                value = result.worst(key)
                if value is not None and magnitude(value) > magnitude(cell[worst]):
                    cell[worst] = value
            if run.claimed and result.outcome not in PASSING and result.unsupported != "op":
                claimed_failures[target].append({"case": case.id, "op": case.op, "outcome": result.outcome,
                                                 "error": result.error})
        cases.append({
            "id": case.id, "source": case.source, "name": case.name, "op": case.op, "ops": case.ops,
            "opset": case.opset, "claimed": run.claimed, "tolerance": {"rtol": case.rtol, "atol": case.atol},
            "inputs": run.inputs, "expected": run.expected, "conversion": run.conversion,
            **({"constant_inputs": run.frozen} if run.frozen else {}),
            "results": {t: r.as_dict() for t, r in run.results.items()},
        })
    for row in summary.values():
        row["seconds"] = round(row["seconds"], 3)
    differs = {}
    if "numpy" in ids:
        for target in ids:
            if target == "numpy":
                continue
            differs[target] = [
                {"case": c["id"], "op": c["op"], "outcome": c["results"][target]["outcome"],
                 "error": c["results"][target].get("error")}
                for c in cases if c["results"].get("numpy", {}).get("outcome") == "pass"
                and target in c["results"] and c["results"][target]["outcome"] not in PASSING]
    return {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "sources": sources,
        "constant_shape_inputs": constant_shape_inputs,
        "seconds": round(seconds, 2),
        "prepare_seconds": round(sum(r.prepare_seconds for r in runs), 2),
        "tolerances": {"suite": {"rtol": SUITE_RTOL, "atol": SUITE_ATOL},
                       "models": {"rtol": MODEL_RTOL, "atol": MODEL_ATOL},
                       "float16": {"rtol": FP16_RTOL, "atol": FP16_ATOL}},
        "environment": env,
        "targets": ids,
        "summary": summary,
        "matrix": {op: matrix[op] for op in sorted(matrix, key=str.lower)},
        "unsupported_ops": dict(sorted(unsupported_ops.items())),
        "unsupported_forms": unsupported_forms,
        "claimed_failures": claimed_failures,
        "differs_from_numpy": differs,
        "cases": cases,
    }


# ------------------------------------------------------------------------------------ baseline
def load_baseline(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise InputError(f"--baseline {path}: file not found")
    try:
        data = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"--baseline {path}: not a conform.json report: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise InputError(f"--baseline {path}: not a conform.json report (no case list)")
    return data


def regressions(report: dict, baseline: dict) -> list[dict]:
    """Results that passed in the baseline and do not now: a pass that is now anything else
    (a fallback too: the GPU kernel stopped running), or a fallback that is now wrong or broken.
    Cases or targets missing from this run (filtered out) are not regressions."""
    before = {(c["id"], t): r.get("outcome") for c in baseline["cases"] for t, r in c.get("results", {}).items()}
    found = []
    for case in report["cases"]:
        for target, result in case["results"].items():
            old = before.get((case["id"], target))
            new = result["outcome"]
            if (old == "pass" and new != "pass") or (old == "fallback" and new not in PASSING):
                found.append({"case": case["id"], "op": case["op"], "target": target, "baseline": old,
                              "now": new, "error": result.get("error")})
    return found


def write_report(report: dict, out_dir: str) -> tuple[Path, Path]:
    from .html_report import render_html

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    json_path, html_path = folder / "conform.json", folder / "conform.html"
    json_path.write_text(json.dumps(report, indent=1))
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
