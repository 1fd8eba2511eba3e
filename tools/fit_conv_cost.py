"""Fit the conv cost model's CPU-adapter weights to measured kernel times:
`python -m wgnn.tools.fit_conv_cost [--save run.json]`, or `--load run.json [--load ...]` to fit
saved runs again (several are pooled).

backends/wgpu/conv_paths.py picks each NC4HW4 Conv's path (direct kernels, gemm1x1, Winograd
F(2,3) / F(4,3)) by estimates made of per-kernel operation counts (KernelCost: invocations x vec4
loads, uniform weight loads, stores, FMAs) priced by per-adapter CostWeights. This tool measures
those prices on one adapter (lavapipe by default) in three steps:

1. Measure. For a set of conv shapes (fit_cases: Cin/Cout 3..96 at 8..112 pixels, 3x3 stride 1
   and 2, 1x1, 5x5 / 7x7, depthwise 3x3 stride 1 / 2 and 5x5) every kernel that can run each one:
   the direct kernels (conv_nc4hw4, conv_slide, conv4, the depthwise ones), gemm1x1 and the three
   Winograd kernels of both units, with the weights in uniform buffers where they go there and
   again in storage buffers (WGNN_CONV_WEIGHTS=storage). The conv reads an NC4HW4 map (a 1x1 conv
   feeds it), as inside a model. One dispatch is recorded R times in one compute pass (R sized to
   about `--target-ms` of work) and timed by the process CPU time of submit + wait, which counts
   lavapipe's worker threads and moves less with the load of this shared machine than wall time
   does, and by wall time too; an empty submission's time is subtracted. A shape's kernels are
   timed in turn, `--rounds` rounds, lower quartiles (contention only adds time); everything is
   measured `--passes` times and the passes' medians kept.
2. Fit. Non-negative least squares of the relative errors of: CPU time = a per-dispatch CPU time +
   invocations x (invocation_ns + loads x load_ns + uniform loads x uniform_load_ns + stores x
   store_ns + FMAs x fma_ns), with the KernelCosts that path_costs / direct_variants give the
   shapes. Then dispatch_us and wake_us from the wall times, in the cost model's form: wall = a +
   c x (busy workers - 1) + b x priced work / busy workers over the same runs, dispatch_us = a / b,
   wake_us = c / b (fit_dispatch).
3. Check. On held-out shapes (holdout_cases: the zoo's convs at 32x32 and 224x224, and others)
   each path (and direct kernel) runs as one submission, wall time in turn, lower quartiles: the
   cost model's choice under the current CPU_WEIGHTS and under the fitted weights against the
   fastest option (how many right, what the wrong ones cost).

Three passes take about 2 to 4 minutes on lavapipe (2 cores), depending on the load. The tuning
cache is not read while measuring (kernels run at the adapter's preferred workgroup size, as the
cost model assumes). Nothing is written to the repository: the fitted CostWeights(...) printed at
the end go into conv_paths.CPU_WEIGHTS by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..backends.wgpu.conv_paths import PATH_ENV, CostWeights, KernelCost, estimate_us

WEIGHTS_ENV = "WGNN_CONV_WEIGHTS"
# The per-operation prices the fit finds, in the order of its design matrix's columns after the
# per-dispatch one.
FIT_FIELDS = ("invocation_ns", "load_ns", "uniform_load_ns", "store_ns", "fma_ns")
CHANNELS = (3, 8, 16, 32, 64, 96)
SIZES = (8, 14, 28, 56, 112)
DISPATCH_FLOOR_US = 300.0  # fit_dispatch weighs errors of runs shorter than this absolutely
MAX_REPEAT = 256  # dispatches per timed submission at most
MAX_MACS = 120e6  # multiply-adds of the largest training conv (about 30 ms of lavapipe CPU time direct)
LARGE_MACS = 10e6  # half the drawn training convs have at least this many: maps past the caches


@dataclass(frozen=True)
class ConvCase:
    """Conv [1, cin, size, size] -> cout, kernel x kernel, stride, pads kernel // 2, group."""

    cin: int
    cout: int
    kernel: int
    stride: int
    size: int
    group: int = 1

    @property
    def label(self) -> str:
        kind = f"dw{self.kernel}x{self.kernel}" if self.group > 1 else f"{self.kernel}x{self.kernel}"
        stride = f"/{self.stride}" if self.stride > 1 else ""
        return f"{kind}{stride} {self.cin}->{self.cout} @{self.size}"

    @property
    def macs(self) -> float:
        out = -(-self.size // self.stride)
        return out * out * self.cout * self.cin // self.group * self.kernel ** 2


def fit_cases(seed: int = 0, count: int = 48) -> list[ConvCase]:
    """The training shapes: `count` 3x3 group-1 convs drawn from CHANNELS x CHANNELS x SIZES x
    strides 1, 2 (half of them from those of at least LARGE_MACS, up to MAX_MACS: the large maps
    where the paths' memory traffic tells), then fixed 1x1, large-kernel and depthwise ones."""
    rng = np.random.default_rng(seed)
    held = set(holdout_cases())
    grid = [ConvCase(ci, co, 3, s, n) for ci in CHANNELS for co in CHANNELS for n in SIZES for s in (1, 2)]
    grid = [c for c in grid if c.macs <= MAX_MACS and c not in held]
    picked = []
    for stratum in ([c for c in grid if c.macs < LARGE_MACS], [c for c in grid if c.macs >= LARGE_MACS]):
        size = min(len(stratum), count // 2)
        picked += [stratum[i] for i in sorted(rng.choice(len(stratum), size=size, replace=False))]
    ones = [ConvCase(ci, co, 1, s, n) for ci, co, n, s in (
        (8, 32, 56, 1), (32, 8, 56, 1), (16, 96, 56, 1), (96, 16, 28, 1), (64, 64, 28, 1), (3, 16, 112, 1),
        (32, 96, 14, 1), (96, 96, 8, 1), (16, 16, 112, 1), (64, 32, 56, 2), (8, 8, 28, 1), (96, 64, 14, 1))]
    large = [ConvCase(3, 16, 7, 2, 112), ConvCase(3, 8, 7, 2, 56), ConvCase(16, 32, 5, 2, 56),
             ConvCase(8, 8, 5, 1, 28)]
    depthwise = [ConvCase(c, c, k, s, n, group=c) for c, k, s, n in (
        (8, 3, 1, 112), (16, 3, 1, 56), (32, 3, 1, 28), (96, 3, 1, 56), (64, 3, 1, 14), (16, 3, 2, 112),
        (96, 3, 2, 112), (32, 3, 2, 56), (64, 3, 2, 28), (32, 5, 1, 28), (96, 5, 2, 56), (16, 3, 1, 8))]
    return picked + ones + large + depthwise


def holdout_cases() -> list[ConvCase]:
    """Shapes kept out of the fit to check its path choices: the zoo's convs (resnet, unet,
    mobilenetv2 at 32x32 and 224x224: cin, cout, kernel, stride, input size), single convs measured
    end to end before, and channel counts off the training grid."""
    zoo = [(3, 16, 7, 2, 32), (16, 16, 3, 1, 8), (16, 32, 1, 2, 8), (16, 32, 3, 2, 8), (32, 32, 3, 1, 4),
           (3, 16, 7, 2, 224), (16, 16, 3, 1, 56), (16, 32, 1, 2, 56), (16, 32, 3, 2, 56), (32, 32, 3, 1, 28),
           (3, 8, 3, 1, 32), (8, 2, 1, 1, 32), (8, 16, 3, 1, 16), (16, 8, 1, 1, 32), (16, 8, 3, 1, 32),
           (16, 32, 3, 1, 8), (32, 16, 3, 1, 16), (3, 8, 3, 1, 224), (8, 2, 1, 1, 224), (8, 16, 3, 1, 112),
           (16, 8, 1, 1, 224), (16, 8, 3, 1, 224), (16, 32, 3, 1, 56), (32, 16, 3, 1, 112),
           (3, 16, 3, 2, 32), (16, 96, 1, 1, 16), (24, 144, 1, 1, 8), (32, 192, 1, 1, 4),
           (3, 16, 3, 2, 224), (16, 96, 1, 1, 112), (24, 144, 1, 1, 56), (32, 64, 1, 1, 28), (32, 192, 1, 1, 28)]
    others = [(16, 16, 3, 1, 112), (32, 32, 3, 1, 112), (32, 32, 3, 1, 56), (64, 64, 3, 1, 56), (8, 8, 3, 1, 112),
              (16, 4, 3, 1, 112), (16, 16, 3, 1, 32), (32, 32, 3, 1, 16), (64, 64, 3, 1, 8), (8, 8, 3, 1, 32),
              (64, 64, 3, 1, 28), (32, 64, 3, 1, 28), (24, 24, 3, 1, 28), (48, 48, 3, 1, 14), (40, 40, 3, 1, 20),
              (32, 64, 3, 2, 56), (64, 128, 3, 2, 28), (64, 256, 1, 1, 14), (96, 24, 1, 1, 56)]
    return [ConvCase(*shape) for shape in zoo + others]


def case_model(case: ConvCase) -> bytes:
    """x -> Conv 1x1 (so the conv reads an NC4HW4 map) -> the case's Conv with bias -> Relu. The
    1x1 conv's output is a graph output too, so that the two convs never fuse (ConvPw, ConvDwPw)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    k, cg = case.kernel, case.cin // case.group
    weights = {"wp": rng.standard_normal((case.cin, case.cin, 1, 1)) / np.sqrt(case.cin),
               "w": rng.standard_normal((case.cout, cg, k, k)) / np.sqrt(cg * k * k),
               "b": rng.standard_normal(case.cout)}
    nodes = [helper.make_node("Conv", ["x", "wp"], ["h"]),
             helper.make_node("Conv", ["h", "w", "b"], ["c"], kernel_shape=[k, k], strides=[case.stride] * 2,
                              pads=[k // 2] * 4, group=case.group),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, case.cin, case.size, case.size])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "h")],
        [numpy_helper.from_array(v.astype(np.float32), name) for name, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


# ----------------------------------------------------------------------------- sessions
@contextmanager
def forced(path: str, kernel: str | None = None, weights: str = "auto"):
    """Sessions made inside run `path` (WGNN_CONV_PATH), for the direct path through `kernel` where
    the conv has it, with weights placed as WGNN_CONV_WEIGHTS=`weights` says."""
    from ..backends.wgpu import conv_paths

    saved = {name: os.environ.get(name) for name in (PATH_ENV, WEIGHTS_ENV)}
    original = conv_paths.cheapest

    def pick(variants, cost_weights):
        return kernel if kernel in variants else original(variants, cost_weights)

    os.environ[PATH_ENV], os.environ[WEIGHTS_ENV] = path, weights
    conv_paths.cheapest = pick
    try:
        yield
    finally:
        conv_paths.cheapest = original
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def untuned():
    """No tuning cache while measuring: every tunable kernel at the adapter's preferred workgroup."""
    from ..backends.wgpu.tuning import CACHE_ENV

    saved = os.environ.get(CACHE_ENV)
    with tempfile.TemporaryDirectory() as folder:
        os.environ[CACHE_ENV] = folder
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(CACHE_ENV, None)
            else:
                os.environ[CACHE_ENV] = saved


class Variant:
    """One way to run a case's conv: a session forced onto it, and its last Conv's dispatches with
    their KernelCosts (one per dispatch)."""

    def __init__(self, case: ConvCase, adapter, path: str, kernel: str | None, weights: str):
        import wgnn

        from ..backends.wgpu.conv_paths import adapter_weights

        x = np.random.default_rng(1).standard_normal((1, case.cin, case.size, case.size)).astype(np.float32)
        config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage="buffer")
        with forced(path, kernel, weights):
            self.session = wgnn.InferenceSession(case_model(case), config=config)
            self.session.run(None, {"x": x})
            self.session.wait_background()  # the kernels a session keeps
            convs = [ex for segment in self.session.session.segments for _, ex in segment.steps
                     if type(ex).__name__ == "ConvGpu"]
            self.execution = convs[-1]
            self.backend = self.execution.backend
            self.base = adapter_weights(self.backend.context)
            self.costs = dispatch_costs(self.execution, self.base)
        self.dispatches = list(self.execution.dispatches)
        self.path = self.execution.path
        self.kernel = self.dispatches[0].kernel.path if self.path == "direct" else None
        self.name = option_name(self.path, self.kernel)
        self.uniform = uniform_weights(self.execution)

    def options(self) -> dict[str, tuple[str, str | None]]:
        """Option name -> (path, direct kernel) of every way this conv can run."""
        from ..backends.wgpu.conv import nc4hw4_conv_kind
        from ..backends.wgpu.conv_paths import candidates, direct_variants, geometry

        step = self.execution.step
        kind = nc4hw4_conv_kind(step)
        found = {}
        for path in candidates(step, kind):
            if path == "direct":
                for kernel in direct_variants(step, kind, geometry(step)):
                    found[option_name(path, kernel)] = (path, kernel)
            else:
                found[path] = (path, None)
        return found


def option_name(path: str, kernel: str | None) -> str:
    if path != "direct" or not kernel:
        return path
    return "direct:" + kernel.split("/")[-1].replace("_nc4hw4.wgsl", "")


def uniform_weights(execution) -> bool:
    """Whether the backend bound this conv's packed weights as a uniform buffer."""
    from ..backends.wgpu.loader import UNIFORM

    backend, node = execution.backend, execution.step.node.name
    return any(backend.binding_kind(name, False) == UNIFORM for name in backend.packed
               if name.startswith(node + "/") and "weights" in name)


def dispatch_costs(execution, weights: CostWeights) -> list[KernelCost]:
    """The KernelCosts of an NC4HW4 conv execution's dispatches, weight loads where it bound them
    (the model counts weights as uniform where they may go there; the backend also checks the
    packed size)."""
    from ..backends.wgpu.conv import nc4hw4_conv_kind
    from ..backends.wgpu.conv_paths import direct_variants, geometry, path_costs

    step = execution.step
    kind = nc4hw4_conv_kind(step)
    if execution.path == "direct":
        costs = [direct_variants(step, kind, geometry(step))[execution.dispatches[0].kernel.path]]
    else:
        costs = path_costs(step, kind, weights)[execution.path]
    if uniform_weights(execution):
        return costs
    return [replace(c, loads=c.loads + c.uniform_loads, uniform_loads=0.0) for c in costs]


class Timer:
    """Times recorded dispatches on one device: process CPU and wall seconds of submit + wait."""

    def __init__(self, backend):
        wgpu = backend.wgpu
        self.device = backend.device
        self.sync = self.device.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.STORAGE)

    def run(self, dispatches, repeat: int = 1) -> tuple[float, float]:
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        for _ in range(repeat):
            for d in dispatches:
                compute.set_pipeline(d.kernel.pipeline)
                compute.set_bind_group(0, d.bind_group)
                compute.dispatch_workgroups(*d.groups)
        compute.end()
        commands = encoder.finish()
        wall, cpu = time.perf_counter(), time.process_time()
        self.device.queue.submit([commands])
        self.device.queue.read_buffer(self.sync, 0, 16)  # waits for the submission
        return time.process_time() - cpu, time.perf_counter() - wall


