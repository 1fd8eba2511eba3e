"""wgnn's speed and conformance checks on a real GPU in one run, for a machine with a GPU driver
that is lent for minutes (as the project's `device` tool lends one): the kernel micro-benchmarks
as fractions of the measured peak, the zoo models' latency and per-op GPU time at 32x32 and
224x224, the peers side by side on the same GPU, what `wgnn tune` measures there, conformance on
that GPU, and the choices whose real-GPU rules are estimates, each forced in turn (KNOBS). Every
step runs in a subprocess under its share of a time budget, so a step that hangs or crashes costs
its own figures only.

    python -m wgnn.tools.gpu_check --out DIR [--adapter A] [--budget SECONDS] [--quick]
    bash tools/gpu_check.sh        # on the lent machine: installs what was carried, then the above

DIR receives (at most 8 files, as many as the device tool brings back):
    report.md               the summary (GEMM's share of the FMA peak and of the datasheet's,
                            model medians, the peers' ratios, what tune chose, conformance
                            counts, the forced choices), then each step's command, status, time
                            and output
    kernels.json            `wgnn bench --kernels --json`
    bench.json              `wgnn bench MODEL --per-op --json` of each zoo model and size, and of the
                            issue's transformer encoder at 128 tokens
    peers.md                `python -m wgnn.tools.peers` tables, 32x32 then 224x224
    tune.json               `wgnn tune --json` (storage, workgroup sizes, kernel variants, providers)
    knobs.json              `wgnn bench` of a model or kernel with each value of a choice forced (KNOBS),
                            each followed by the same run unforced (its "baseline_for" names the knob);
                            first, Attention's split keys on several shapes, every value side by side
                            in rounds (`wgnn bench --kernels --alternate`; under "alternate")
    conform/conform.json    `wgnn conform`'s report (its HTML page is left out: the JSON holds it)
--quick runs small sizes and few runs (seconds on lavapipe: what the tests run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CLI = [sys.executable, "-m", "wgnn.tools.cli"]
PEERS = [sys.executable, "-m", "wgnn.tools.peers"]
CNNS = ("mobilenetv2", "resnet", "unet")
# The transformer encoder (docs/performance.md): 4 layers, d=256, 4 heads, 128 tokens.
ENCODER = {"hidden": 256, "heads": 4, "layers": 4, "ffn": 1024, "max_positions": 128, "batch": 1, "seq": 128}
DEFAULT_BUDGET_S = 480  # the device tool's 10-minute command limit, less setup and transfers
# The choices whose rules for real GPUs are estimates, not measurements (docs/gpu-backend.md): each
# forced in turn on the model where it matters, for the numbers that would set those rules.
# A target is a zoo model and size, or ("kernels", a `wgnn bench --kernels` case on real GPUs' sizes);
# --quick runs the first knob of each variable, on the zoo's size or the quick kernel sizes.
KNOBS = [({"WGNN_DWPW_BLOCK": block}, ("mobilenetv2", 224)) for block in ("2x4", "2x2", "1x2", "1x1")] + [
    ({"WGNN_DWPW_GROUPS": groups}, ("mobilenetv2", size)) for size in (224, 32) for groups in ("1", "4")] + [
    ({"WGNN_CONV_PATH": path}, ("resnet", 224))
    for path in ("direct", "gemm1x1", "winograd2", "winograd4", "tiled")] + [
    ({"WGNN_CONV_PATH": path}, ("resnet", 32)) for path in ("winograd2", "tiled")] + [
    # The chain rules' earlier choices: 8 pixels per ConvPw invocation, balanced ConvMaxPool slices,
    # a GlobalPool invocation per slice.
    ({"WGNN_CONVPW_PIXELS": "8", "WGNN_CONVPOOL_SLICES": "balanced"}, ("unet", size)) for size in (224, 32)] + [
    ({"WGNN_ROW_KERNEL": "invocation"}, ("resnet", 224))] + [
    ({"WGNN_CONV_PATH": path}, ("kernels", "Conv 3x3 128->128 @56")) for path in ("direct", "tiled")] + [
    ({"WGNN_MATMUL_VARIANT": "tiled", "WGNN_MATMUL_TILE": tile}, ("kernels", "MatMul 4096^3"))
    for tile in ("32", "128")] + [
    ({"WGNN_CONV_WEIGHTS": placement}, ("mobilenetv2", 224)) for placement in ("storage", "uniform")] + [
    # Split keys (the rule's 4 splits of 128 here) against whole keys and the first rule's 64-key
    # splits; the encoder's attention over 128 keys whole (the rule splits it in eight).
    ({"WGNN_ATTENTION_SPLIT": split}, ("kernels", "Attention 12x512x64")) for split in ("0", "64")] + [
    ({"WGNN_ATTENTION_SPLIT": "0"}, ("encoder", 128))] + [
    # 16-bit feature maps, and 16-bit arithmetic where the GPU has shader-f16: not yet measured on one.
    # A setting named "--flag" is a `wgnn bench` option rather than a variable.
    ({"--precision": precision}, (name, 224)) for name in ("mobilenetv2", "resnet")
    for precision in ("fp16", "fp16-arith")] + [
    # Polling for the outputs before waiting, done on lavapipe without workers only: whether a small
    # model's latency (not its GPU time) gains on a real GPU too.
    ({"WGNN_READBACK_SPIN_US": "1000"}, (name, 32)) for name in ("mobilenetv2", "resnet")]
# Attention's split keys across shapes, every value side by side in rounds (`wgnn bench --kernels
# --alternate`): the rule's split (unset) against whole keys and fixed splits, for the data that set
# split_keys's constants (docs/gpu-backend.md, "Split keys").
SPLIT_CASES = ("Attention 12x512x64", "Attention 4x128x64", "Attention 1x4096x64", "Attention 32x256x64",
               "Attention 12x512x128")
SPLIT_VALUES = "WGNN_ATTENTION_SPLIT=,0,32,64,128,256"
# A kernel knob's case in the quick check: the quick tier's case of the same op.
QUICK_KERNEL_CASES = {"MatMul": "MatMul 128^3", "Conv": "Conv 3x3 16->16 @14", "Attention": "Attention 2x32x16"}
GATHERED = ("bench.json", "knobs.json")  # result files of several steps (write_results)
OUTPUT_CHARS = 6000  # of a step's output kept in report.md (the tail)
MIN_STEP_S = 5.0  # a step is not started with less time than this left


@dataclass
class Step:
    name: str
    argv: list[str]
    share: float  # of the budget, at most (unused time passes to later steps)
    json_file: str = ""  # stdout is the step's JSON result, kept in this file of the output folder
    env: dict[str, str] = field(default_factory=dict)  # set for this step's process
    setting: str = ""  # a knob's forced choice: VARIABLE=VALUE or --option=VALUE, space-separated
    baseline_for: str = ""  # the setting of the knob step just before, which this step runs unforced
    status: int | None = None
    seconds: float = 0.0
    output: str = ""
    result: dict | list | None = field(default=None, repr=False)


def zoo_files(folder: Path, sizes: tuple[int, ...]) -> dict[tuple[str, int], Path]:
    """The zoo models as .onnx files: bert, and the CNNs at each size (the zoo's own size is 32);
    with 224 among the sizes, also the issue's transformer encoder at its 128 tokens ("encoder")."""
    import onnx

    from ..models import zoo

    files = {("bert", 8): folder / "bert.onnx"}
    onnx.save(zoo.build("bert"), files[("bert", 8)])
    for name in CNNS:
        for size in sizes:
            files[(name, size)] = folder / f"{name}_{size}.onnx"
            onnx.save(zoo.build(name, size=size), files[(name, size)])
    if 224 in sizes:
        files[("encoder", 128)] = folder / "encoder_128.onnx"
        onnx.save(zoo.build("bert", **ENCODER), files[("encoder", 128)])
    return files


def plan(out: Path, models: dict[tuple[str, int], Path], adapter: str | None, quick: bool) -> list[Step]:
    """The steps, most wanted first (the budget may run out before the last). adapter None: wgnn's
    default choice (a discrete GPU first) for the benchmarks, the Vulkan adapters for conformance
    (OpenGL's through EGL would double its time)."""
    target = ["--adapter", adapter] if adapter else []
    runs = ["--runs", "3" if quick else "50"]
    quick_flag = ["--quick"] if quick else []
    steps = [Step("adapters", [*CLI, "adapters"], 0.02),
             Step("kernels", [*CLI, "bench", "--kernels", *target, "--json", *quick_flag], 0.13,
                  json_file="kernels.json")]
    for (name, size), path in models.items():
        model_runs = runs if size <= 32 or quick else ["--runs", "20"]
        steps.append(Step(f"bench {name} {size}", [*CLI, "bench", str(path), "--provider", "wgpu", *target,
                                                    *model_runs, "--per-op", "--json"], 0.04, json_file="bench.json"))
    peers_runs = ["--runs", "2", "--warmup", "1"] if quick else ["--runs", "31"]
    peers_models = ["--models", "mobilenetv2"] if quick else []
    steps.append(Step("peers 32", [*PEERS, *peers_models, *peers_runs, *target,
                                   "--out", str(out / "peers-32.md")], 0.1))
    if not quick:
        steps.append(Step("peers 224", [*PEERS, "--models", ",".join(CNNS), "--size", "224", "--runs", "11",
                                        *target, "--out", str(out / "peers-224.md")], 0.1))
    # What `wgnn tune` measures (storage, workgroup sizes, kernel variants, wgpu against numpy): the
    # data for a real GPU's defaults. Its cache goes to a folder of its own, read by no other step.
    steps.append(Step("tune", [*CLI, "tune", "--adapter", adapter or "vulkan", "--json", *quick_flag], 0.08,
                      json_file="tune.json", env={"WGNN_CACHE_DIR": str(out / "tune-cache")}))
    conform = ["--sources", "own", "--ops", "^Relu$", "--limit", "2"] if quick else ["--sources", "own,zoo"]
    steps.append(Step("conform", [*CLI, "conform", *conform, "--adapters", f"numpy,{adapter or 'vulkan'}",
                                  "--out", str(out / "conform")], 0.19))
    split_cases = ["Attention 2x48x16"] if quick else SPLIT_CASES
    steps.append(Step("attention splits", [*CLI, "bench", "--kernels", *target, *quick_flag,
                                           *(word for case in split_cases for word in ("--case", case)),
                                           "--alternate", SPLIT_VALUES, "--rounds", "1" if quick else "3",
                                           "--runs", "3" if quick else "11", "--json"], 0.08,
                      json_file="knobs.json"))
    knobs = [knob for i, knob in enumerate(KNOBS) if not quick or set(knob[0]) not in [set(k[0]) for k in KNOBS[:i]]]
    for settings, (name, what) in knobs:
        env = {key: value for key, value in settings.items() if not key.startswith("--")}
        options = [word for key, value in settings.items() if key.startswith("--") for word in (key, value)]
        if name == "kernels":
            case = QUICK_KERNEL_CASES[what.split()[0]] if quick else what
            label, argv = case.replace(" ", "-"), [*CLI, "bench", "--kernels", *target, "--case", case, "--json",
                                                   *quick_flag]
        else:
            size = 32 if quick else what
            path = models.get((name, size))
            if path is None:
                continue
            label, argv = f"{name} {size}", [*CLI, "bench", str(path), "--provider", "wgpu", *target,
                                              *(runs if quick else ["--runs", "20"]), "--per-op", "--json"]
        setting = " ".join(f"{key}={value}" for key, value in settings.items())
        steps.append(Step(f"knob {setting} {label}", argv + options, 0.05 / len(knobs), json_file="knobs.json",
                          env=env, setting=setting))
        # The same run unforced, straight after: on an H200 the same work's GPU time changed up to 5x
        # within seconds, so only runs side by side compare (docs/gpu-backend.md, "Split keys").
        steps.append(Step(f"baseline {label} (for {setting})", argv, 0.05 / len(knobs), json_file="knobs.json",
                          baseline_for=setting))
    return steps


def run_steps(steps: list[Step], budget_s: float) -> None:
    """Each step in turn, with a timeout of its share of the budget plus what earlier steps left
    (MIN_STEP_S at least); once less than MIN_STEP_S is left the rest are skipped."""
    started = time.monotonic()
    spare = 0.0
    for step in steps:
        left = budget_s - (time.monotonic() - started)
        allowed = min(left, max(MIN_STEP_S, step.share * budget_s + spare))
        if left < MIN_STEP_S:
            step.output = "skipped: the time budget ran out"
            continue
        begun = time.monotonic()
        try:
            done = subprocess.run(step.argv, capture_output=True, text=True, timeout=allowed,
                                  env={**os.environ, **step.env})
            step.status, step.output = done.returncode, done.stdout + done.stderr
            if step.json_file and done.returncode == 0:
                step.result = json.loads(done.stdout)
                step.output = f"{done.stderr}(the JSON result is in {step.json_file})"
        except subprocess.TimeoutExpired as exc:
            step.status = None
            partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            step.output = f"{partial}\ntimed out after {allowed:.0f} s"
        except json.JSONDecodeError as exc:
            step.output = f"{step.output}\nnot JSON: {exc}"
        step.seconds = time.monotonic() - begun
        spare = max(0.0, step.share * budget_s + spare - step.seconds)


# fp32 (non-tensor) peaks of the GPUs the device tool lends, TFLOP/s, from NVIDIA's datasheets (H100:
# SXM 67, PCIe 51; H200 SXM 67; A100 19.5): the target is a share of the GPU's fp32 peak, and the
# FMA shader's measured peak may fall short of it. Matched by name, the longest key first.
DATASHEET_FP32_TFLOPS = {"H100 PCIe": 51.0, "H100": 67.0, "H200": 67.0, "A100": 19.5}


def datasheet_peak(name: str) -> float | None:
    """The datasheet fp32 peak (GFLOP/s) of an adapter named `name`, when known."""
    for key in sorted(DATASHEET_FP32_TFLOPS, key=len, reverse=True):
        if key.lower() in name.lower():
            return DATASHEET_FP32_TFLOPS[key] * 1000
    return None


def gemm_line(kernels: dict) -> list[str]:
    """The best MatMul of each adapter, as a share of that adapter's measured FMA peak (and of its
    datasheet fp32 peak where known), and its measured concurrency."""
    from ..backends.wgpu.conv_paths import GPU_WEIGHTS

    lines = []
    for adapter in kernels.get("adapters", []):
        matmuls = [k for k in adapter.get("kernels", []) if k.get("op") == "MatMul" and "peak_fraction" in k]
        peak = adapter.get("fma", {}).get("gflops")
        if not matmuls or not peak:
            continue
        best = max(matmuls, key=lambda k: k["gflops"])
        sheet = datasheet_peak(adapter["adapter"])
        of_sheet = (f", {100 * best['gflops'] / sheet:.0f}% of the datasheet's {sheet / 1000:.0f} TFLOP/s"
                    if sheet else "")
        chains = adapter.get("concurrency") or {}
        at_once = (f"; about {chains['invocations']} invocations at once (the chain cost model's GPU_WEIGHTS "
                   f"assume {GPU_WEIGHTS.concurrency})" if chains else "")
        lines.append(f"- {adapter['adapter']}: FMA peak {peak:.1f} GFLOP/s; best {best['case']} "
                     f"{best['gflops']:.1f} GFLOP/s = {100 * best['peak_fraction']:.0f}% of it{of_sheet} "
                     f"({', '.join(best['kernels'])}){at_once}")
    return lines


def summary(steps: list[Step], out: Path) -> list[str]:
    lines = ["## Summary", ""]
    by_name = {step.name: step for step in steps}
    kernels = by_name["kernels"].result
    lines += gemm_line(kernels) if isinstance(kernels, dict) else ["- kernels: no result (see below)"]
    lines += ["", "| model | size | adapter | median ms | p90 ms | dispatches | cold start ms (load / prepare / "
              "first run) |", "|---|---|---|---|---|---|---|"]
    for step in steps:
        if not step.name.startswith("bench "):
            continue
        _, name, size = step.name.split()
        result = step.result
        if not isinstance(result, dict):
            lines.append(f"| {name} | {size} | - | failed | | | |")
            continue
        latency, cold = result["latency_ms"], result["cold_start_ms"]
        lines.append(f"| {name} | {size} | {result['adapter']} | {latency['median']:.3f} | {latency['p90']:.3f} | "
                     f"{result['dispatches']} | {cold['load']:.0f} / {cold['prepare']:.0f} / "
                     f"{cold['first_run']:.0f} |")
    peers = out / "peers.md"
    if peers.exists():
        lines += ["", "Peers on the same adapter:", "", peers.read_text().strip()]
    lines += knob_lines(steps)
    splits = by_name.get("attention splits")
    if splits is not None:
        lines += ["", *alternate_lines(splits)]
    tune = by_name["tune"].result if "tune" in by_name else None
    if isinstance(tune, dict):
        lines += ["", *tune_lines(tune)]
    conform = out / "conform" / "conform.json"
    if conform.exists():
        lines += ["", f"Conformance: {conform_counts(json.loads(conform.read_text()))}"]
    return lines


def knob_gpu_ms(result) -> float | None:
    """The GPU ms of a knob step's result: a kernel case's, or the sum of a model's ops."""
    if not isinstance(result, dict):
        return None
    if "adapters" in result:
        [row] = result["adapters"][0]["kernels"]
        return row.get("ms")
    return result["per_op"]["total_ms"]


def knob_lines(steps: list[Step]) -> list[str]:
    """The forced choices' table: each knob's median and GPU ms beside the unforced run made straight
    after it, and their ratio (below 1: the forced choice was faster)."""
    knobs = [(i, step) for i, step in enumerate(steps) if step.setting]
    if not knobs:
        return []
    lines = ["", "| forced choice | model | median ms (unforced) | GPU ms of the ops (per-op runs) | unforced GPU ms, "
             "side by side | forced / unforced |", "|---|---|---|---|---|---|"]
    for i, step in knobs:
        setting = step.setting
        target = step.name[len(f"knob {setting} "):]
        result = step.result
        after = steps[i + 1] if i + 1 < len(steps) and steps[i + 1].baseline_for == setting else None
        forced, unforced = knob_gpu_ms(result), knob_gpu_ms(after.result if after else None)
        side = f"{unforced:.3f}" if unforced else "-"
        ratio = f"x{forced / unforced:.2f}" if forced and unforced else "-"
        if not isinstance(result, dict):
            lines.append(f"| {setting} | {target} | failed | | {side} | - |")
        elif "adapters" in result:  # a kernel case: its GPU time, and GFLOP/s against the FMA peak
            [row] = result["adapters"][0]["kernels"]
            lines.append(f"| {setting} | {target} ({row.get('gflops', 0):.1f} GFLOP/s, "
                         f"{100 * row.get('peak_fraction', 0):.0f}% of the FMA peak) | {forced:.3f} | "
                         f"{forced:.3f} | {side} | {ratio} |")
        else:
            latency = f"{result['latency_ms']['median']:.3f}"
            if after and isinstance(after.result, dict):
                latency += f" ({after.result['latency_ms']['median']:.3f})"
            lines.append(f"| {setting} | {target} | {latency} | {forced:.3f} | {side} | {ratio} |")
    return lines


def alternate_lines(step: Step) -> list[str]:
    """An `--alternate` step's cases: each value's median GPU ms and its ratio to the first value's."""
    if not isinstance(step.result, list):
        return [f"- {step.name}: no result (see below)"]
    lines = []
    for adapter in step.result:
        variable = adapter["variable"]
        for case in adapter["cases"]:
            cells = [f"{entry['value'] or 'unset'}: " + (f"{entry['median_ms']:.3f} ms (x{entry['ratio']:.2f})"
                                                          if "ratio" in entry else "failed")
                     for entry in case["settings"]]
            lines.append(f"- {step.name}, {case['case']} ({variable}, median of {adapter['rounds']} rounds, "
                         f"ratio to unset): " + ", ".join(cells))
    return lines


def tune_lines(tune: dict) -> list[str]:
    """What `wgnn tune` chose per adapter, against the built-in defaults."""
    from ..backends.wgpu.tuning import describe_provider_costs

    lines = []
    for adapter in tune.get("adapters", []):
        storage = ", ".join(f"{p} {r['choice']} (default {r['default']})" for p, r in adapter["storage"].items())
        variants = ", ".join(f"{family} {row['choice']} (default {row['default']})"
                             for family, row in adapter["variants"].items())
        sizes = ", ".join(f"{case} WG {row['best']}" for case, row in adapter["workgroups"].items()
                          if row["best"] != row["preferred"]) or "the preferred size everywhere"
        providers = describe_provider_costs(adapter.get("providers"))
        lines.append(f"- tune on {adapter['adapter']}: storage {storage}; variants {variants}; workgroups: "
                     f"{sizes}; providers: {providers}")
    return lines


OUTCOMES = ("pass", "fallback", "fail", "error", "unsupported")


def conform_counts(report: dict) -> str:
    """Outcome counts per target of a conform.json."""
    targets = report.get("summary") or {}
    if not targets:
        return "no cases in the report"
    return "; ".join(f"{target}: " + ", ".join(f"{row.get(outcome, 0)} {outcome}" for outcome in OUTCOMES)
                     for target, row in targets.items())


def write_report(steps: list[Step], out: Path, header: list[str]) -> Path:
    lines = [*header, "", *summary(steps, out), "", "## Steps", ""]
    for step in steps:
        status = "timed out or skipped" if step.status is None else f"exit {step.status}"
        lines += [f"### {step.name}: {status}, {step.seconds:.1f} s", "", "```",
                  " ".join(step.argv), "", step.output[-OUTPUT_CHARS:].rstrip(), "```", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def environment() -> list[str]:
    import platform

    return ["# wgnn GPU check", "", f"- {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {platform.node()}, "
            f"Python {platform.python_version()}, {os.cpu_count()} CPUs",
            *(f"- {line}" for line in nvidia_smi())]


def nvidia_smi() -> list[str]:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [f"nvidia-smi: {line.strip()}" for line in done.stdout.splitlines() if line.strip()]


def write_results(steps: list[Step], out: Path) -> None:
    """Each step's JSON into its file: in GATHERED files a list of the results of the steps sharing
    it, each with its step's name and settings; in the others the one step's result as printed."""
    for name in dict.fromkeys(step.json_file for step in steps if step.json_file):
        sharing = [step for step in steps if step.json_file == name]
        if name in GATHERED:
            result = [{"step": step.name, "env": step.env, **({"setting": step.setting} if step.setting else {}),
                       **({"baseline_for": step.baseline_for} if step.baseline_for else {}),
                       **(step.result if isinstance(step.result, dict) else {"alternate": step.result})}
                      for step in sharing if step.result is not None]
        elif sharing[0].result is not None:
            result = sharing[0].result
        else:
            continue
        (out / name).write_text(json.dumps(result, indent=1) + "\n")


def check(out: Path, *, adapter: str | None = None, budget_s: float = DEFAULT_BUDGET_S, quick: bool = False) -> Path:
    """Run every step into out; returns report.md's path."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the peers' documented runs
    with tempfile.TemporaryDirectory(prefix="wgnn-gpu-check-") as tmp:
        models = zoo_files(Path(tmp), (32,) if quick else (32, 224))
        if quick:
            models = {key: path for key, path in models.items() if key == ("mobilenetv2", 32)}
        steps = plan(out, models, adapter, quick)
        run_steps(steps, budget_s)
    write_results(steps, out)
    peers = [(out / name).read_text() for name in ("peers-32.md", "peers-224.md") if (out / name).exists()]
    for name in ("peers-32.md", "peers-224.md", "conform/conform.html"):  # the JSON holds the HTML's data
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "tune-cache", ignore_errors=True)
    if peers:
        (out / "peers.md").write_text("\n\n".join(peers))
    return write_report(steps, out, environment())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")),
                        help="folder of the results (default $OUT, else ./gpu-check)")
    parser.add_argument("--adapter", help="GPU adapter (index, name substring, vulkan, ...; default: wgnn's "
                        "choice for the benchmarks, the Vulkan adapters for conformance)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for all steps")
    parser.add_argument("--quick", action="store_true", help="small sizes and few runs (a smoke test)")
    args = parser.parse_args(argv)
    report = check(args.out, adapter=args.adapter, budget_s=args.budget, quick=args.quick)
    print(report.read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
