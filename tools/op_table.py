"""docs/ops.md: every ONNX op wgnn converts, the IR op(s) it becomes, whether the numpy backend and
the GPU have a kernel for them, and how the op's ONNX backend node tests fare on each target.

    python -m wgnn.tools.op_table --out docs/ops.md                  # runs the node suite in-process
    wgnn conform --sources node --out run/
    python -m wgnn.tools.op_table --conform-json run/conform.json --out docs/ops.md

The IR mapping is read from the converters' source (tools/convert/onnx/*.py), not by running them:
each `ctx.emit("Op", ..., {"kind": ...})` a converter (or a helper it calls with ctx) can reach is
listed, with the kind where it is a literal, a closure value or a table lookup by the ONNX op type.
A converter that hands ctx to code this cannot follow (a class, a method) is "composite".
"""
from __future__ import annotations

import argparse
import ast
import builtins
import inspect
import json
import shlex
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..engine.errors import InputError, WgnnError

OUTCOMES = ("pass", "fallback", "fail", "error", "unsupported")
SECTION = "## Converted ONNX ops"
REGENERATE = "python -m wgnn.tools.op_table --out docs/ops.md"
_MISSING = object()


# ------------------------------------------------------------------------ static IR mapping
@dataclass
class Mapping:
    """What one ONNX op's converter emits: IR labels ("Unary.relu", "Conv"), in source order.
    composite: it also builds ops this cannot list (labels are then those it can see).
    initializer: it emits nothing and writes an initializer."""

    labels: list[str]
    module: str
    composite: bool = False
    initializer: bool = False

    @property
    def ir_ops(self) -> list[str]:
        return list(dict.fromkeys(label.split(".")[0] for label in self.labels))


@dataclass
class _Scope:
    """One function under analysis: its AST, the ONNX op being converted, the caller's argument
    expressions bound to its parameters, and its local assignments (None: not statically known)."""

    fn: Callable
    tree: ast.FunctionDef
    onnx_op: str
    bound: dict[str, tuple[ast.expr, _Scope]] = field(default_factory=dict)
    assigned: dict[str, list[ast.expr | None]] = field(default_factory=dict)
    items: dict[str, dict[str, list[ast.expr]]] = field(default_factory=dict)  # name["key"] = value

    def lookup(self, name: str):
        """The object a free name refers to (closure, module, builtins), else _MISSING (also for
        a parameter the call does not bind, which may shadow a module name)."""
        args = self.tree.args
        if name in {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}:
            return _MISSING
        closure = inspect.getclosurevars(self.fn)
        for table in (closure.nonlocals, self.fn.__globals__, vars(builtins)):
            if name in table:
                return table[name]
        return _MISSING


def _function_tree(fn: Callable) -> ast.FunctionDef | None:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    tree = ast.parse(source)
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)


def _scope(fn: Callable, onnx_op: str, bound: dict | None = None) -> _Scope | None:
    tree = _function_tree(fn)
    if tree is None:
        return None
    scope = _Scope(fn, tree, onnx_op, bound or {})
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    scope.assigned.setdefault(target.id, []).append(node.value)
                elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                    scope.items.setdefault(target.value.id, {}).setdefault(target.slice.value, []).append(node.value)
                else:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            scope.assigned.setdefault(name.id, []).append(None)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.comprehension, ast.withitem)):
            target = node.optional_vars if isinstance(node, ast.withitem) else node.target
            for name in ast.walk(target) if target is not None else []:
                if isinstance(name, ast.Name):
                    scope.assigned.setdefault(name.id, []).append(None)
    return scope


