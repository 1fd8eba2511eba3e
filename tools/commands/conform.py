"""`wgnn conform`: run op cases, the ONNX node tests, models and the zoo on the numpy backend and
on every GPU adapter; print pass counts, write conform.json and conform.html, compare with a
baseline. Exit status 0 when the run completes, 1 when --baseline finds a regression."""
from __future__ import annotations

import json
import shlex
import sys
import time

from ...engine.errors import InputError

DEFAULT_SOURCES = "own,node,zoo"
LISTED = 15  # failures printed per target (the report lists all)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "conform", help="conformance: op cases and ONNX node tests on numpy and every GPU adapter",
        description="Run conformance cases on the numpy backend and every GPU adapter (or those named), compare "
                    "with the expected outputs (ONNX suite tolerances), and report pass / fail / unsupported / "
                    "error / fallback per target and op.")
    p.add_argument("--sources", default=DEFAULT_SOURCES, metavar="LIST",
                   help="comma separated: own (wgnn's op cases), node (ONNX backend node tests), zoo, or paths of "
                        ".onnx files / ONNX test folders (default own,node,zoo)")
    p.add_argument("--ops", metavar="REGEX", help="only cases whose op type or case name matches (re.search)")
    p.add_argument("--adapters", metavar="LIST",
                   help="targets, comma separated: numpy, all (every GPU adapter), wgpu:<i>, an index, vulkan, gl, "
                        "... or a name substring (default numpy,all)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N cases from each source (quick runs)")
    p.add_argument("--out", metavar="DIR", help="write DIR/conform.json and DIR/conform.html")
    p.add_argument("--baseline", metavar="FILE",
                   help="a previous conform.json: exit with status 1 if a case that passed there does not now")
    p.add_argument("--constant-shape-inputs", action="store_true",
                   help="feed the inputs that carry shapes, axes, pads, sizes or scales (Reshape shape, Slice "
                        "starts, Resize scales, Reduce axes, ...) as constants: wgnn needs them before running, "
                        "the ONNX node tests feed them at run time")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.set_defaults(handler=cmd_conform)


def cmd_conform(args) -> int:
    from ..cli import table
    from ..conform.report import build_report, environment, load_baseline, regressions, write_report
    from ..conform.runner import resolve_targets, run_cases
    from ..conform.sources import collect

    if args.limit is not None and args.limit < 1:
        raise InputError("--limit must be at least 1")
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    if not sources:
        raise InputError("--sources names no source")
    baseline = load_baseline(args.baseline) if args.baseline else None  # fail early on a bad file
    targets, unavailable = resolve_targets(args.adapters)
    start = time.perf_counter()
    if sys.stderr.isatty() and not args.json:  # building the ONNX node tests takes seconds
        print("collecting cases ...", end="\r", file=sys.stderr, flush=True)
    cases = collect(sources, args.ops, args.limit)
    runs = run_cases(cases, targets, show_progress=not args.json, constant_shapes=args.constant_shape_inputs)
    seconds = time.perf_counter() - start
    command = shlex.join(["wgnn", *sys.argv[1:]]) if sys.argv and sys.argv[0] else "wgnn conform"
    report = build_report(runs, targets, env=environment(targets, unavailable), command=command, sources=sources,
                          seconds=seconds, constant_shape_inputs=args.constant_shape_inputs)
    found = None
    if baseline is not None:
        found = regressions(report, baseline)
        report["baseline"] = args.baseline
        report["regressions"] = found
    written = write_report(report, args.out) if args.out else None
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_summary(report, table)
        if written:
            print(f"\nwrote {written[0]} and {written[1]}")
    if found:
        lines = [f"{len(found)} regression(s) against {args.baseline}:"]
        lines += [f"  {r['case']} on {r['target']}: {r['baseline']} -> {r['now']}"
                  + (f" ({r['error'][:200]})" if r.get("error") else "") for r in found]
        print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
        return 1
    if baseline is not None and not args.json:
        print(f"\nno regression against {args.baseline}")
    return 0


def print_summary(report: dict, table) -> None:
    from ..conform.runner import OUTCOMES

    rows = []
    for target in report["targets"]:
        row = report["summary"][target]
        rows.append([target, *(row[o] for o in OUTCOMES), row["total"], f"{row['seconds']:.1f}"])
        if len(row["by_source"]) > 1:
            rows += [[f"  {source}", *(c[o] for o in OUTCOMES), c["total"], ""]
                     for source, c in row["by_source"].items()]
    print(f"wgnn conform: {len(report['cases'])} cases ({', '.join(report['sources'])}) on "
          f"{len(report['targets'])} target(s) in {report['seconds']:.1f} s")
    print(table(["target", *OUTCOMES, "total", "seconds"], rows))
    if report["unsupported_ops"]:
        ops = report["unsupported_ops"]
        print(f"\nunsupported op types ({len(ops)}): " + ", ".join(f"{op} ({n})" for op, n in ops.items()))
    for target, listed in report["claimed_failures"].items():
        failures = [f for f in listed if f["outcome"] in ("fail", "error")]
        refused = len(listed) - len(failures)
        if failures:
            print(f"\n{target}: {len(failures)} case(s) of ops wgnn converts fail or raise:")
            for item in failures[:LISTED]:
                print(f"  {item['outcome']:<5} {item['case']}: {(item['error'] or '')[:160]}")
            if len(failures) > LISTED:
                print(f"  ... and {len(failures) - LISTED} more (--out DIR writes them all)")
        if refused:
            print(f"{target}: {refused} case(s) of ops wgnn converts use a form it refuses (unsupported)")