def variants_of(case: ConvCase, adapter, *, storage_twins: bool = True) -> list[Variant]:
    """Every way to run the case's conv, and (storage_twins) again with storage weights those
    that bound uniform ones."""
    first = Variant(case, adapter, "auto", None, "auto")
    found = []
    for path, kernel in first.options().values():
        variant = Variant(case, adapter, path, kernel, "auto")
        found.append(variant)
        if variant.uniform and storage_twins:
            found.append(Variant(case, adapter, path, kernel, "storage"))
    return found


def lower_quartile(samples) -> float:
    """The 25th percentile: on a shared machine contention only adds time (to the CPU time too:
    lavapipe's threads wait for each other), so the low end of the samples is the kernel's own."""
    return float(np.percentile(samples, 25))


def measure_case(case: ConvCase, adapter, *, rounds: int, target_ms: float) -> list[dict]:
    """Per dispatch of every variant: CPU and wall microseconds per run (lower quartiles of
    `rounds`, an empty submission's subtracted)."""
    variants = variants_of(case, adapter)
    timer = Timer(variants[0].backend)
    items = [(v, i) for v in variants for i in range(len(v.dispatches))]
    floor = min(timer.run([], 0)[0] for _ in range(3))
    repeats = []
    for v, i in items:
        timer.run([v.dispatches[i]])  # warm: first touches of scratch buffers
        once = timer.run([v.dispatches[i]])[0] - floor
        repeats.append(int(min(MAX_REPEAT, max(1, round(target_ms / 1e3 / max(once, 1e-5))))))
    cpu: list[list[float]] = [[] for _ in items]
    wall: list[list[float]] = [[] for _ in items]
    empty = []
    for _ in range(rounds):
        for j, ((v, i), repeat) in enumerate(zip(items, repeats, strict=True)):
            empty.append(timer.run([], 0))
            c, w = timer.run([v.dispatches[i]], repeat)
            cpu[j].append(c)
            wall[j].append(w)
    base_cpu, base_wall = (lower_quartile([e[k] for e in empty]) for k in (0, 1))
    rows = []
    for j, ((v, i), repeat) in enumerate(zip(items, repeats, strict=True)):
        per = [(t - base_cpu) / repeat * 1e6 for t in cpu[j]]
        rows.append({"case": case.label, "option": v.name, "index": i, "kernel": v.dispatches[i].kernel.path,
                     "bound": "uniform" if v.uniform else "storage",
                     "weights": "uniform" if v.uniform and v.costs[i].uniform_loads else "storage",
                     "cost": asdict(v.costs[i]), "repeat": repeat, "cpu_us": lower_quartile(per),
                     "wall_us": lower_quartile([(t - base_wall) / repeat * 1e6 for t in wall[j]])})
    return rows


