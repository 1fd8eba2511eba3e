"""`wgnn soak MODEL`: run a session many times (default 10,000) on numpy and on the GPU, sampling process
RSS and wgpu's live objects/bytes; pass when both stay flat after warm-up and outputs never change; then
check threads (a session per thread, and one shared session) against single-threaded results."""
from __future__ import annotations


def register(subparsers) -> None:
    from ..soak import add_arguments

    p = subparsers.add_parser(
        "soak", help="run a model many times: memory (RSS, GPU objects) must stay flat, outputs the same; "
                     "then from several threads",
        description="Soak test: run a session --runs times per provider list, sampling RSS and wgpu's resource "
                    "report every --sample-every runs; after --warmup runs their growth must stay within the "
                    "thresholds and every sampled output must equal the first run's. Then --threads threads run "
                    "their own feeds on their own sessions and on one shared session, compared with "
                    "single-threaded runs. Exit status 1 when anything grows or differs.")
    add_arguments(p)
    p.set_defaults(handler=cmd_soak)


def cmd_soak(args) -> int:
    from ..soak import run_from_args

    return run_from_args(args)
