"""Conv paths side by side on one GPU adapter: `python -m wgnn.tools.bench_conv`.

Times single-Conv models (conv 3x3 64->64, conv 1x1 64->256 and depthwise 3x3 256 on 1 x C x 56 x 56,
depthwise 3x3 stride 2 96 on 1 x 96 x 112 x 112, by default) before issue 4's conv work ("baseline":
the direct path through the kernels it had then, no residual-Add fusion), with each conv path that
can run them forced in turn through WGNN_CONV_PATH (direct, gemm1x1, winograd2, winograd4) and with
auto (the cost model's choice), then zoo models before and after, all in one process: median
wall-clock and process CPU time of timed runs after warm-up, the Conv steps' GPU time (timestamp
queries, profiled runs) with GFLOP/s, dispatches per run and the conv paths (and direct kernels)
taken.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..backends.wgpu.conv_paths import PATH_ENV

PATHS = ("baseline", "auto", "direct", "gemm1x1", "winograd2", "winograd4")
NEW_DIRECT_KERNELS = ("conv/conv4_nc4hw4.wgsl", "conv/depthwise3x3_nc4hw4.wgsl", "conv/depthwise3x3s2_nc4hw4.wgsl")
# name: (C_in, C_out, kernel, stride, group, size)
CASES = {
    "conv3x3_64_64_56": (64, 64, 3, 1, 1, 56),
    "conv1x1_64_256_56": (64, 256, 1, 1, 1, 56),
    "dw3x3_256_56": (256, 256, 3, 1, 256, 56),
    "dw3x3s2_96_112": (96, 96, 3, 2, 96, 112),  # MobileNetV2's first stride-2 depthwise conv
}
ZOO_MODELS = ("mobilenetv2", "resnet")


def conv_model(cin: int, cout: int, k: int, stride: int, group: int, size: int):
    """A one-Conv ONNX model with random weights and bias, input [1, cin, size, size]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin // group * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[stride, stride],
                            pads=[k // 2] * 4, group=group)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, cin, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def applicable(path: str, cin: int, cout: int, k: int, stride: int, group: int, size: int) -> bool:
    if path == "gemm1x1":
        return k == 1 and stride == 1 and group == 1
    if path.startswith("winograd"):
        return k == 3 and stride == 1 and group == 1
    return True


def measure(path: str, config, *, warmup: int, runs: int) -> dict:
    """Median wall-clock and process CPU time of `runs` timed runs after `warmup` (CPU time counts
    lavapipe's worker threads: on a busy machine it stays close to the work done while wall time
    does not), then the Conv steps' GPU time (sum of their per-op medians over `runs` profiled runs)."""
    from ..engine.interpreter import Interpreter
    from ..engine.session import Session
    from .bench import _profile
    from .cli import random_feeds, resolve_shapes

    interp = Interpreter(path)
    shapes = resolve_shapes(interp.graph.inputs, {})
    feeds = random_feeds(interp.graph.inputs, shapes, 0)
    session = Session(interp, config)
    session.resize(shapes)
    session.wait_background()
    for _ in range(warmup):
        session.run(feeds)
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        session.run(feeds)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    rows = _profile(session, feeds, runs, False)["per_op"]["rows"]
    convs = [r for r in rows if r["op_type"].split(".")[0] == "Conv"]
    conv_ms = sum(r["median_ms"] for r in convs)
    flops = sum(int(step.flops) for step in session.steps if step.op.op_type == "Conv")
    executions = [ex for segment in session.segments for _, ex in segment.steps]
    return {"latency_ms": statistics.median(wall), "cpu_ms": statistics.median(cpu), "conv_ms": conv_ms,
            "conv_gflops": flops / conv_ms / 1e6 if conv_ms else None,
            "dispatches": sum(len(getattr(ex, "dispatches", ())) for ex in executions),
            "fallbacks": len(session.report()["fallbacks"]),
            "paths": dict(Counter(path_label(ex) for ex in executions if type(ex).__name__ == "ConvGpu"))}


def path_label(execution) -> str:
    """The path, and for the direct path its kernel: "direct:conv4", "winograd4", ..."""
    if execution.path != "direct" or not execution.dispatches:
        return execution.path
    kernel = execution.dispatches[0].kernel.path
    return "direct:" + kernel.split("/")[-1].replace("_nc4hw4.wgsl", "").replace(".wgsl", "")


@contextmanager
def baseline():
    """The state before issue 4's conv work: the direct path everywhere through the kernels it had
    then (one output slice per invocation; depthwise by row segments), and no residual-Add fusion
    (the converter's pass list without fold_residual_add)."""
    from ..backends.wgpu import conv_paths
    from .convert import fusion

    saved = fusion.FUSION_PASSES, os.environ.get(PATH_ENV), conv_paths.direct_variants

    def old_kernels(*args):
        return {k: v for k, v in saved[2](*args).items() if k not in NEW_DIRECT_KERNELS}

    fusion.FUSION_PASSES = tuple(p for p in saved[0] if p is not fusion.fold_residual_add)
    conv_paths.direct_variants = old_kernels
    os.environ[PATH_ENV] = "direct"
    try:
        yield
    finally:
        fusion.FUSION_PASSES, conv_paths.direct_variants = saved[0], saved[2]
        _restore(saved[1])


def _restore(value: str | None) -> None:
    if value is None:
        os.environ.pop(PATH_ENV, None)
    else:
        os.environ[PATH_ENV] = value


def run(cases: list[str], paths: list[str], zoo: list[str], *, adapter, warmup: int, runs: int,
        zoo_options: dict | None = None) -> list[dict]:
    import onnx

    from ..engine.config import Config
    from ..models.zoo import build

    config = Config(providers=("wgpu", "numpy"), adapter=adapter)
    saved = os.environ.get(PATH_ENV)
    results = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in cases:
                file = Path(tmp) / f"{name}.onnx"
                onnx.save(conv_model(*CASES[name]), file)
                for path in paths:
                    if not applicable(path, *CASES[name]):
                        continue
                    if path == "baseline":
                        with baseline():
                            row = measure(str(file), config, warmup=warmup, runs=runs)
                    else:
                        os.environ[PATH_ENV] = path
                        row = measure(str(file), config, warmup=warmup, runs=runs)
                    results.append({"case": name, "path": path, **row})
            for name in zoo:
                file = Path(tmp) / f"{name}.onnx"
                onnx.save(build(name, **(zoo_options or {})), file)
                with baseline():
                    row = measure(str(file), config, warmup=warmup, runs=runs)
                results.append({"case": f"zoo:{name}", "path": "baseline", **row})
                os.environ[PATH_ENV] = "auto"
                results.append({"case": f"zoo:{name}", "path": "auto", **measure(str(file), config, warmup=warmup,
                                                                                  runs=runs)})
    finally:
        _restore(saved)
    return results


def table(results: list[dict]) -> str:
    head = ["case", "path", "wall ms", "CPU ms", "conv GPU ms", "GFLOP/s", "dispatches", "conv paths taken"]
    lines = []
    for r in results:
        gflops = f"{r['conv_gflops']:.2f}" if r["conv_gflops"] else "-"
        paths = " ".join(f"{k}x{v}" if v > 1 else k for k, v in sorted(r["paths"].items()))
        lines.append([r["case"], r["path"], f"{r['latency_ms']:.3f}", f"{r['cpu_ms']:.3f}", f"{r['conv_ms']:.3f}",
                      gflops, str(r["dispatches"]), paths])
    widths = [max(len(h), *(len(row[i]) for row in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [fmt.format(*row) for row in lines])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.bench_conv", description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="conv case (repeatable; default all)")
    parser.add_argument("--path", action="append", choices=PATHS, help="conv path (repeatable; default all)")
    parser.add_argument("--zoo", action="append", choices=ZOO_MODELS, help="zoo model (repeatable; default all)")
    parser.add_argument("--no-zoo", action="store_true", help="skip the zoo models")
    parser.add_argument("--size", type=int, help="zoo models' input size (default: the zoo's, 32)")
    parser.add_argument("--width", type=int, help="zoo models' base channel count (default: the zoo's, 16)")
    parser.add_argument("--adapter", default="0", help="GPU adapter (default 0)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument("--runs", type=int, default=10, help="timed and profiled runs (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    adapter = int(args.adapter) if args.adapter.isdigit() else args.adapter
    zoo = [] if args.no_zoo else (args.zoo or list(ZOO_MODELS))
    options = {k: v for k, v in (("size", args.size), ("width", args.width)) if v}
    results = run(args.case or list(CASES), args.path or list(PATHS), zoo, adapter=adapter,
                  warmup=args.warmup, runs=args.runs, zoo_options=options)
    print(json.dumps(results, indent=1) if args.json else table(results))


if __name__ == "__main__":
    main()