def check_case(case: ConvCase, adapter, *, rounds: int) -> dict:
    """Every option of a held-out case as one submission (its 1 or 3 dispatches), wall and CPU
    microseconds (lower quartiles, an empty submission's subtracted), in turn; with its KernelCosts."""
    variants = variants_of(case, adapter, storage_twins=False)
    timer = Timer(variants[0].backend)
    for v in variants:
        timer.run(v.dispatches)
    walls: list[list[float]] = [[] for _ in variants]
    cpus: list[list[float]] = [[] for _ in variants]
    empty_wall, empty_cpu = [], []
    for _ in range(rounds):
        for j, v in enumerate(variants):
            cpu, wall = timer.run([], 0)
            empty_wall.append(wall)
            empty_cpu.append(cpu)
            cpu, wall = timer.run(v.dispatches)
            walls[j].append(wall)
            cpus[j].append(cpu)
    base_wall, base_cpu = lower_quartile(empty_wall), lower_quartile(empty_cpu)
    return {"case": case.label, "workers": variants[0].base.workers, "workgroup": variants[0].base.workgroup,
            "options": {v.name: {"wall_us": (lower_quartile(w) - base_wall) * 1e6,
                                 "cpu_us": (lower_quartile(c) - base_cpu) * 1e6,
                                 "costs": [asdict(k) for k in v.costs]}
                        for v, w, c in zip(variants, walls, cpus, strict=True)}}