def _strings(expr: ast.expr | None, scope: _Scope) -> set[str] | None:
    """Every string value expr can take, or None when that is not statically known."""
    if isinstance(expr, ast.Constant):
        return {expr.value} if isinstance(expr.value, str) else None
    if isinstance(expr, ast.IfExp):
        truth = _truth(expr.test, scope)
        if truth is not None:
            return _strings(expr.body if truth else expr.orelse, scope)
        a, b = _strings(expr.body, scope), _strings(expr.orelse, scope)
        return None if a is None or b is None else a | b
    if isinstance(expr, ast.Attribute) and expr.attr == "op_type" and isinstance(expr.value, ast.Name) \
            and expr.value.id == "node":
        return {scope.onnx_op}  # converters name the ONNX node they convert `node`
    if isinstance(expr, ast.Name):
        if expr.id in scope.assigned:
            found: set[str] = set()
            for value in scope.assigned[expr.id]:
                part = _strings(value, scope) if value is not None else None
                if part is None:
                    return None
                found |= part
            return found
        if expr.id in scope.bound:
            value, caller = scope.bound[expr.id]
            return _strings(value, caller)
        obj = scope.lookup(expr.id)
        return {obj} if isinstance(obj, str) else None
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
        table = scope.lookup(expr.value.id)
        keys = _strings(expr.slice, scope)
        if isinstance(table, dict) and keys is not None and all(isinstance(table.get(k), str) for k in keys):
            return {table[k] for k in keys}
    return None


def _truth(test: ast.expr, scope: _Scope) -> bool | None:
    """The value of `a == b` / `a != b` when both sides are single known strings."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    left, right = _strings(test.left, scope), _strings(test.comparators[0], scope)
    if left is None or right is None or len(left) != 1 or len(right) != 1:
        return None
    return (left == right) == isinstance(test.ops[0], ast.Eq)


def _package_function(obj) -> bool:
    from .convert.onnx import table  # its package by import: __name__ is "__main__" under python -m

    package = table.__name__.rpartition(".")[0]
    return inspect.isfunction(obj) and obj.__module__.startswith(package + ".")


def _callee(call: ast.Call, scope: _Scope) -> tuple[Callable, _Scope] | None:
    """The converter-package function a call by name reaches, with its parameters bound."""
    if not isinstance(call.func, ast.Name) or call.func.id in scope.assigned:
        return None
    fn = scope.lookup(call.func.id)
    if not _package_function(fn):
        return None
    tree = _function_tree(fn)
    if tree is None:
        return None
    params = [a.arg for a in tree.args.posonlyargs + tree.args.args]
    bound = {name: (arg, scope) for name, arg in zip(params, call.args) if not isinstance(arg, ast.Starred)}
    bound.update({k.arg: (k.value, scope) for k in call.keywords if k.arg})
    sub = _scope(fn, scope.onnx_op, bound)
    return (fn, sub) if sub is not None else None


def _kinds(expr: ast.expr | None, scope: _Scope, depth: int = 0) -> set[str] | None:
    """The values of the "kind" attribute of an emitted node's attrs expression, if known."""
    if expr is None or depth > 4:
        return None
    if isinstance(expr, ast.Dict):
        for key, value in zip(expr.keys, expr.values):
            if isinstance(key, ast.Constant) and key.value == "kind":
                return _strings(value, scope)
        return None
    if isinstance(expr, ast.Name):
        if expr.id in scope.bound:
            value, caller = scope.bound[expr.id]
            return _kinds(value, caller, depth + 1)
        found: set[str] = set()
        sources = [_kinds(v, scope, depth + 1) if v is not None else None for v in scope.assigned.get(expr.id, [])]
        sources += [_strings(v, scope) for v in scope.items.get(expr.id, {}).get("kind", [])]
        for part in sources:
            if part is None:
                continue
            found |= part
        return found or None
    if isinstance(expr, ast.Call):
        target = _callee(expr, scope)
        if target is None:
            return None
        _, sub = target
        found = set()
        for node in ast.walk(sub.tree):
            if isinstance(node, ast.Return):
                found |= _kinds(node.value, sub, depth + 1) or set()
        return found or None
    return None


def _passes_ctx(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(a, ast.Name) and a.id == "ctx" for a in args)


