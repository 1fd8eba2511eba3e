"""`wgnn tune`: measure NC4HW4 storage, workgroup sizes and the providers choice per adapter and
store them in the tuning cache (tools/tune.py, backends/wgpu/tuning.py); `--show` prints the cache,
`--clear` removes it. Tuning is a tool: nothing here asserts a speed."""
from __future__ import annotations

import json

from ...engine.errors import InputError, WgnnError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "tune", help="measure texture vs buffer storage, workgroup sizes and wgpu vs numpy per adapter; cache them",
        description="For each adapter (default: every one) time a few representative ops through real sessions "
                    "with NC4HW4 feature maps in textures and in buffers, and with each candidate workgroup size, "
                    "alternating variants and taking medians (GPU timestamp queries where the adapter has them); "
                    "then time a small CNN on wgpu and on numpy. The choices go to a JSON cache "
                    "($WGNN_CACHE_DIR/tuning.json, default ~/.cache/wgnn/tuning.json) keyed by adapter, backend, "
                    "driver and wgnn version: storage='auto' and providers=['auto'] follow it, and tuned "
                    "workgroup sizes are compiled into the kernels that have them.")
    p.add_argument("--adapter", help="GPU adapter(s): an index, name substring, vulkan/gl, a comma list or all "
                                     "(default: every adapter)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and few runs (seconds; for smoke tests)")
    p.add_argument("--runs", type=int, metavar="N", help="alternating timed runs per variant (default 7; --quick 3)")
    p.add_argument("--show", action="store_true", help="print the cache and measure nothing")
    p.add_argument("--clear", action="store_true",
                   help="remove the cache (with --adapter: only those adapters' entries) and measure nothing")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=cmd_tune)


def cmd_tune(args) -> int:
    from ...backends.wgpu import tuning

    if args.show and args.clear:
        raise InputError("--show and --clear do not go together")
    if args.runs is not None and args.runs < 1:
        raise InputError("--runs must be at least 1")
    if (args.show or args.clear) and (args.quick or args.runs is not None):
        raise InputError("--quick and --runs go with measuring, not with --show or --clear")
    if args.show:
        document = tuning.load_cache()
        if args.json:
            print(json.dumps({"cache": str(tuning.cache_path()), **document}, indent=2))
        else:
            from ..tune import format_cache

            print(format_cache(document, str(tuning.cache_path())))
        return 0
    if args.clear:
        infos = None if args.adapter is None else [_info(i) for i in _adapters(args.adapter)]
        removed = tuning.clear_cache(infos)
        if args.json:
            print(json.dumps({"cache": str(tuning.cache_path()), "removed": removed}))
        else:
            print(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {tuning.cache_path()}")
        return 0
    from ..tune import format_tuning, tune

    result = tune(_adapters(args.adapter), quick=args.quick, rounds=args.runs, show_progress=not args.json)
    print(json.dumps(result, indent=2) if args.json else format_tuning(result))
    return 0


def _adapters(choice: str | None) -> list[int]:
    """--adapter: default every adapter; else as `wgnn bench --kernels --adapter`."""
    from ...backends.wgpu.context import adapters, gpu_available
    from ..bench_kernels import parse_adapters

    unavailable = gpu_available()
    if unavailable is not None:
        raise WgnnError(f"no GPU adapter to tune: {unavailable}")
    return [a.index for a in adapters()] if choice is None else parse_adapters(choice)


def _info(index: int):
    from ...backends.wgpu.context import adapters

    return adapters()[index]