# ----------------------------------------------------------------------------- fit
def design(costs: list[KernelCost]) -> np.ndarray:
    """One row per kernel run: [1, invocations, x loads, x uniform loads, x stores, x FMAs], so
    that its nanoseconds are the row times [per-dispatch ns, *FIT_FIELDS]."""
    return np.array([[1.0, c.invocations, c.invocations * c.loads, c.invocations * c.uniform_loads,
                      c.invocations * c.stores, c.invocations * c.fmas] for c in costs], np.float64).reshape(-1, 6)


def nnls(a: np.ndarray, b: np.ndarray, tolerance: float = 1e-10) -> np.ndarray:
    """argmin |a x - b| over x >= 0 (Lawson and Hanson's active-set method)."""
    n = a.shape[1]
    x, passive = np.zeros(n), np.zeros(n, bool)
    for _ in range(3 * n + 3):
        gradient = a.T @ (b - a @ x)
        if passive.all() or gradient[~passive].max() <= tolerance:
            break
        passive[int(np.argmax(np.where(passive, -np.inf, gradient)))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > tolerance).all():
                x = z
                break
            # Step towards z until a coefficient reaches zero; that one leaves the passive set.
            blocked = passive & (z <= tolerance)
            step = np.min(x[blocked] / np.maximum(x[blocked] - z[blocked], 1e-300))
            x = x + step * (z - x)
            passive &= x > tolerance
            x[~passive] = 0.0
    return x


