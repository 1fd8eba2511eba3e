"""`wgnn shader FILE.wgsl`: run one WGSL kernel without the engine, compare it with a numpy
reference, time it, and re-run it whenever the file changes (--watch).

    wgnn shader my_relu.wgsl --input x=x.npy --output y:1024 --param 0=y.size --ref ref.py:relu --time
"""
from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from ...engine.errors import InputError, WgnnError

WATCH_INTERVAL = 0.25  # seconds between mtime polls


def _pairs(items: list[str] | None, option: str) -> dict[str, str]:
    """["NAME=VALUE", ...] -> {NAME: VALUE}; VALUE may itself contain '='."""
    pairs = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"{option} {item!r}: expected NAME=VALUE")
        pairs[name.strip()] = value
    return pairs


def _tensors(items: list[str] | None, option: str) -> dict[str, str | Path]:
    """--input NAME=FILE.npy or NAME:SHAPE[:DTYPE]; --output NAME:SHAPE[:DTYPE]."""
    tensors: dict[str, str | Path] = {}
    for item in items or []:
        m = re.match(r"^(\w+)([=:])(.*)$", item)
        if m is None:
            raise InputError(f"{option} {item!r}: expected NAME=FILE.npy or NAME:D0,D1,...[:DTYPE]")
        name, kind, rest = m.groups()
        if kind == "=" and option == "--output":
            raise InputError(f"--output {item!r}: outputs are NAME:D0,D1,...[:DTYPE] (e.g. y:1,3,8,8:float32)")
        tensors[name] = Path(rest) if kind == "=" else rest
    return tensors


def _params(args) -> dict[int, str] | None:
    slots: dict[int, str] = {}
    if args.params:
        slots.update(enumerate(v.strip() for v in args.params.split(",")))
    for key, value in _pairs(args.param, "--param").items():
        if not key.isdigit():
            raise InputError(f"--param {key}={value}: the slot must be a number 0..63")
        slots[int(key)] = value
    return {k: _number(v) for k, v in slots.items()} or None


def _number(text: str) -> int | float | str:
    """"3" -> 3, "0.5" -> 0.5 (stored as f32 bits); anything else stays an expression."""
    for parse in (int, lambda t: int(t, 0), float):  # "010" is 10, "0x10" is 16
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def _nc4hw4(items: list[str] | None) -> dict[str, int | None]:
    tensors: dict[str, int | None] = {}
    for item in (part for value in items or [] for part in value.split(",") if part.strip()):
        name, _, slot = item.strip().partition(":")
        if slot and not slot.isdigit():
            raise InputError(f"--nc4hw4 {item!r}: expected NAME or NAME:SLOT")
        tensors[name] = int(slot) if slot else None
    return tensors


def run_options(args) -> dict:
    """Keyword arguments of tools.shader_harness.run from the parsed command line."""
    dispatch = None
    if args.dispatch:
        try:
            dispatch = tuple(int(d) for d in args.dispatch.replace("x", ",").split(","))
        except ValueError:
            raise InputError(f"--dispatch {args.dispatch!r}: expected X[,Y[,Z]] workgroup counts") from None
    nc4 = _nc4hw4(args.nc4hw4)
    return {
        "inputs": _tensors(args.input, "--input"), "outputs": _tensors(args.output, "--output"),
        "params": _params(args), "constants": _pairs(args.const, "--const"), "text": _pairs(args.text, "--text"),
        "dispatch": dispatch, "adapter": args.adapter, "reference": args.ref, "time": args.time,
        "repeat": args.repeat, "nc4hw4": nc4 if any(v is not None for v in nc4.values()) else list(nc4),
        "prelude": args.prelude, "precision": args.precision, "per_invocation": _number(args.per_invocation),
        "entry": args.entry, "seed": args.seed, "rtol": args.rtol, "atol": args.atol,
    }


def _save(result, folder: str | None) -> None:
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, value in result.outputs.items():
            np.save(Path(folder) / f"{name}.npy", value)


def cmd_shader(args) -> int:
    from ..shader_harness import ShaderCompileError, run

    options = run_options(args)
    if args.watch:
        return watch(args, options)
    try:
        result = run(args.file, **options)
    except ShaderCompileError as exc:  # several lines (source and caret): not cli's one-line error
        print(f"wgnn: error: {exc}", file=sys.stderr)
        return 2
    _save(result, args.save)
    print(json.dumps(result.as_dict(), indent=2) if args.json else str(result))
    return 0 if result.ok else 1


def _watched(args) -> list[Path]:
    from ..shader_harness import load_kernel, reference_path

    files = [load_kernel(args.file)[2]]
    if args.ref:
        with contextlib.suppress(InputError):  # an unresolvable reference is reported by the run itself
            files.append(reference_path(args.ref)[0])
    return [f for f in files if f is not None]


def _stamp(files: list[Path]) -> tuple:
    return tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None for f in files)


