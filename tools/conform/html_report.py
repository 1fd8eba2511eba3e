"""The conformance report as one self-contained HTML file: inline CSS, no scripts, nothing fetched
(collapsible sections are plain <details>)."""
from __future__ import annotations

import re
from collections import defaultdict
from html import escape

from .runner import OUTCOMES

LABELS = {"pass": "pass", "fallback": "fallback", "fail": "fail", "error": "error", "unsupported": "unsupported"}

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1d2330; }
h1 { margin: 0 0 4px; font-size: 24px; } h2 { margin: 28px 0 8px; font-size: 18px; border-bottom: 1px solid #dde;
  padding-bottom: 4px; }
.meta { color: #5a6275; margin: 2px 0; } code { font: 12px ui-monospace, Menlo, Consolas, monospace; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid #d7dbe5; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f0f2f7; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.b { display: inline-block; min-width: 18px; padding: 0 5px; margin: 1px 2px 1px 0; border-radius: 8px;
  font-size: 12px; font-weight: 600; color: #fff; text-align: center; }
.b.pass { background: #2e7d32; } .b.fallback { background: #e08a00; } .b.fail { background: #c62828; }
.b.error { background: #7b1fa2; } .b.unsupported { background: #9aa0ab; }
td.cell { min-width: 150px; } td.cell.good { background: #e8f5e9; } td.cell.warn { background: #fff4e0; }
td.cell.bad { background: #fdecea; } td.cell.na { background: #f3f4f6; color: #7a8090; }
.err { font-size: 12px; color: #8a1c1c; margin-top: 2px; max-width: 560px; overflow-wrap: anywhere; }
.small { font-size: 12px; color: #5a6275; } .chip { display: inline-block; background: #eef0f5;
  border-radius: 10px; padding: 1px 8px; margin: 2px; font-size: 12px; }
details { margin: 3px 0; } summary { cursor: pointer; padding: 2px 0; }
summary .opname { font-weight: 600; } table.matrix td.op a { color: #1d2330; text-decoration: none; }
table.matrix th.target { max-width: 220px; } table.cases td { font-size: 13px; }
.legend span { margin-right: 10px; }
"""


def _num(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return "0" if x == 0 else f"{x:.3g}"


def _anchor(op: str) -> str:
    return "op-" + re.sub(r"[^A-Za-z0-9]+", "-", op).strip("-")


def _badges(counts: dict) -> str:
    return "".join(f'<span class="b {o}" title="{LABELS[o]}">{counts[o]}</span>' for o in OUTCOMES if counts.get(o))


def _state(counts: dict) -> str:
    if counts.get("fail") or counts.get("error"):
        return "bad"
    if counts.get("fallback"):
        return "warn"
    return "good" if counts.get("pass") else "na"


def _shape(item: dict) -> str:
    if "shape" in item:
        return f"{item.get('dtype')}[{', '.join(str(d) for d in item['shape'])}]"
    return item.get("type", "?")


def _environment(report: dict) -> str:
    env = report["environment"]
    versions = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(env.get(k)))}</td></tr>"
                       for k in ("wgnn", "wgpu", "onnx", "onnxruntime", "numpy", "python", "platform"))
    rows = "".join(
        f"<tr><td class=num>{a['index']}</td><td>{escape(str(a['name']))}</td><td>{escape(str(a['backend']))}</td>"
        f"<td>{escape(str(a['adapter_type']))}</td><td>{escape(str(a['driver']))}</td>"
        f"<td>{escape(', '.join(a.get('features') or []) or '-')}</td></tr>" for a in env["adapters"])
    adapters = (f"<table><tr><th>#</th><th>adapter</th><th>backend</th><th>type</th><th>driver</th><th>features</th>"
                f"</tr>{rows}</table>" if rows else
                f"<p>No GPU adapter: {escape(str(env.get('gpu_unavailable')))}</p>")
    tol = report["tolerances"]
    tolerances = (f"<p class=small>Tolerances: |got - expected| &le; atol + rtol &middot; |expected|; ONNX suite "
                  f"rtol {tol['suite']['rtol']:g}, atol {tol['suite']['atol']:g} (or a case's looser ones); "
                  f"models rtol {tol['models']['rtol']:g}, atol {tol['models']['atol']:g}; float16 outputs at "
                  f"least rtol {tol['float16']['rtol']:g}, atol {tol['float16']['atol']:g}. NaN positions, shapes "
                  f"and dtypes must match; integers and bools exactly.</p>")
    return f"<h2 id=env>Environment</h2><table>{versions}</table>{adapters}{tolerances}"


def _summary(report: dict) -> str:
    heads = "".join(f"<th class=num>{LABELS[o]}</th>" for o in OUTCOMES)
    rows = []
    for target in report["targets"]:
        row = report["summary"][target]
        run = row["total"] - row["unsupported"]
        rate = f"{100 * row['pass'] / run:.1f}%" if run else "-"
        right = f"{100 * (row['pass'] + row['fallback']) / run:.1f}%" if run else "-"
        cells = "".join(f"<td class=num>{row[o]}</td>" for o in OUTCOMES)
        rows.append(f"<tr><th>{escape(target)}</th>{cells}<td class=num>{row['total']}</td>"
                    f"<td class=num>{rate}</td><td class=num>{right}</td><td class=num>{row['seconds']:.1f}</td></tr>")
        if len(row["by_source"]) > 1:
            for source, counts in row["by_source"].items():
                cells = "".join(f"<td class=num>{counts[o]}</td>" for o in OUTCOMES)
                rows.append(f"<tr class=small><td>&nbsp;&nbsp;{escape(source)}</td>{cells}"
                            f"<td class=num>{counts['total']}</td><td></td><td></td><td></td></tr>")
    return (f"<h2 id=summary>Summary</h2><table><tr><th>target</th>{heads}<th class=num>total</th>"
            f"<th class=num>pass / run</th><th class=num>right / run</th><th class=num>seconds</th></tr>"
            f"{''.join(rows)}</table>"
            f"<p class=small>run: the cases that were not unsupported; right: pass or fallback. "
            f"fallback: right values, but some step ran on the CPU instead of the GPU. seconds: sessions and "
            f"runs on the target (building and converting the cases took {report['prepare_seconds']:.1f} s).</p>")


def _issue_list(title: str, anchor: str, items: list[dict], columns: list[str]) -> str:
    if not items:
        return ""
    heads = "".join(f"<th>{escape(c)}</th>" for c in columns)
    rows = "".join("<tr>" + "".join(f"<td>{escape(str(item.get(c) if item.get(c) is not None else ''))}</td>"
                                    for c in columns) + "</tr>" for item in items)
    return f"<h2 id={anchor}>{escape(title)} ({len(items)})</h2><table>{'<tr>' + heads + '</tr>'}{rows}</table>"


def _matrix(report: dict) -> str:
    targets = report["targets"]
    heads = "".join(f"<th class=target>{escape(t)}</th>" for t in targets)
    rows, hidden = [], 0
    for op, cells in report["matrix"].items():
        if all(cell["unsupported"] == sum(cell[o] for o in OUTCOMES) for cell in cells.values()):
            hidden += 1  # nothing but unsupported: listed with the unsupported op types
            continue
        parts = []
        for target in targets:
            cell = cells.get(target)
            if cell is None:
                parts.append("<td class='cell na'>-</td>")
                continue
            errors = ""
            if cell["worst_abs"] is not None:
                errors = f"<div class=small>abs {_num(cell['worst_abs'])} &middot; rel {_num(cell['worst_rel'])}</div>"
            parts.append(f"<td class='cell {_state(cell)}'>{_badges(cell)}{errors}</td>")
        rows.append(f"<tr><td class=op><a href='#{_anchor(op)}'>{escape(op)}</a></td>{''.join(parts)}</tr>")
    left_out = (f" {hidden} op row{'s' * (hidden > 1)} whose cases are all unsupported "
                f"{'are' if hidden > 1 else 'is'} left out (<a href='#unsupported'>listed below</a>)."
                if hidden else "")
    legend = "".join(f"<span><span class='b {o}'>n</span>{LABELS[o]}</span>" for o in OUTCOMES)
    return (f"<h2 id=matrix>Op &times; target</h2><p class=legend>{legend}</p>"
            f"<p class=small>Each cell counts the op's cases by outcome; abs / rel are the worst absolute and "
            f"relative errors over every compared output.{left_out}</p>"
            f"<table class=matrix><tr><th>op</th>{heads}</tr>{''.join(rows)}</table>")


def _unsupported(report: dict) -> str:
    ops = report["unsupported_ops"]
    if not ops:
        return ""
    chips = "".join(f"<span class=chip>{escape(op)} &times;{n}</span>" for op, n in ops.items())
    return (f"<h2 id=unsupported>Op types wgnn does not convert ({len(ops)})</h2>"
            f"<p class=small>Cases using them count as unsupported, not as failures (number of cases).</p>"
            f"<p>{chips}</p>")


def _result_cell(result: dict | None) -> str:
    if result is None:
        return "<td class='cell na'>not run</td>"
    outcome = result["outcome"]
    parts = [f"<span class='b {outcome}'>{LABELS[outcome]}</span>"]
    outputs = result.get("outputs", [])
    if result.get("max_abs") is not None:
        parts.append(f"<span class=small>abs {_num(result['max_abs'])} &middot; rel {_num(result['max_rel'])}</span>")
    for output in outputs:
        if output["ok"]:
            continue
        shapes = f"{output.get('dtype')}{output.get('shape')} vs expected {output.get('expected_dtype')}" \
                 f"{output.get('expected_shape')}"
        first = output.get("first_mismatch")
        where = (f"; first mismatch at {first['index']}: {first['got']} vs {first['expected']}" if first else "")
        parts.append(f"<div class=err>{escape(output['name'])}: {escape(shapes)}{escape(where)}</div>")
    if result.get("error") and not any(not o["ok"] for o in outputs):
        parts.append(f"<div class=err>{escape(result['error'])}</div>")
    if result.get("fallbacks"):
        listed = "; ".join(f"{f['op']} ({' / '.join(f['reasons'])})" for f in result["fallbacks"][:5])
        more = f" and {len(result['fallbacks']) - 5} more" if len(result["fallbacks"]) > 5 else ""
        parts.append(f"<div class=small>on the CPU: {escape(listed + more)}</div>")
    return f"<td class='cell {_state({outcome: 1})}'>{''.join(parts)}</td>"


def _details(report: dict) -> str:
    targets = report["targets"]
    by_op = defaultdict(list)
    for case in report["cases"]:
        by_op[case["op"]].append(case)
    heads = "".join(f"<th>{escape(t)}</th>" for t in targets)
    sections = []
    for op in report["matrix"]:
        cases = by_op.get(op, [])
        totals = dict.fromkeys(OUTCOMES, 0)
        for case in cases:
            for result in case["results"].values():
                totals[result["outcome"]] += 1
        rows = []
        for case in cases:
            inputs = ", ".join(f"{i['name']}: {_shape(i)}" for i in case["inputs"])
            expected = ", ".join(_shape(e) for e in case["expected"])
            info = (f"<div class=small>opset {case['opset']}; in {escape(inputs) or '-'}; "
                    f"out {escape(expected) or '-'}</div>")
            cells = "".join(_result_cell(case["results"].get(t)) for t in targets)
            rows.append(f"<tr><td><code>{escape(case['id'])}</code>{info}</td>{cells}</tr>")
        opened = " open" if totals["fail"] or totals["error"] else ""
        sections.append(
            f"<details id='{_anchor(op)}'{opened}><summary><span class=opname>{escape(op)}</span> "
            f"({len(cases)} case{'s' * (len(cases) != 1)}) {_badges(totals)}</summary>"
            f"<table class=cases><tr><th>case</th>{heads}</tr>{''.join(rows)}</table></details>")
    return "<h2 id=cases>Cases by op</h2><p class=small>Ops with failures or errors are open.</p>" + "".join(sections)


def render_html(report: dict) -> str:
    regressions = report.get("regressions")
    regression_html = ""
    if regressions is not None:
        regression_html = _issue_list("Regressions against the baseline", "regressions", regressions,
                                      ["case", "target", "baseline", "now", "error"]) or \
            "<h2 id=regressions>Regressions against the baseline</h2><p>None.</p>"
    title = f"wgnn conform {report['created']}"
    differs = [{"case": d["case"], "target": target, "outcome": d["outcome"], "error": d["error"]}
               for target, items in report.get("differs_from_numpy", {}).items() for d in items]
    sections = [("env", "environment", _environment(report)), ("summary", "summary", _summary(report)),
                ("regressions", "regressions", regression_html),
                ("differs", "differs from numpy", _issue_list("GPU results that differ from a numpy pass", "differs",
                                                              differs, ["case", "target", "outcome", "error"])),
                ("matrix", "matrix", _matrix(report)), ("unsupported", "unsupported", _unsupported(report)),
                ("cases", "cases", _details(report))]
    nav = " &middot; ".join(f"<a href='#{a}'>{t}</a>" for a, t, html in sections if html)
    body = "".join([
        f"<h1>wgnn conformance</h1><p class=meta>{escape(report['created'])} &middot; "
        f"{len(report['cases'])} cases from {escape(', '.join(report['sources']))} on {len(report['targets'])} "
        f"target(s) in {report['seconds']:.1f} s</p><p class=meta><code>{escape(report['command'])}</code></p>"
        f"<p class=meta>{nav}</p>", *(html for _, _, html in sections),
    ])
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