def fit(costs: list[KernelCost], times_us) -> dict[str, float]:
    """Non-negative prices minimising the squared relative errors of the predicted times:
    dispatch_cpu_us (a dispatch's fixed CPU time, apart from CostWeights' wall-clock dispatch_us)
    and FIT_FIELDS (nanoseconds)."""
    times_ns = np.asarray(times_us, np.float64) * 1e3
    a = design(costs) / times_ns[:, None]
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0  # an operation no measured kernel does: its price stays 0
    x = nnls(a / scale, np.ones(len(times_ns))) / scale
    return {"dispatch_cpu_us": float(x[0]) / 1e3, **{name: float(v) for name, v in zip(FIT_FIELDS, x[1:])}}


def predicted_us(cost: KernelCost, prices: dict[str, float]) -> float:
    """A kernel run's CPU microseconds under fitted prices."""
    return prices["dispatch_cpu_us"] + work_us(cost, prices)


def work_us(cost: KernelCost, prices: dict[str, float]) -> float:
    """The priced operations of a kernel run (KernelCost.ns), microseconds."""
    return float(design([cost])[0, 1:] @ [prices[f] for f in FIT_FIELDS]) / 1e3


def fit_dispatch(rows: list[dict], prices: dict[str, float], workers: int, workgroup: int) -> dict[str, float]:
    """CostWeights.dispatch_us and wake_us from the runs' wall-clock times: non-negative least
    squares (relative errors above DISPATCH_FLOOR_US, absolute below) of wall = a + c x (busy
    workers - 1) + b x work / busy workers, the cost model's form. dispatch_us = a / b and wake_us
    = c / b are the overheads in the units of the work term (b, wall time per priced microsecond
    and busy worker, is about 1 on a quiet machine, 1.5 on a loaded one: only the ratios matter
    for the choices)."""
    costs = [KernelCost(**r["cost"]) for r in rows]
    spread = np.array([busy(c, workers, workgroup) for c in costs], np.float64)
    work = np.array([work_us(c, prices) for c in costs]) / spread
    wall = np.array([r["wall_us"] for r in rows])
    weight = 1 / np.maximum(wall, DISPATCH_FLOOR_US)
    a, c, b = nnls(np.stack([np.ones(len(rows)), spread - 1, work], 1) * weight[:, None], wall * weight)
    b = max(b, 1e-9)
    return {"dispatch_us": float(a / b), "wake_us": float(c / b), "wall_dispatch_us": float(a),
            "wall_wake_us": float(c), "wall_per_work": float(b)}


