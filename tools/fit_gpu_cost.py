"""Fit the conv cost model's real-GPU weights (conv_paths.GPU_WEIGHTS) to the per-op GPU times of a
lent GPU's knob runs: `python -m wgnn.tools.fit_gpu_cost KNOBS.json [KNOBS.json ...]`.

`tools/gpu_check.py` benches zoo models with choices forced in turn (its KNOBS: every conv path
with WGNN_CONV_PATH, every dwpw block with WGNN_DWPW_BLOCK, expand groups with WGNN_DWPW_GROUPS),
and knobs.json keeps each run's per-op table: every Conv and ConvDwPwExpand op's GPU time with
that choice. The operation counts of those choices (conv_paths.KernelCost: invocations, and per
invocation vec4 loads, stores, FMAs, workgroup-memory reads, barriers) depend on the shapes only,
so this tool rebuilds each model here with the same choice forced, on whatever adapter there is
(lavapipe will do), and records each op's KernelCosts. It fits the real-GPU form of the model
(conv_paths.estimate_us with a concurrency: one invocation's chain per wave): time = dispatches x
dispatch_us + the sum over its kernels of one invocation's loads x load_ns + stores x store_ns +
FMAs x fma_ns + workgroup reads x shared_load_ns + barriers x barrier_ns, by non-negative least
squares of the relative errors, and prints the weights and each op's measured / predicted time.
Every fitted time must come from a run whose invocations fit one wave, as the zoo's do.

Literal-weight stem kernels are left out (their unrolled products are not priced like loaded
ones), and so are dwpw runs of knobs.json files written before expand groups existed unless
`--groups 1` says they ran one group. The printed CostWeights(...) go into conv_paths.GPU_WEIGHTS
by hand.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..backends.wgpu.conv_paths import GPU_WEIGHTS, KernelCost, estimate_us
from .fit_conv_cost import nnls

FIT_FIELDS = ("dispatch_us", "load_ns", "store_ns", "fma_ns", "shared_load_ns", "barrier_ns")
CHOICE_ENVS = ("WGNN_CONV_PATH", "WGNN_DWPW_BLOCK", "WGNN_DWPW_GROUPS")
SKIPPED_KERNELS = ("conv/conv_stem_nc4hw4.wgsl",)


@dataclass
class Timing:
    """One op's GPU time in one knob run, with the KernelCosts of the kernels it ran."""

    run: str
    op: str
    kernel: str
    measured_us: float
    costs: list[KernelCost]


def knob_runs(paths: list[Path]) -> list[dict]:
    """The model runs of knobs.json files that force a conv path, dwpw block or expand groups."""
    runs = []
    for path in paths:
        for run in json.loads(Path(path).read_text()):
            if "per_op" in run and set(run.get("env", {})) & set(CHOICE_ENVS[:2]):
                runs.append(run)
    return runs


def model_of(step: str) -> tuple[str, int]:
    """(zoo name, size) of a knob step's label, e.g. "knob WGNN_CONV_PATH=tiled resnet 224"."""
    *_, name, size = step.split()
    return name, int(size)


@contextlib.contextmanager
def forced(env: dict[str, str]):
    saved = {name: os.environ.get(name) for name in CHOICE_ENVS}
    for name in CHOICE_ENVS:
        os.environ.pop(name, None)
    os.environ.update({k: v for k, v in env.items() if k in CHOICE_ENVS})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def captured_costs(name: str, size: int, env: dict[str, str]) -> dict[str, dict]:
    """Per Conv / ConvDwPw(Expand) op of the zoo model at `size` prepared here with `env`'s choices
    forced: {"conv": {path or direct kernel: [KernelCost]}} or {"dwpw": [KernelCost]} (the forced
    block and groups)."""
    from wgnn.backends.wgpu import conv_dwpw, conv_dwpw_expand, conv_paths
    from wgnn.backends.wgpu.backend import WORKGROUP
    from wgnn.models import zoo

    import wgnn

    captured: dict[str, dict] = {}
    choose_path, dispatch_block = conv_paths.choose_path, conv_dwpw.dispatch_block

    def spy_path(step, kind, weights, *args, **kwargs):
        costs = conv_paths.path_costs(step, kind, GPU_WEIGHTS)
        direct = conv_paths.direct_variants(step, kind, conv_paths.geometry(step))
        captured[step.node.name] = {"conv": {**{p: c for p, c in costs.items() if p != "direct"},
                                             **{k: [c] for k, c in direct.items()}}}
        return choose_path(step, kind, weights, *args, **kwargs)

    def spy_block(ex, kernel, tensors, params, text, shape):
        block, groups = conv_dwpw.choose_layout(shape, GPU_WEIGHTS)  # as forced by env
        captured[ex.step.node.name] = {"dwpw": [conv_dwpw.block_cost(shape, block, WORKGROUP, groups)]}
        return dispatch_block(ex, kernel, tensors, params, text, shape)

    model = zoo.build(name, size=size)
    with forced(env), _patched(conv_paths, "choose_path", spy_path), \
            _patched(conv_dwpw, "dispatch_block", spy_block), _patched(conv_dwpw_expand, "dispatch_block", spy_block):
        session = wgnn.InferenceSession(model.SerializeToString(), providers=["wgpu"])
        session.run(None, zoo.example_inputs(model))
    return captured


