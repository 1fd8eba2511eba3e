"""Text reports of shader-harness runs, and the change between two runs (for --watch)."""
from __future__ import annotations

from .cli import _number, _shape_text, summarize, table


def _param_text(slots: list | None) -> str:
    if slots is None:
        return ""
    given = [f"p{i}={v:g}" if isinstance(v, float) else f"p{i}={v}" for i, v in enumerate(slots) if v != 0]
    return " ".join(given) or "all zero"


def format_result(result) -> str:
    """The kernel, adapter, dispatch, bindings, outputs, comparison and timing of one run."""
    adapter = result.adapter
    invocations = 1
    for d in (*result.dispatch, *result.workgroup_size):
        invocations *= d
    lines = [f"kernel {result.kernel} on adapter {adapter['index']}: {adapter['name']} ({adapter['backend']})",
             f"dispatch {tuple(result.dispatch)} workgroups of {tuple(result.workgroup_size)} = {invocations} "
             "invocations", ""]
    rows = []
    outputs = set(result.outputs)
    for b in result.bindings:
        if b.kind == "uniform":
            rows.append([b.index, b.name, b.label, "params", "", "", _param_text(result.params)])
            continue
        value = result.outputs.get(b.tensor, result.inputs.get(b.tensor))
        role = "output" if b.tensor in outputs else "input"
        source = "" if role == "output" else result.sources.get(b.tensor, "")
        rows.append([b.index, b.tensor, b.label, role, _shape_text(value.shape), value.dtype.name, source])
    lines.append(table(["binding", "tensor", "declared", "role", "shape", "dtype", "data"], rows))
    lines.append("")
    stats = [summarize(n, v) for n, v in result.outputs.items()]
    lines.append(table(["output", "shape", "dtype", "min", "max", "mean"],
                       [[s["name"], _shape_text(s["shape"]), s["dtype"], _number(s["min"]), _number(s["max"]),
                         _number(s["mean"])] for s in stats]))
    if result.reference is not None:
        rtol, atol = result.tolerance
        lines += ["", f"reference {result.reference} (rtol {rtol:g}, atol {atol:g}):"]
        rows = []
        for c in result.errors:
            if c.error:
                rows.append([c.name, "-", "-", "-", "-", f"FAIL {c.error}"])
                continue
            first = "-" if c.first_mismatch is None else \
                f"{c.name}[{', '.join(map(str, c.first_mismatch))}] = {c.got:.7g}, expected {c.expected:.7g}"
            rows.append([c.name, _number(c.max_abs_error), _number(c.max_rel_error), f"{c.mismatches}/{c.size}",
                         first, "ok" if c.ok else "FAIL"])
        lines.append(table(["output", "max abs error", "max rel error", "mismatches", "first mismatch", "result"],
                           rows))
        unchecked = sorted(set(result.outputs) - {c.name for c in result.errors})
        if unchecked:
            lines.append(f"(the reference returned nothing for {', '.join(unchecked)})")
    if result.timing is not None:
        t = result.timing
        how = "GPU timestamps" if t.method == "timestamp-query" else "wall clock, submit + wait"
        lines += ["", f"time per dispatch: median {t.median_us:.1f} us, p90 {t.p90_us:.1f} us, "
                      f"min {t.min_us:.1f} us ({len(t.samples_us)} dispatches, {how})"]
    return "\n".join(lines)


def _change(before: float | None, after: float | None, unit: str = "") -> str:
    if before is None or after is None:
        return f"{_number(before)} -> {_number(after)}{unit}"
    if before == after:
        return f"{after:.4g}{unit} (unchanged)"
    relative = f", {100 * (after - before) / before:+.1f}%" if before else ""
    return f"{before:.4g}{unit} -> {after:.4g}{unit} ({after - before:+.3g}{unit}{relative})"


def format_change(previous, current) -> str:
    """One line per output's max abs error and one for the median time, against the previous run."""
    lines = []
    before = {c.name: c for c in previous.errors}
    for c in current.errors:
        if c.name in before:
            lines.append(f"  {c.name} max abs error: {_change(before[c.name].max_abs_error, c.max_abs_error)}"
                         f"; mismatches {before[c.name].mismatches} -> {c.mismatches}")
    if previous.timing is not None and current.timing is not None:
        lines.append(f"  median time: {_change(previous.timing.median_us, current.timing.median_us, ' us')}")
    return "\n".join(["change against the previous run:", *lines]) if lines else ""


def change_dict(previous, current) -> dict:
    """The same as format_change, for --json."""
    before = {c.name: c for c in previous.errors}
    change: dict = {"max_abs_error": {c.name: [before[c.name].max_abs_error, c.max_abs_error]
                                      for c in current.errors if c.name in before}}
    if previous.timing is not None and current.timing is not None:
        change["median_us"] = [previous.timing.median_us, current.timing.median_us]
    return change