def watch(args, options: dict) -> int:
    """Run, then re-run whenever the kernel (or the reference module) changes; print the change in
    max error and median time against the previous good run. Ctrl-C or --watch-runs N stops."""
    from ..shader_harness import ShaderCompileError, run
    from ..shader_report import change_dict, format_change

    files = _watched(args)
    previous, status, runs = None, 0, 0
    try:
        while True:
            stamp = _stamp(files)
            runs += 1
            record: dict = {"run": runs}
            try:
                result = run(args.file, **options)
            except (ShaderCompileError, WgnnError) as exc:
                status = 2
                record["error"] = str(exc)
                if not args.json:
                    print(f"--- run {runs} ---", flush=True)
                    print(f"wgnn: error: {exc}", file=sys.stderr, flush=True)
            else:
                status = 0 if result.ok else 1
                _save(result, args.save)
                if args.json:
                    record.update(result.as_dict())
                    if previous is not None:
                        record["change"] = change_dict(previous, result)
                else:
                    print(f"--- run {runs} ---\n{result}")
                    change = format_change(previous, result) if previous is not None else ""
                    if change:
                        print(f"\n{change}")
                previous = result
            if args.json:
                print(json.dumps(record), flush=True)
            if args.watch_runs and runs >= args.watch_runs:
                return status
            if not args.json:
                print(f"\nwatching {', '.join(map(str, files))} for changes (Ctrl-C stops)", flush=True)
            while _stamp(files) == stamp:
                time.sleep(WATCH_INTERVAL)
            files = _watched(args)  # the reference may have become resolvable
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return status


def register(subparsers) -> None:
    p = subparsers.add_parser("shader", help="run one WGSL kernel: compare with a numpy reference, time, watch",
                              description="Run one WGSL kernel without the engine. Tensors bind by name to the "
                              "kernel's @binding declarations; the Params uniform is filled from --param/--params.")
    p.add_argument("file", help="the .wgsl kernel (a path, or one under kernels_wgsl/ such as elementwise/unary.wgsl)")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy|NAME:SHAPE[:DTYPE]",
                   help="an input from a .npy file, or a random one of this shape (repeatable)")
    p.add_argument("--output", action="append", metavar="NAME:SHAPE[:DTYPE]",
                   help="an output buffer, zero-filled and read back after the run (repeatable)")
    p.add_argument("--param", action="append", metavar="SLOT=VALUE",
                   help="a Params slot: int, float (stored as f32 bits) or an expression such as y.size//4")
    p.add_argument("--params", metavar="V0,V1,...", help="Params slots from 0 on")
    p.add_argument("--const", action="append", metavar="NAME=VALUE", help="a WGSL override constant (repeatable)")
    p.add_argument("--text", action="append", metavar="NAME=VALUE", help="a {{NAME}} substitution (repeatable)")
    p.add_argument("--nc4hw4", action="append", metavar="NAME[:SLOT]",
                   help="an NC4HW4 tensor: {{DECL_NAME}} gets its accessor, its dims go to params slots SLOT.. "
                   "(default 4, 9, 14, ... in text parameter order)")
    p.add_argument("--prelude", choices=["buffer", "texture", "none"], default="buffer",
                   help="NC4HW4 storage of the accessors (default buffer); none: do not append prelude.wgsl")
    p.add_argument("--precision", choices=["f32", "f16"], default="f32",
                   help="f16: enable f16 (needs shader-f16), {{FLOAT}} = f16, looser default tolerance")
    p.add_argument("--dispatch", metavar="X[,Y,Z]", help="workgroup counts (default: from the first output)")
    p.add_argument("--per-invocation", default="1", metavar="K",
                   help="output elements per invocation, for the automatic dispatch: a number or an override "
                   "constant's name (default 1)")
    p.add_argument("--entry", default="main", help="entry point (default main)")
    p.add_argument("--adapter", help="GPU adapter: index, name substring, vulkan/metal/d3d12/gl")
    p.add_argument("--ref", metavar="MODULE:FUNCTION", help="numpy reference called with the inputs by name")
    p.add_argument("--rtol", type=float, help="relative tolerance (default 1e-4; f16 1e-2)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default 1e-5; f16 1e-3)")
    p.add_argument("--time", action="store_true", help="time the dispatch (GPU timestamps when available)")
    p.add_argument("--repeat", type=int, default=10, help="timed dispatches (default 10)")
    p.add_argument("--watch", action="store_true", help="re-run whenever the kernel or reference file changes")
    p.add_argument("--watch-runs", type=int, default=0, metavar="N", help="stop watching after N runs")
    p.add_argument("--seed", type=int, default=0, help="seed of random inputs")
    p.add_argument("--save", metavar="DIR", help="write the outputs to DIR/NAME.npy")
    p.add_argument("--json", action="store_true", help="print JSON (one line per run with --watch)")
    p.set_defaults(handler=cmd_shader)