def busy(cost: KernelCost, workers: int, workgroup: int) -> int:
    """The workers a kernel keeps busy (as conv_paths.estimate_us counts them)."""
    return max(1, min(workers, -(-cost.invocations // workgroup)))


def prices_of(weights: CostWeights, rows: list[dict]) -> dict[str, float]:
    """CostWeights' prices for predicted_us, with the per-dispatch CPU time that fits `rows` best
    (the median of measured minus priced time): CostWeights has a wall-clock dispatch cost only."""
    prices = {f: getattr(weights, f) for f in FIT_FIELDS}
    if prices["uniform_load_ns"] is None:
        prices["uniform_load_ns"] = prices["load_ns"]
    priced = [work_us(KernelCost(**r["cost"]), prices) for r in rows]
    prices["dispatch_cpu_us"] = max(0.0, statistics.median(r["cpu_us"] - p for r, p in zip(rows, priced)))
    return prices


def errors(rows: list[dict], prices: dict[str, float]) -> dict[str, dict]:
    """Per kernel (and "all"): runs, median measured / predicted, median |relative error|."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        ratio = r["cpu_us"] / predicted_us(KernelCost(**r["cost"]), prices)
        name = r["kernel"].split("/")[-1].replace("_nc4hw4", "").replace(".wgsl", "")
        for key in (f"{name} ({r['weights']})" if r["weights"] == "uniform" else name, "all"):
            groups.setdefault(key, []).append(ratio)
    return {k: {"runs": len(v), "ratio": statistics.median(v), "error": statistics.median(abs(x - 1) for x in v)}
            for k, v in sorted(groups.items())}


def weights_with(prices: dict[str, float], dispatch: dict[str, float], base: CostWeights) -> CostWeights:
    """`base` with the fitted prices and dispatch costs (rounded as CPU_WEIGHTS writes them)."""
    return replace(base, dispatch_us=round(dispatch["dispatch_us"], 1), wake_us=round(dispatch["wake_us"], 1),
                   **{f: round(prices[f], 2) for f in FIT_FIELDS})


def weights_source(weights: CostWeights) -> str:
    """The CostWeights(...) expression of the fitted fields, for conv_paths.CPU_WEIGHTS."""
    fields = ("dispatch_us", "wake_us", *FIT_FIELDS)
    return "CostWeights(" + ", ".join(f"{f}={getattr(weights, f)}" for f in fields) + ")"


def confusion(checks: list[dict], weights: CostWeights) -> dict:
    """The cost model's choice per held-out case against the fastest option by wall time: how many
    right, and per wrong one its measured time over the fastest's."""
    right, wrong = 0, []
    for check in checks:
        options = check["options"]
        adapter = replace(weights, workers=check["workers"], workgroup=check["workgroup"])
        estimates = {n: estimate_us([KernelCost(**k) for k in o["costs"]], adapter) for n, o in options.items()}
        chosen = min(estimates, key=lambda n: (estimates[n], n))
        best = min(options, key=lambda n: options[n]["wall_us"])
        if chosen == best:
            right += 1
        else:
            wrong.append({"case": check["case"], "chosen": chosen, "best": best,
                          "ratio": options[chosen]["wall_us"] / options[best]["wall_us"],
                          "extra_us": options[chosen]["wall_us"] - options[best]["wall_us"]})
    return {"right": right, "cases": len(checks), "wrong": wrong,
            "extra_us": sum(w["extra_us"] for w in wrong),
            "total_best_us": sum(min(o["wall_us"] for o in c["options"].values()) for c in checks)}


# ----------------------------------------------------------------------------- command line
def measure(adapter, *, rounds: int, target_ms: float, count: int, seed: int, check_rounds: int, passes: int = 3,
            quick: bool = False, show_progress: bool = True) -> dict:
    """Timings of the training cases' kernels and the held-out cases' options: `passes` times over
    all of them (a minute or more apart, so that a spell of load on the machine hits one pass),
    pooled by pool()."""
    from ..backends.wgpu.context import get_context
    from ..backends.wgpu.conv_paths import adapter_weights
    from .progress import progress

    cases = fit_cases(seed, count)
    held = holdout_cases()
    if quick:  # a smoke run: a few small shapes
        cases = [c for c in cases if c.macs <= 2e6][:6]
        held = held[:2]
    start = time.perf_counter()
    base = adapter_weights(get_context(adapter))
    runs = []
    with untuned():
        for index in range(passes):
            label = f"pass {index + 1}/{passes}:"
            rows = [row for case in progress(cases, f"{label} kernels", enabled=show_progress)
                    for row in measure_case(case, adapter, rounds=rounds, target_ms=target_ms)]
            checks = [check_case(case, adapter, rounds=check_rounds)
                      for case in progress(held if check_rounds else [], f"{label} held-out paths",
                                           enabled=show_progress)]
            runs.append({"rows": rows, "checks": checks})
    return {**pool(runs), "seconds": time.perf_counter() - start, "workers": base.workers,
            "workgroup": base.workgroup, "options": {"adapter": adapter, "rounds": rounds, "target_ms": target_ms,
                                                     "count": count, "seed": seed, "passes": passes,
                                                     "check_rounds": check_rounds}}


def pool(runs: list[dict]) -> dict:
    """Timings of several runs (passes, or files written by --save) as one: per kernel run and
    per held-out option the medians of its times."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        for r in run["rows"]:
            groups.setdefault((r["case"], r["option"], r["index"], r["bound"]), []).append(r)
    rows = [{**same[0], **{key: statistics.median(r[key] for r in same) for key in ("cpu_us", "wall_us")}}
            for same in groups.values()]
    cases: dict[str, list[dict]] = {}
    for run in runs:
        for c in run.get("checks", []):
            cases.setdefault(c["case"], []).append(c)
    checks = []
    for same in cases.values():
        options = {name: {**option, **{key: statistics.median(c["options"][name][key] for c in same)
                                       for key in ("wall_us", "cpu_us")}}
                   for name, option in same[0]["options"].items()}
        checks.append({**same[0], "options": options})
    pooled = {"rows": rows, "checks": checks}
    for key in ("workers", "workgroup"):
        if key in runs[0]:
            pooled[key] = runs[0][key]
    return pooled


def report(data: dict, current: CostWeights) -> tuple[str, CostWeights]:
    """The text report of measured (or loaded) timings, and the fitted weights."""
    rows = data["rows"]
    prices = fit([KernelCost(**r["cost"]) for r in rows], [r["cpu_us"] for r in rows])
    dispatch = fit_dispatch(rows, prices, data["workers"], data["workgroup"])
    old = prices_of(current, rows)
    new_errors, old_errors = errors(rows, prices), errors(rows, old)
    lines = [f"{len(rows)} kernel timings from {len({r['case'] for r in rows})} conv shapes"
             + (f" in {data['seconds']:.0f} s" if data.get("seconds") else "")
             + f"; {data['workers']} workers, workgroup {data['workgroup']}", "",
             f"{'CPU time per kernel':34s} {'runs':>4s}  {'now: meas/pred':>14s} {'err':>5s}  {'fit: meas/pred':>14s} "
             f"{'err':>5s}"]
    for name, e in new_errors.items():
        o = old_errors[name]
        lines.append(f"{name:34s} {e['runs']:4d}  {o['ratio']:14.2f} {o['error']:5.0%}  {e['ratio']:14.2f} "
                     f"{e['error']:5.0%}")
    fields = ("dispatch_cpu_us", *FIT_FIELDS)
    lines += ["", "prices      " + "  ".join(f"{f:>15s}" for f in fields),
              "now         " + "  ".join(f"{old[f]:15.3f}" for f in fields),
              "fitted      " + "  ".join(f"{prices[f]:15.3f}" for f in fields),
              "", f"wall per dispatch: {dispatch['wall_dispatch_us']:.1f} us + {dispatch['wall_wake_us']:.1f} us per "
                  f"busy worker past the first + {dispatch['wall_per_work']:.2f} x work / busy workers -> "
                  f"dispatch_us {dispatch['dispatch_us']:.1f}, wake_us {dispatch['wake_us']:.1f} "
                  f"(now {current.dispatch_us}, {current.wake_us})"]
    fitted = weights_with(prices, dispatch, current)
    lines += ["", "CPU_WEIGHTS = " + weights_source(fitted)]
    if data.get("checks"):
        for label, weights in (("now", current), ("fitted", fitted)):
            c = confusion(data["checks"], weights)
            lines.append(f"\nheld-out choices ({label}): {c['right']} of {c['cases']} fastest; the wrong ones cost "
                         f"{c['extra_us'] / 1e3:.2f} ms over the fastest options' {c['total_best_us'] / 1e3:.2f} ms "
                         f"({c['extra_us'] / max(c['total_best_us'], 1e-9):.1%})")
            lines += [f"  {w['case']:22s} chose {w['chosen']:18s} fastest {w['best']:18s} x{w['ratio']:.2f}"
                      for w in c["wrong"]]
    return "\n".join(lines), fitted


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.fit_conv_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", default="0", help="GPU adapter (default 0, lavapipe here)")
    parser.add_argument("--rounds", type=int, default=9, help="timed rounds per training shape (default 9)")
    parser.add_argument("--check-rounds", type=int, default=11,
                        help="timed rounds per held-out shape (default 11; 0 skips the check)")
    parser.add_argument("--target-ms", type=float, default=6.0, help="CPU time per timed submission (default 6)")
    parser.add_argument("--count", type=int, default=48, help="3x3 training shapes drawn (default 48)")
    parser.add_argument("--passes", type=int, default=3, help="measure everything this many times (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the drawing (default 0)")
    parser.add_argument("--quick", action="store_true", help="a few small shapes only (a smoke run)")
    parser.add_argument("--save", help="write the timings to this JSON file")
    parser.add_argument("--load", action="append",
                        help="fit timings written by --save instead of measuring (repeatable: pooled)")
    args = parser.parse_args(argv)
    from ..backends.wgpu.conv_paths import CPU_WEIGHTS

    if args.load:
        runs = []
        for name in args.load:
            with open(name) as f:
                runs.append(json.load(f))
        data = pool(runs) if len(runs) > 1 else runs[0]
    else:
        adapter = int(args.adapter) if args.adapter.isdigit() else args.adapter
        data = measure(adapter, rounds=args.rounds, target_ms=args.target_ms, count=args.count, seed=args.seed,
                       check_rounds=args.check_rounds, passes=args.passes, quick=args.quick)
        if args.save:
            with open(args.save, "w") as f:
                json.dump(data, f, indent=1)
    print(report(data, CPU_WEIGHTS)[0])


if __name__ == "__main__":
    main()