@contextlib.contextmanager
def _patched(module, name: str, value):
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def timings(runs: list[dict], *, groups: str | None = None) -> list[Timing]:
    """Each run's Conv and ConvDwPwExpand ops with their measured GPU time and captured costs."""
    rows = []
    for run in runs:
        env = dict(run["env"])
        if "WGNN_DWPW_BLOCK" in env and "WGNN_DWPW_GROUPS" not in env:
            if groups is None:
                continue
            env["WGNN_DWPW_GROUPS"] = groups
        name, size = model_of(run["step"])
        costs = captured_costs(name, size, env)
        for row in run["per_op"]["rows"]:
            op = row["op"].split('"')[1] if '"' in row["op"] else row["op"]
            kernel = row["kernel"].split(",")[0].strip()
            found = costs.get(op)
            if found is None or kernel in SKIPPED_KERNELS:
                continue
            if "dwpw" in found:
                chosen = found["dwpw"]
            else:
                path = env.get("WGNN_CONV_PATH", "")
                chosen = found["conv"].get(kernel) or found["conv"].get(path)
            if chosen:
                rows.append(Timing(run["step"], op, kernel, row["median_ms"] * 1e3, chosen))
    return rows


def design(costs: list[list[KernelCost]]) -> np.ndarray:
    """One row per op: [dispatches, one invocation's loads (uniform ones too), stores, FMAs,
    workgroup-memory reads, barriers], each summed over the op's kernels."""
    return np.array([[len(kernels), sum(k.loads + k.uniform_loads for k in kernels), sum(k.stores for k in kernels),
                      sum(k.fmas for k in kernels), sum(k.shared_loads for k in kernels),
                      sum(k.barriers for k in kernels)] for kernels in costs], np.float64).reshape(-1, 6)


def fit(rows: list[Timing]) -> dict[str, float]:
    """Non-negative prices minimising the squared relative errors (FIT_FIELDS: dispatch_us in
    microseconds, the others in nanoseconds)."""
    measured_ns = np.array([r.measured_us for r in rows], np.float64) * 1e3
    a = design([r.costs for r in rows])
    a[:, 0] *= 1e3  # a dispatch's price in microseconds
    a /= measured_ns[:, None]
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0  # an operation no timed kernel does: its price stays 0
    x = nnls(a / scale, np.ones(len(rows))) / scale
    return dict(zip(FIT_FIELDS, (float(v) for v in x), strict=True))


def weights_with(prices: dict[str, float]):
    return replace(GPU_WEIGHTS, invocation_ns=0.0, uniform_load_ns=None, **prices)


def report(rows: list[Timing], prices: dict[str, float]) -> str:
    weights = weights_with(prices)
    errors = []
    lines = [f"{'run':<58} {'op':<12} {'kernel':<34} {'measured':>9} {'predicted':>9}"]
    for r in rows:
        predicted = estimate_us(r.costs, weights)
        errors.append(abs(r.measured_us / predicted - 1))
        lines.append(f"{r.run[:58]:<58} {r.op[:12]:<12} {r.kernel[:34]:<34} {r.measured_us:9.1f} {predicted:9.1f}")
    fields = ", ".join(f"{name}={value:.4g}" for name, value in prices.items())
    lines += ["", f"{len(rows)} op timings; median relative error {np.median(errors):.0%}",
              f"CostWeights({fields}, invocation_ns=0.0, concurrency={GPU_WEIGHTS.concurrency})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.fit_gpu_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("knobs", nargs="+", type=Path, help="knobs.json files of tools/gpu_check.py runs")
    parser.add_argument("--groups", help="expand groups the dwpw runs without WGNN_DWPW_GROUPS ran (files "
                        "written before groups existed: 1); without it such runs are left out")
    args = parser.parse_args(argv)
    rows = timings(knob_runs(args.knobs), groups=args.groups)
    if not rows:
        raise SystemExit("no Conv or ConvDwPwExpand timings with a forced choice in those files")
    print(report(rows, fit(rows)))


if __name__ == "__main__":
    main()
