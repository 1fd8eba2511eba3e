"""`wgnn bench --kernels`: what an adapter can do, and how close wgnn's kernels get to it.

Per adapter: the FMA peak (a shader of long chains of independent vec4 FMAs), copy bandwidth (a
shader copying one vec4 per invocation, and copy_buffer_to_buffer), the cost of a dispatch (N empty
dispatches in one compute pass) and micro-benchmarks of wgnn's own kernels run through sessions on
small models (MatMul, Conv 3x3 / 1x1, depthwise; a transformer layer's attention, LayerNorm and
Softmax; a ReduceSum to one output), each as GFLOP/s and a fraction of the measured peak, and GB/s
against the shader copy's bandwidth. GPU times come from timestamp queries where the adapter has
them; otherwise from the wall clock around submit + wait (the result says which). Benchmarks are
tools: nothing here asserts a speed.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from ..engine.errors import WgnnError

FMA_CHAINS = 8  # independent vec4 accumulators per invocation: enough to hide FMA latency


def fma_shader(chains: int) -> str:
    """A shader whose invocations each run `chains` independent chains of vec4 FMAs, params.z steps
    long (each step of a chain waits for the one before)."""
    starts = "\n".join(f"    var x{i} = vec4<f32>(seed + {i / 10});" for i in range(chains))
    steps = "\n".join(f"        x{i} = fma(x{i}, m, c);" for i in range(chains))
    total = " + ".join(f"x{i}" for i in range(chains))
    return f"""
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> params: vec4<f32>;  // x: multiplier, y: addend, z: iterations

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let m = vec4<f32>(params.x);
    let c = vec4<f32>(params.y);
    let seed = f32(gid.x) * 1e-6;
{starts}
    for (var i = 0u; i < u32(params.z); i++) {{
{steps}
    }}
    out[gid.x + gid.y * nwg.x * 64u] = {total};
}}
"""


FMA_SHADER = fma_shader(FMA_CHAINS)
CHAIN_SHADER = fma_shader(1)  # one chain per invocation: how many invocations run at once (concurrency)

COPY_SHADER = """
@group(0) @binding(0) var<storage, read_write> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: vec4<u32>;  // x: vec4 count

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < params.x) {
        dst[i] = src[i];
    }
}
"""
EMPTY_SHADER = "@compute @workgroup_size(64)\nfn main() {\n}\n"


# Sizes by tier: "quick" (smoke tests), "cpu" (CPU adapters such as lavapipe, which take seconds per
# GFLOP) and "gpu" (real GPUs: work enough to fill one, a million invocations for the FMA peak and
# GEMMs up to 4096^3; 64 MiB copies stay within WebGPU's default binding limit of 128 MiB).
SIZES = {
    "quick": {"fma_groups": 32, "fma_iterations": 128, "copy_bytes": 1 << 20, "dispatches": 16,
              "matmul": (32, 64, 128), "conv": (16, 14), "attention": (2, 32, 16), "reduce": 1 << 12},
    "cpu": {"fma_groups": 256, "fma_iterations": 1024, "copy_bytes": 32 << 20, "dispatches": 200,
            "matmul": (256, 512, 1024), "conv": (64, 56), "attention": (12, 128, 64), "reduce": 1 << 20},
    "gpu": {"fma_groups": 16384, "fma_iterations": 1024, "copy_bytes": 64 << 20, "dispatches": 200,
            "matmul": (1024, 2048, 4096), "conv": (128, 56), "attention": (12, 512, 64), "reduce": 1 << 24},
}


def size_tier(quick: bool, adapter_type: str) -> str:
    """The SIZES tier an adapter is measured with."""
    return "quick" if quick else "cpu" if adapter_type == "CPU" else "gpu"


def kernel_cases(tier: str) -> list[dict]:
    """MatMul n^3, Conv 3x3 and 1x1, depthwise 3x3; BERT-base-sized attention (12 heads of 64
    over 128 tokens; 512 on real GPUs), LayerNorm and Softmax rows; a ReduceSum of 2^20 elements
    (2^24 on real GPUs) to one; smaller in the quick tier (SIZES). The last four are where real
    GPUs and CPU adapters run different kernels (docs/gpu-backend.md): WGNN_ATTENTION_VARIANT /
    WGNN_ROW_KERNEL compare them on one adapter."""
    sizes = SIZES[tier]
    c, hw = sizes["conv"]
    cases = [{"case": f"MatMul {n}^3", "op": "MatMul", "a": (n, n), "b": (n, n)} for n in sizes["matmul"]]
    cases.append({"case": f"Conv 3x3 {c}->{c} @{hw}", "op": "Conv", "x": (1, c, hw, hw), "w": (c, c, 3, 3),
                  "attrs": {"pads": [1, 1, 1, 1]}})
    cases.append({"case": f"Conv 1x1 {c}->{4 * c} @{hw}", "op": "Conv", "x": (1, c, hw, hw), "w": (4 * c, c, 1, 1),
                  "attrs": {}})
    d = 4 * c
    cases.append({"case": f"depthwise 3x3 {d} @{hw}", "op": "Conv", "x": (1, d, hw, hw), "w": (d, 1, 3, 3),
                  "attrs": {"pads": [1, 1, 1, 1], "group": d}})
    heads, tokens, head = sizes["attention"]
    cases.append({"case": f"Attention {heads}x{tokens}x{head}", "op": "Attention", "heads": heads, "tokens": tokens,
                  "head": head})
    width = heads * head
    cases.append({"case": f"LayerNorm {tokens}x{width}", "op": "LayerNorm", "x": (tokens, width)})
    cases.append({"case": f"Softmax {heads * tokens}x{tokens}", "op": "Softmax", "x": (heads * tokens, tokens)})
    n = sizes["reduce"]
    cases.append({"case": f"ReduceSum {n}->1", "op": "Reduce", "x": (n,)})
    return cases


CASE_FORMS = {  # a case's name with any sizes: the case (kernel_cases names its cases so)
    r"MatMul (\d+)\^3": lambda n: {"op": "MatMul", "a": (n, n), "b": (n, n)},
    r"Conv (\d+)x\1 (\d+)->(\d+) @(\d+)": lambda k, c, out, hw: {
        "op": "Conv", "x": (1, c, hw, hw), "w": (out, c, k, k), "attrs": {"pads": [k // 2] * 4} if k > 1 else {}},
    r"depthwise (\d+)x\1 (\d+) @(\d+)": lambda k, c, hw: {
        "op": "Conv", "x": (1, c, hw, hw), "w": (c, 1, k, k), "attrs": {"pads": [k // 2] * 4, "group": c}},
    r"Attention (\d+)x(\d+)x(\d+)": lambda heads, tokens, head: {
        "op": "Attention", "heads": heads, "tokens": tokens, "head": head},
    r"LayerNorm (\d+)x(\d+)": lambda rows, width: {"op": "LayerNorm", "x": (rows, width)},
    r"Softmax (\d+)x(\d+)": lambda rows, width: {"op": "Softmax", "x": (rows, width)},
    r"ReduceSum (\d+)->1": lambda n: {"op": "Reduce", "x": (n,)},
}


def case_by_name(name: str) -> dict | None:
    """The case a name such as "Attention 1x4096x64" or "Conv 3x3 32->64 @28" describes (the forms
    of kernel_cases' names, any sizes), or None."""
    import re

    for form, build in CASE_FORMS.items():
        found = re.fullmatch(form, name.strip(), flags=re.IGNORECASE)
        if found:
            return {"case": name.strip(), **build(*(int(size) for size in found.groups()))}
    return None


def case_model(case: dict) -> tuple[bytes, dict[str, np.ndarray]]:
    """The ONNX bytes and feeds of a case: MatMul takes both operands at run time; Conv and
    LayerNorm have their weights as initializers, as in a real model; Attention is the scores
    MatMul, Softmax and context MatMul that the converter fuses."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def value(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    def normal(shape):
        return rng.standard_normal(shape, np.float32)

    op, inits = case["op"], []
    if op == "MatMul":
        feeds = {"a": normal(case["a"]), "b": normal(case["b"])}
        nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    elif op == "Conv":
        w = normal(case["w"]) / math.sqrt(math.prod(case["w"][1:]))
        inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(normal(case["w"][0]), "bias")]
        feeds = {"x": normal(case["x"])}
        nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["y"], kernel_shape=list(case["w"][2:]),
                                  **case["attrs"])]
    elif op == "Attention":
        shape = (1, case["heads"], case["tokens"], case["head"])
        feeds = {name: normal(shape) for name in ("q", "k", "v")}
        inits = [numpy_helper.from_array(np.float32(1 / math.sqrt(case["head"])), "scale")]
        nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                 helper.make_node("MatMul", ["q", "kt"], ["scores"]),
                 helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
                 helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
                 helper.make_node("MatMul", ["probs", "v"], ["y"])]
    elif op == "LayerNorm":
        width = case["x"][-1]
        inits = [numpy_helper.from_array(normal(width), "scale"), numpy_helper.from_array(normal(width), "bias")]
        feeds = {"x": normal(case["x"])}
        nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)]
    elif op == "Softmax":
        feeds = {"x": normal(case["x"])}
        nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    else:  # Reduce
        feeds = {"x": normal(case["x"])}
        nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "bench", [value(name, x.shape) for name, x in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model.SerializeToString(), feeds


class RawGpu:
    """Plain wgpu work on one adapter's device, timed with timestamp queries where possible."""

    def __init__(self, context):
        from ..backends.wgpu.profiler import timestamp_period

        self.context, self.wgpu, self.device = context, context.wgpu, context.device
        self.timestamps = "timestamp-query" in context.features
        self.method = "timestamp-query" if self.timestamps else "wall"
        self.period_ns = timestamp_period(context)
        usage = self.wgpu.BufferUsage
        if self.timestamps:
            self.queries = self.device.create_query_set(type=self.wgpu.QueryType.timestamp, count=2)
            self.resolved = self.device.create_buffer(size=16, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
        self.fence = self.device.create_buffer(size=16, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)

    def buffer(self, size: int, *, uniform: bytes | None = None):
        usage = self.wgpu.BufferUsage
        if uniform is not None:
            buffer = self.device.create_buffer(size=len(uniform), usage=usage.UNIFORM | usage.COPY_DST)
            self.device.queue.write_buffer(buffer, 0, uniform)
            return buffer
        return self.device.create_buffer(size=size, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)

    def pipeline(self, code: str, buffers: list):
        module = self.device.create_shader_module(code=code)
        pipeline = self.device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        if not buffers:
            return pipeline, None
        entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                   for i, b in enumerate(buffers)]
        return pipeline, self.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries)

    def time_ms(self, record) -> float:
        """GPU time of what `record(encoder, timestamp_writes)` encodes: between the start and the
        end timestamp it places (timestamp-query), else the wall time of submit + wait."""
        encoder = self.device.create_command_encoder()
        start = time.perf_counter()
        if self.timestamps:
            record(encoder, self.queries)
            encoder.resolve_query_set(self.queries, 0, 2, self.resolved, 0)
        else:
            record(encoder, None)
        self.device.queue.submit([encoder.finish()])
        if self.timestamps:
            ticks = np.frombuffer(self.device.queue.read_buffer(self.resolved), np.uint64).astype(np.int64)
            return float(ticks[1] - ticks[0]) * self.period_ns / 1e6
        self.device.queue.read_buffer(self.fence)  # waits for the submission (FACTS.md: no work-done wait)
        return (time.perf_counter() - start) * 1e3

    def timed_pass(self, encoder, queries):
        writes = None if queries is None else {"query_set": queries, "beginning_of_pass_write_index": 0,
                                               "end_of_pass_write_index": 1}
        return encoder.begin_compute_pass(timestamp_writes=writes)

    def dispatches(self, pipeline, bind_group, groups: tuple[int, int, int], count: int = 1):
        def record(encoder, queries):
            compute = self.timed_pass(encoder, queries)
            compute.set_pipeline(pipeline)
            if bind_group is not None:
                compute.set_bind_group(0, bind_group)
            for _ in range(count):
                compute.dispatch_workgroups(*groups)
            compute.end()

        return record

    def grid(self, invocations: int) -> tuple[int, int, int]:
        groups = -(-invocations // 64)
        most = self.context.limits.get("max-compute-workgroups-per-dimension", 65535)
        return (groups, 1, 1) if groups <= most else (most, -(-groups // most), 1)


def _times(measure, repeat: int) -> tuple[float, float]:
    """(median, min) ms of `repeat` measurements, after one untimed (a pipeline's first submission
    pays for its setup)."""
    measure()
    samples = [measure() for _ in range(repeat)]
    return statistics.median(samples), min(samples)


def fma_peak(gpu: RawGpu, sizes: dict, repeat: int) -> dict:
    groups, iterations = sizes["fma_groups"], sizes["fma_iterations"]
    invocations = groups * 64
    out = gpu.buffer(invocations * 16)
    params = gpu.buffer(16, uniform=np.array([0.999, 1e-3, iterations, 0], np.float32).tobytes())
    pipeline, bind_group = gpu.pipeline(FMA_SHADER, [out, params])
    median, best = _times(lambda: gpu.time_ms(gpu.dispatches(pipeline, bind_group, (groups, 1, 1))), repeat)
    flops = invocations * iterations * FMA_CHAINS * 4 * 2
    # A peak is the best run: on a shared machine the median mostly measures the other jobs.
    return {"ms": best, "median_ms": median, "flops": flops, "gflops": flops / best / 1e6,
            "median_gflops": flops / median / 1e6, "invocations": invocations, "iterations": iterations}


def concurrency(gpu: RawGpu, sizes: dict, repeat: int) -> dict:
    """How many invocations a GPU runs at once, as the chain cost model counts them
    (backends/wgpu/conv_paths.py CostWeights.concurrency, fitted to 32768 on an H200): one chain
    of dependent FMAs per invocation, timed at iterations L and 2L for 64, 128, ... invocations (up
    to the FMA peak's), the best of the runs each (noise only adds time), so that the extra L
    steps' time excludes the dispatch's fixed cost. Up to
    the GPU's concurrency that time stays one chain's; past it, it grows with the invocations.
    Estimate: the best invocations per chain time, times one workgroup's chain time."""
    iterations = sizes["fma_iterations"]
    most = sizes["fma_groups"] * 64
    out = gpu.buffer(most * 16)
    pipelines = []
    for steps in (iterations, 2 * iterations):
        params = gpu.buffer(16, uniform=np.array([0.999, 1e-3, steps, 0], np.float32).tobytes())
        pipelines.append(gpu.pipeline(CHAIN_SHADER, [out, params]))
    curve = []
    invocations = 64
    while invocations <= most:
        groups = (invocations // 64, 1, 1)
        short, long = (_times(lambda p=p, b=b, g=groups: gpu.time_ms(gpu.dispatches(p, b, g)), repeat)[1]
                       for p, b in pipelines)
        # More invocations never take less time: noise that says so is held at the last point.
        floor = curve[-1]["chain_us"] if curve else 1e-3
        curve.append({"invocations": invocations, "chain_us": max((long - short) * 1e3, floor)})
        invocations *= 2
    best = max(point["invocations"] / point["chain_us"] for point in curve)
    return {"invocations": round(best * curve[0]["chain_us"]), "iterations": iterations, "curve": curve}


def copy_bandwidth(gpu: RawGpu, sizes: dict, repeat: int) -> dict:
    nbytes = sizes["copy_bytes"]
    src, dst = gpu.buffer(nbytes), gpu.buffer(nbytes)
    gpu.device.queue.write_buffer(src, 0, np.arange(nbytes // 4, dtype=np.float32).tobytes())
    params = gpu.buffer(16, uniform=np.array([nbytes // 16, 0, 0, 0], np.uint32).tobytes())
    pipeline, bind_group = gpu.pipeline(COPY_SHADER, [src, dst, params])
    shader_ms = _times(lambda: gpu.time_ms(gpu.dispatches(pipeline, bind_group, gpu.grid(nbytes // 16))), repeat)
    if not np.array_equal(np.frombuffer(gpu.device.queue.read_buffer(dst, 0, 64), np.float32), np.arange(16)):
        raise WgnnError(f"the copy shader gave wrong data on {gpu.context.name}")

    def buffer_copy(encoder, queries):
        # Timestamps of two empty passes around the copy: a timestamp outside passes needs a
        # feature the device is not opened with.
        if queries is not None:
            encoder.begin_compute_pass(timestamp_writes={"query_set": queries, "end_of_pass_write_index": 0}).end()
        encoder.copy_buffer_to_buffer(src, 0, dst, 0, nbytes)
        if queries is not None:
            writes = {"query_set": queries, "beginning_of_pass_write_index": 1}
            encoder.begin_compute_pass(timestamp_writes=writes).end()

    copy_ms = _times(lambda: gpu.time_ms(buffer_copy), repeat)
    moved = 2 * nbytes  # read + write; the best run, as for the FMA peak

    def rates(times):
        return {"ms": times[1], "median_ms": times[0], "gbps": moved / times[1] / 1e6,
                "median_gbps": moved / times[0] / 1e6}

    return {"bytes": nbytes, "shader_vec4": rates(shader_ms), "copy_buffer_to_buffer": rates(copy_ms)}


def dispatch_cost(gpu: RawGpu, sizes: dict, repeat: int) -> dict:
    """GPU time per extra empty dispatch in one pass, and the Python-side encoding cost."""
    count = sizes["dispatches"]
    pipeline, _ = gpu.pipeline(EMPTY_SHADER, [])
    one = _times(lambda: gpu.time_ms(gpu.dispatches(pipeline, None, (1, 1, 1), 1)), repeat)[0]
    many = _times(lambda: gpu.time_ms(gpu.dispatches(pipeline, None, (1, 1, 1), count)), repeat)[0]
    encoder = gpu.device.create_command_encoder()
    compute = encoder.begin_compute_pass()
    start = time.perf_counter()
    for _ in range(count):
        compute.set_pipeline(pipeline)
        compute.dispatch_workgroups(1, 1, 1)
    encode_us = (time.perf_counter() - start) * 1e6 / count
    compute.end()
    gpu.device.queue.submit([encoder.finish()])
    return {"dispatches": count, "us_per_dispatch": max(0.0, (many - one) * 1e3 / (count - 1)),
            "one_dispatch_ms": one, "encode_us_per_dispatch": encode_us}


def kernel_case(case: dict, adapter: int, warmup: int, runs: int) -> dict:
    """One case through a wgnn session on the GPU, the op's own steps timed by the profiler."""
    from ..engine.config import Config
    from ..engine.interpreter import Interpreter
    from ..engine.session import Session

    data, feeds = case_model(case)
    session = Session(Interpreter(data), Config(providers=("wgpu", "numpy"), adapter=adapter))
    session.resize({k: v.shape for k, v in feeds.items()})
    session.wait_background()
    fallbacks = session.report()["fallbacks"]
    if fallbacks:
        raise WgnnError(f"ran on the CPU: {fallbacks[0]['reasons']}")
    for _ in range(max(1, warmup)):
        session.run(feeds)
    backend = next(b for b in session.backends if hasattr(b, "enable_profiling"))
    steps = [(step, ex) for s in session.segments for step, ex in s.steps]
    profiler = backend.enable_profiling(len(steps))
    op_ms, all_ms, wall = [], [], []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            session.run(feeds)
            wall.append((time.perf_counter() - start) * 1e3)
            for record in profiler.take():
                if record["method"] != "timestamp-query":
                    op_ms.append(record["wall_ms"])
                    all_ms.append(record["wall_ms"])
                    continue
                times = [(s, e - b) for s, _, b, e in record["steps"] if b is not None]
                op_ms.append(sum(t for s, t in times if s.op.op_type == case["op"]))
                all_ms.append(sum(t for _, t in times))
    finally:
        backend.disable_profiling()
    main = [step for step, _ in steps if step.op.op_type == case["op"]]
    flops = sum(int(s.flops) for s in main)
    nbytes = sum(x.nbytes for s in main for x in list(s.input_specs) + list(s.output_specs) if x is not None)
    ms, best = statistics.median(op_ms), min(op_ms)
    dispatches = [(step, d.kernel.path) for step, ex in steps for d in getattr(ex, "dispatches", [])]
    return {"case": case["case"], "op": case["op"], "ms": ms, "min_ms": best, "best_gflops": flops / best / 1e6,
            "gpu_ms_all_steps": statistics.median(all_ms),
            "wall_ms": statistics.median(wall), "flops": flops, "bytes": nbytes, "gflops": flops / ms / 1e6,
            "gbps": nbytes / ms / 1e6, "kernels": [path for step, path in dispatches if step.op.op_type == case["op"]],
            "dispatches": len(dispatches), "method": profiler.method}


def bench_adapter(adapter: int, *, quick: bool = False, warmup: int = 1, runs: int = 5, show_progress: bool = True,
                  cases: list[str] | None = None) -> dict:
    """Every measurement on one adapter (index); `cases` filters the kernel cases by name."""
    from ..backends.wgpu.context import get_context, lavapipe_threads
    from .progress import progress

    context = get_context(adapter)
    gpu = RawGpu(context)
    repeat = max(3, runs)
    tier = size_tier(quick, context.info.adapter_type)
    sizes = SIZES[tier]
    result = {"adapter": context.name, "index": context.index, "adapter_type": context.info.adapter_type,
              "lavapipe_threads": lavapipe_threads(context.info), "method": gpu.method, "sizes": tier,
              "fma": fma_peak(gpu, sizes, repeat), "copy": copy_bandwidth(gpu, sizes, repeat),
              "dispatch": dispatch_cost(gpu, sizes, repeat), "concurrency": concurrency(gpu, sizes, repeat),
              "kernels": []}
    peak = result["fma"]["gflops"]
    bandwidth = result["copy"]["shader_vec4"]["gbps"]
    for case in progress(chosen_cases(tier, cases), f"kernels on {context.index}", enabled=show_progress):
        try:
            row = kernel_case(case, context.index, warmup, runs)
        except WgnnError as exc:
            result["kernels"].append({"case": case["case"], "op": case["op"], "error": str(exc)})
            continue
        # Roofline: below the adapter's balance (peak FLOP/s per copy byte/s) the op is bound by memory.
        row["memory_bound"] = row["flops"] / max(row["bytes"], 1) < peak / bandwidth
        row["peak_fraction"] = row["gflops"] / peak
        row["bandwidth_fraction"] = row["gbps"] / bandwidth
        result["kernels"].append(row)
    return result


def chosen_cases(tier: str, names: list[str] | None) -> list[dict]:
    """The tier's cases whose name contains one of `names` (all without names); a name that matches
    none of them but describes a case (case_by_name) is that case."""
    cases = kernel_cases(tier)
    if names is None:
        return cases
    chosen = [c for c in cases if any(n.lower() in c["case"].lower() for n in names)]
    for name in names:
        if not any(name.lower() in c["case"].lower() for c in cases):
            case = case_by_name(name)
            if case is None:
                forms = ", ".join(c["case"] for c in cases)
                raise WgnnError(f"--case {name!r}: no kernel case is named so, and it does not describe one "
                                f"(the forms: {forms}, with any sizes)")
            chosen.append(case)
    return chosen


def alternate(adapter: int, names: list[str], variable: str, values: list[str], *, rounds: int = 4,
              quick: bool = False, warmup: int = 1, runs: int = 5, show_progress: bool = True) -> dict:
    """Each case with the environment variable `variable` at each of `values` in turn ("": unset),
    in `rounds` rounds, so that every value runs beside the others: on an H200 the same work's GPU
    time changed up to 5x between rounds seconds apart while the ratios between values held. Per
    value: the GPU ms of each round, and the median over rounds of its ratio to the first value's
    time in the same round. The variable takes effect where wgnn reads it, when a session prepares."""
    import os

    from ..backends.wgpu.context import get_context
    from .progress import progress

    context = get_context(adapter)
    cases = chosen_cases(size_tier(quick, context.info.adapter_type), names)
    saved = os.environ.get(variable)
    table = {(case["case"], value): {"value": value, "ms": [], "kernels": []} for case in cases for value in values}
    try:
        for _ in progress(range(rounds), f"{variable} on {context.index}", enabled=show_progress):
            for case in cases:
                for value in values:
                    if value:
                        os.environ[variable] = value
                    else:
                        os.environ.pop(variable, None)
                    entry = table[(case["case"], value)]
                    try:
                        row = kernel_case(case, context.index, warmup, runs)
                    except WgnnError as exc:
                        entry["error"] = str(exc)
                        continue
                    entry["ms"].append(row["ms"])
                    entry["kernels"] = list(dict.fromkeys(row["kernels"]))
    finally:
        if saved is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = saved
    result = {"adapter": context.name, "index": context.index, "variable": variable, "values": values,
              "rounds": rounds, "runs": runs, "cases": []}
    for case in cases:
        first = table[(case["case"], values[0])]["ms"]
        settings = []
        for value in values:
            entry = table[(case["case"], value)]
            times = entry["ms"]
            if times:
                entry["median_ms"] = statistics.median(times)
                if len(first) == len(times) and "error" not in table[(case["case"], values[0])]:
                    entry["ratio"] = statistics.median(t / f for t, f in zip(times, first))
            settings.append(entry)
        result["cases"].append({"case": case["case"], "op": case["op"], "settings": settings})
    return result


def format_alternate(result: dict) -> str:
    from .cli import table

    variable, first = result["variable"], result["values"][0]
    rows = []
    for case in result["cases"]:
        for entry in case["settings"]:
            setting = f"{variable}={entry['value']}" if entry["value"] else f"{variable} unset"
            if "error" in entry:
                rows.append([case["case"], setting, "error: " + entry["error"], "", "", ""])
                continue
            ratio = f"x{entry['ratio']:.2f}" if "ratio" in entry else "-"
            rows.append([case["case"], setting, f"{entry['median_ms']:.3f}",
                         " ".join(f"{t:.3f}" for t in entry["ms"]), ratio, ", ".join(entry["kernels"])])
    against = f"{variable}={first}" if first else f"{variable} unset"
    return "\n".join([f"adapter {result['index']}: {result['adapter']}", "",
                      table(["case", "setting", "median ms", "ms per round", f"vs {against}", "kernel"], rows), "",
                      f"GPU ms of the op's own steps (median of {result['runs']} runs), each value in turn in "
                      f"each of {result['rounds']} rounds; vs: the median over rounds of the time over the "
                      f"first value's in the same round."])


def bench_kernels(adapters: list[int], **options) -> dict:
    """`wgnn bench --kernels` on each adapter index in turn."""
    return {"quick": bool(options.get("quick")), "runs": options.get("runs", 5),
            "adapters": [bench_adapter(index, **options) for index in adapters]}


def format_kernels(result: dict) -> str:
    from .cli import table

    lines = []
    for entry in result["adapters"]:
        fma, copy, dispatch = entry["fma"], entry["copy"], entry["dispatch"]
        timing = ("GPU timestamp queries" if entry["method"] == "timestamp-query"
                  else "wall clock around submit + wait (no timestamp-query)")
        threads = entry.get("lavapipe_threads")
        workers = f", {threads} lavapipe worker threads" if threads is not None else ""
        lines += [f"adapter {entry['index']}: {entry['adapter']} [{entry['adapter_type']}{workers}]   timing: {timing}"
                  f"   sizes: {entry['sizes']}",
                  f"  FMA peak: {fma['gflops']:.1f} GFLOP/s, median {fma['median_gflops']:.1f} "
                  f"({fma['invocations']} invocations x {fma['iterations']} x {FMA_CHAINS} vec4 FMAs, best "
                  f"{fma['ms']:.2f} ms)",
                  f"  copy bandwidth (read + write, {copy['bytes'] >> 10} KiB): shader vec4 "
                  f"{copy['shader_vec4']['gbps']:.2f} GB/s (median {copy['shader_vec4']['median_gbps']:.2f}), "
                  f"copy_buffer_to_buffer {copy['copy_buffer_to_buffer']['gbps']:.2f} GB/s "
                  f"(median {copy['copy_buffer_to_buffer']['median_gbps']:.2f})",
                  f"  dispatch: {dispatch['us_per_dispatch']:.1f} us per empty dispatch on the GPU "
                  f"({dispatch['dispatches']} in one pass), encoding {dispatch['encode_us_per_dispatch']:.1f} us "
                  "in Python",
                  f"  concurrency: about {entry['concurrency']['invocations']} invocations at once (chains of "
                  f"{entry['concurrency']['iterations']} dependent FMAs: "
                  + ", ".join(f"{p['invocations']} in {p['chain_us']:.1f} us" for p in entry["concurrency"]["curve"])
                  + ")", ""]
        rows = []
        for row in entry["kernels"]:
            if "error" in row:
                rows.append([row["case"], "error: " + row["error"], "", "", "", "", "", "", "", ""])
                continue
            rows.append([row["case"], f"{row['ms']:.3f}", f"{row['min_ms']:.3f}", f"{row['gflops']:.2f}",
                         f"{100 * row['peak_fraction']:.1f}",
                         f"{row['gbps']:.2f}", f"{100 * row['bandwidth_fraction']:.1f}",
                         "memory" if row["memory_bound"] else "compute", ", ".join(dict.fromkeys(row["kernels"])),
                         str(row["dispatches"])])
        lines.append(table(["case", "ms", "min ms", "GFLOP/s", "% peak", "GB/s", "% copy", "bound", "kernel",
                            "dispatches"], rows))
        lines.append("")
    lines.append(f"Peaks and bandwidths are the best of their runs. ms: median (and min) GPU time of the op's "
                 f"own steps over {result['runs']} runs (layout conversions, counted in dispatches, excluded); "
                 "GFLOP/s and GB/s from the median. GFLOP/s counts the direct algorithm's FLOPs, so a Winograd "
                 "conv can pass 100% of the peak. GB/s counts the op's inputs, weights and outputs once. bound: "
                 "roofline against the measured FMA peak and shader copy bandwidth.")
    return "\n".join(lines)


def parse_adapters(choice: str | None) -> list[int]:
    """--adapter for --kernels: an index or name as elsewhere, a comma list, or "all"."""
    from ..backends.wgpu.context import adapters, select_adapter

    if choice is None:
        return [select_adapter(None)]
    if choice.strip().lower() == "all":
        found = [a.index for a in adapters()]
        if not found:
            raise WgnnError("no GPU adapter found (on Linux install mesa-vulkan-drivers for lavapipe)")
        return found
    return list(dict.fromkeys(select_adapter(part.strip()) for part in choice.split(",") if part.strip()))