def _emits(scope: _Scope, seen: frozenset) -> tuple[list[str], bool]:
    """IR labels the function can emit, in source order, and whether that is all of them (False
    when it hands ctx to code this cannot follow, or emits an op type it cannot resolve)."""
    labels: list[str] = []
    complete = True
    calls = sorted((n for n in ast.walk(scope.tree) if isinstance(n, ast.Call)),
                   key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "emit" and isinstance(func.value, ast.Name) \
                and func.value.id == "ctx":
            ops = _strings(call.args[0], scope) if call.args else None
            if ops is None:
                complete = False
                continue
            attrs = call.args[3] if len(call.args) > 3 else next(
                (k.value for k in call.keywords if k.arg == "attrs"), None)
            kinds = _kinds(attrs, scope)
            for op in sorted(ops):
                labels += [f"{op}.{k}" for k in sorted(kinds)] if kinds else [op]
            continue
        target = _callee(call, scope)
        if target is not None:
            fn, sub = target
            if fn in seen:
                continue
            inner, inner_complete = _emits(sub, seen | {fn})
            labels += inner
            complete = complete and inner_complete
        elif _passes_ctx(call):
            complete = False  # a class or method given ctx: what it emits depends on the node
    return list(dict.fromkeys(labels)), complete


def _writes_initializer(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "initializers" for n in ast.walk(tree))


def converter_mapping(onnx_op: str, fn: Callable) -> Mapping:
    module = Path(inspect.getsourcefile(fn) or "?").name
    scope = _scope(fn, onnx_op)
    if scope is None:
        return Mapping([], module, composite=True)
    try:
        labels, complete = _emits(scope, frozenset({fn}))
    except RecursionError:  # names assigned from each other in a cycle: not statically known
        return Mapping([], module, composite=True)
    return Mapping(labels, module, composite=not complete,
                   initializer=complete and not labels and _writes_initializer(scope.tree))


def ir_mappings() -> dict[str, Mapping]:
    """Every converted ONNX op (sorted) -> its Mapping."""
    from .convert.onnx import _load_table
    from .convert.onnx.table import CONVERTERS

    _load_table()
    return {op: converter_mapping(op, CONVERTERS[op]) for op in sorted(CONVERTERS, key=str.lower)}


# -------------------------------------------------------------------------------- kernels
def kernel_support() -> dict[str, tuple[str, str, str]]:
    """IR op -> (family, numpy, GPU) where numpy/GPU say how the op runs there: "yes" (a kernel),
    "raster" (lowered to Raster regions), "at resize" (shape only), "CPU sync point", "no"."""
    from ..backends import load_backends
    from ..backends.numpy.kernel import KERNELS
    from ..backends.wgpu.backend import EXECUTIONS
    from ..engine.ops.base import OPS, OpDef

    load_backends()
    table = {}
    for op_type, op in sorted(OPS.items()):
        lowered = op.is_geometry and type(op).geometry is not OpDef.geometry
        numpy = "yes" if op_type in KERNELS else "raster" if lowered else "no"
        if op_type in EXECUTIONS:
            gpu = "yes"
        elif op.shape_only:
            gpu = "at resize"
        elif op.data_dependent:
            gpu = "CPU sync point"
        elif lowered and "Raster" in EXECUTIONS:
            gpu = "raster"
        else:
            gpu = "no"
        table[op_type] = (op.family, numpy, gpu)
    return table


# ---------------------------------------------------------------------------- conformance
def load_conform(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise InputError(f"--conform-json {path}: file not found")
    try:
        report = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"--conform-json {path}: not a conform.json report: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list) \
            or not isinstance(report.get("targets"), list):
        raise InputError(f"--conform-json {path}: not a conform.json report (no cases or targets)")
    if not any(c.get("source") == "node" for c in report["cases"]):
        raise InputError(f"--conform-json {path}: holds no ONNX node test case; make one with "
                         "`wgnn conform --sources node --out DIR`")
    return report


def run_conform(adapters: str | None, show_progress: bool = True) -> dict:
    """The ONNX backend node suite on numpy and the GPU adapters, through tools/conform's API."""
    from .conform.report import build_report, environment
    from .conform.runner import resolve_targets, run_cases
    from .conform.sources import collect

    targets, unavailable = resolve_targets(adapters)
    start = time.perf_counter()
    runs = run_cases(collect(["node"]), targets, show_progress=show_progress)
    command = shlex.join(["wgnn", "conform", "--sources", "node", *(["--adapters", adapters] if adapters else [])])
    return build_report(runs, targets, env=environment(targets, unavailable), command=command, sources=["node"],
                        seconds=time.perf_counter() - start)


def _counts() -> dict[str, int]:
    return dict.fromkeys(OUTCOMES, 0)


def tally(report: dict, converted: set[str]) -> dict:
    """Counts from the node cases: per target over all of them and over the one-node cases of
    converted ops, per (op, target), node cases per op, and unconverted op types by case count."""
    from .convert.onnx.functions import schema_function

    node_cases = [c for c in report["cases"] if c.get("source") == "node"]
    targets = report["targets"]
    totals = {t: _counts() for t in targets}
    converted_totals = {t: _counts() for t in targets}
    per_op: dict[str, dict[str, dict[str, int]]] = {}
    cases_per_op: Counter = Counter()
    unconverted: Counter = Counter()
    expanded = {o for c in node_cases for o in c.get("ops", []) if o not in converted and schema_function(o)}
    converted = converted | expanded
    for case in node_cases:
        op = case.get("op")
        if op in converted:
            cases_per_op[op] += 1
        unconverted.update(o for o in case.get("ops", []) if o not in converted)
        for target, result in case.get("results", {}).items():
            outcome = result.get("outcome")
            if target not in totals or outcome not in OUTCOMES:
                continue
            totals[target][outcome] += 1
            if op in converted:
                converted_totals[target][outcome] += 1
                per_op.setdefault(op, {}).setdefault(target, _counts())[outcome] += 1
    return {"cases": len(node_cases), "totals": totals, "converted_totals": converted_totals, "per_op": per_op,
            "cases_per_op": cases_per_op, "expanded": sorted(expanded),
            "unconverted": dict(sorted(unconverted.items(), key=lambda i: i[0].lower()))}


# -------------------------------------------------------------------------------- rendering
def target_label(target: dict) -> str:
    """A short column name: numpy, or wgpu:<index> (<backend>)."""
    if target.get("kind") == "wgpu":
        return f"wgpu:{target.get('index')} ({target.get('backend')})"
    return target.get("id", "?")


def _targets(report: dict) -> list[dict]:
    described = {t.get("id"): t for t in report.get("environment", {}).get("targets", [])}
    return [described.get(t, {"id": t, "kind": "numpy" if t == "numpy" else "wgpu"}) for t in report["targets"]]


def _cell(counts: dict[str, int] | None) -> str:
    return "/".join(str(counts[o]) for o in OUTCOMES) if counts else "—"


def _support(ops: list[str], column: int, kernels: dict) -> str:
    values = [kernels[op][column] if op in kernels else "?" for op in ops]
    if not values:
        return "—"
    if len(set(values)) == 1:
        return values[0]
    return ", ".join(f"{op}: {v}" for op, v in zip(ops, values))


def _ir_cell(mapping: Mapping) -> str:
    if mapping.composite:
        seen = "".join(f"{label}, " for label in mapping.labels)
        return f"composite ({mapping.module}): {seen}…"
    if not mapping.labels:
        return "none (an initializer)" if mapping.initializer else "none"
    return ", ".join(mapping.labels)


def render(report: dict, mappings: dict[str, Mapping], kernels: dict, *, command: str, conform_from: str,
           date: str) -> str:
    targets = _targets(report)
    ids = [t.get("id") for t in targets]
    labels = [target_label(t) for t in targets]
    counts = tally(report, set(mappings))
    env = report.get("environment", {})
    ir_ops = sorted({op for m in mappings.values() for op in m.ir_ops})
    lines = [
        "# Supported ONNX ops",
        "",
        f"Generated on {date} by `{command}`. Do not edit by hand: regenerate it after adding or changing a "
        f"converter (`tests/tools/test_op_table.py` fails when a converted op is missing here).",
        "",
        f"wgnn converts **{len(mappings)} ONNX op types** (default domain) into {len(ir_ops)} IR op types. "
        f"The counts come from a run of the ONNX backend node tests (onnx {env.get('onnx', '?')}: "
        f"{counts['cases']} cases) on {report.get('created', '?')} {conform_from}, with wgnn {env.get('wgnn', '?')}, "
        f"wgpu {env.get('wgpu', '?')}, numpy {env.get('numpy', '?')} on {env.get('platform', '?')}.",
        "",
        "Targets:",
        "",
    ]
    for target, label in zip(targets, labels):
        if target.get("kind") == "wgpu":
            lines.append(f"- `{label}`: {target.get('name')}, {target.get('backend')}, adapter type "
                         f"{target.get('adapter_type')}, driver {target.get('driver') or '?'} (with numpy as the "
                         "fallback)")
        else:
            lines.append(f"- `{label}`: the numpy backend")
    if env.get("gpu_unavailable"):
        lines.append(f"- no GPU target: {env['gpu_unavailable']}")
    lines += ["", "## Summary", "",
              "| target | cases | " + " | ".join(OUTCOMES) + " | total |",
              "|---|---|" + "---|" * (len(OUTCOMES) + 1)]
    for target, label in zip(ids, labels):
        for which, key in (("all node tests", "totals"), ("one-node tests of converted ops", "converted_totals")):
            row = counts[key][target]
            lines.append(f"| {label} | {which} | " + " | ".join(str(row[o]) for o in OUTCOMES)
                         + f" | {sum(row.values())} |")
    lines += [
        "",
        "- **pass**: every output matches the expected one (the ONNX suite's tolerances); on a GPU target "
        "every step ran on the GPU.",
        "- **fallback**: every output matches, but some step ran on the CPU (numpy): a GPU target runs with "
        "providers `(\"wgpu\", \"numpy\")`, and a step the GPU cannot run (an element type it does not store, a "
        "form its kernel lacks, a data-dependent op at its sync point) runs on numpy. Right values, not all on "
        "the GPU.",
        "- **fail**: an output differs. **error**: an exception while converting or running.",
        "- **unsupported**: the case uses an op type wgnn does not convert, or a form the converter refuses "
        "on purpose (training mode, bfloat16/float8/int4/string tensors, sequences, ...). Not a failure.",
        "- **one-node tests of converted ops** include the ops wgnn expands into their ONNX function bodies "
        "(listed after the converted ones).",
        "",
        "See [conformance.md](conformance.md) for the comparison rule and `wgnn conform`.",
        "",
        SECTION,
        "",
        "- **IR op(s)**: what the converter can emit, as `Op.kind` for op families with kinds (read from the "
        "converter's source; a converter that emits different ops for different opsets or inputs lists them "
        "all). *composite*: the converter builds a subgraph that depends on the node; listed are the ops it "
        "emits itself, `…` the rest (see its module in `tools/convert/onnx/`).",
        "- **numpy** / **GPU**: *yes* a kernel; *raster* data movement lowered to Raster regions (run by the "
        "Raster kernel); *at resize* computed from shapes when the session is planned, no kernel runs; "
        "*CPU sync point* output shapes depend on data, so the op runs on the CPU by design; *no* none (the "
        "step falls back to numpy).",
        "- **node tests**: the one-node node tests of the op (`*_expanded` tests, the op's ONNX function body, "
        "count under the ops of that body); per target `" + "/".join(OUTCOMES) + "`.",
        "",
        "| ONNX op | IR op(s) | numpy | GPU | node tests | " + " | ".join(labels) + " |",
        "|---|---|---|---|---|" + "---|" * len(labels),
    ]
    for op, mapping in mappings.items():
        ops = [] if mapping.composite else mapping.ir_ops
        per_target = counts["per_op"].get(op, {})
        cells = [_cell(per_target.get(t)) for t in ids]
        lines.append(f"| {op} | {_ir_cell(mapping)} | {_support(ops, 1, kernels)} | {_support(ops, 2, kernels)} | "
                     f"{counts['cases_per_op'].get(op, 0)} | " + " | ".join(cells) + " |")
    untested = [op for op in mappings if not counts["cases_per_op"].get(op)]
    if untested:
        lines += ["", f"Converted ops without a one-node node test ({len(untested)}): {', '.join(untested)}. "
                  "wgnn's own op cases (`wgnn conform --sources own`) cover every converted op."]
    lines += ["", "## ONNX ops expanded into their ONNX function bodies", "",
              f"{len(counts['expanded'])} op types that ONNX defines as functions of other ops, which wgnn has no "
              "converter of its own for: the converter replaces each node by the ops of its body "
              "(`tools/convert/onnx/functions.py`), and those run as converted above. A case stays unsupported where "
              "the body needs an op wgnn lacks (Bernoulli's draws with RandomUniformLike) or sequences "
              "(SequenceMap). Model-local functions are expanded the same way.", "",
              "| ONNX op | node tests | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for op in counts["expanded"]:
        per_target = counts["per_op"].get(op, {})
        lines.append(f"| {op} | {counts['cases_per_op'].get(op, 0)} | "
                     + " | ".join(_cell(per_target.get(t)) for t in ids) + " |")
    lines += ["", "## IR ops", "",
              "| IR op | family | numpy | GPU | from ONNX ops |", "|---|---|---|---|---|"]
    sources: dict[str, list[str]] = {}
    for op, mapping in mappings.items():
        for ir in mapping.ir_ops:
            sources.setdefault(ir, []).append(f"{op} (composite)" if mapping.composite else op)
    for ir, (family, numpy, gpu) in kernels.items():
        origin = ", ".join(sources.get(ir, [])) or "none (made by graph passes or internal)"
        lines.append(f"| {ir} | {family} | {numpy} | {gpu} | {origin} |")
    unconverted = counts["unconverted"]
    lines += ["", "## ONNX ops in the node tests that wgnn does not convert", "",
              f"{len(unconverted)} op types (other domains as `<domain>.<Op>`); the count is the number of node "
              "tests whose graph uses the op.", "", "| op | node tests |", "|---|---|"]
    lines += [f"| {op} | {n} |" for op, n in unconverted.items()]
    return "\n".join(lines) + "\n"


def listed_ops(text: str) -> list[str]:
    """The ONNX ops in a generated page's converted-ops table (first column)."""
    if SECTION not in text:
        return []
    rows = text.split(SECTION, 1)[1].split("\n## ", 1)[0].splitlines()
    table = [r for r in rows if r.startswith("| ")]
    return [r.split("|")[1].strip() for r in table[1:]]  # the first row is the header


# ------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.op_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", metavar="FILE.md", help="write the page here (default: print it)")
    parser.add_argument("--conform-json", metavar="FILE",
                        help="a conform.json from `wgnn conform --sources node --out DIR` (default: run the node "
                             "suite now)")
    parser.add_argument("--adapters", metavar="LIST",
                        help="targets when running the suite, as `wgnn conform --adapters` (default numpy,all)")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "wgnn.tools.op_table", *(sys.argv[1:] if argv is None else argv)])
    try:
        if args.conform_json:
            if args.adapters:
                raise InputError("--adapters applies to a run of the suite, not to --conform-json")
            report = load_conform(args.conform_json)
            conform_from = f"by `{report.get('command', 'wgnn conform')}`"
        else:
            report = run_conform(args.adapters)
            conform_from = f"in-process (the same run as `{report['command']}`)"
        date = datetime.now(timezone.utc).date().isoformat()
        page = render(report, ir_mappings(), kernel_support(), command=command, conform_from=conform_from, date=date)
    except WgnnError as exc:
        print(f"op_table: error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
        print(f"wrote {args.out}: {len(listed_ops(page))} ONNX ops", file=sys.stderr)
    else:
        print(page, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
