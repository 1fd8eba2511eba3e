"""If, Loop and Scan on numpy: the engine runs their subgraphs (engine/control_flow.py). Sessions
inline If and compute Loop/Scan at resize or at a sync point; these kernels serve constant
folding and direct evaluation."""
from __future__ import annotations

from ...engine.control_flow import run_branch, run_loop, run_scan
from .kernel import numpy_kernel


@numpy_kernel("If")
def if_(ex, *inputs):
    return tuple(run_branch(ex.step.node, ex.attrs, list(inputs)))


@numpy_kernel("Loop")
def loop(ex, *inputs):
    return tuple(run_loop(ex.step.node, ex.attrs, list(inputs)))


@numpy_kernel("Scan")
def scan(ex, *inputs):
    return tuple(run_scan(ex.step.node, ex.attrs, list(inputs)))
