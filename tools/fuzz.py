"""Fuzzing of model loading and running.

Real model files (.wgnn files of the zoo models, models/data/digits.wgnn, small ONNX models) are
mutated by hypothesis-generated edits: truncations, bit flips, byte and range overwrites,
insertions, deletions, and huge numbers written where the flatbuffers structure keeps offsets and
vector lengths (or, in ONNX files, protobuf varints). Each input is loaded with
wgnn.InferenceSession(..., providers=["numpy"]) and, when it loads, run on small inputs.

Every input runs in a worker process with an address-space limit and a per-input time limit, so a
hang or a huge allocation is caught and reported instead of taking the fuzzer down. Outcomes:

- "ran" / "loaded" / "rejected": fine (rejected = a wgnn.WgnnError, the typed refusal we want);
- "slow": past the time limit once, but done within 3x the limit on a second try (a busy machine
  or a model made heavy by its mutation; a hang never finishes);
- "wrapped": a WgnnError raised by a safety net around an internal exception (its __cause__): fine
  for users, but a bug report for the code that raised (listed, not failed);
- "failure": any other exception, a MemoryError (huge allocation), a hang, or a dead worker.

    python -m wgnn.tools.fuzz --seconds 600 [--kinds wgnn,onnx] [--out fuzz-failures] [--json]
    python -m wgnn.tools.fuzz --replay fuzz-failures/failure-1a2b3c.wgnn
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import struct
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_TIMEOUT = 2.0  # seconds per input
DEFAULT_MEMORY_MB = 1024  # address space a worker may add to what it holds after start-up
MAX_FEED_ELEMENTS = 1 << 20  # inputs declaring more than this are loaded but not run
HUGE_VALUES = (0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x7FFFFFF0, 0x10000000, 0xFFFF, 0x8000, 1 << 20)
# Written over int64 constants and int attributes (shapes, axes, pads, sizes): shape explosions.
INT64_VALUES = (2 ** 40, -(2 ** 40), 2 ** 31, 2 ** 31 - 1, -(2 ** 31) - 1, 2 ** 62, -(2 ** 63), -1, -2, 0, 1000,
                65536)
OK_STATUSES = ("ran", "loaded", "rejected", "wrapped", "slow")
MODES = ("load", "run")


# ------------------------------------------------------------------------------------ seeds
@dataclass(frozen=True)
class Seed:
    """A valid model file the mutations start from. marks: byte positions of its structure
    (offsets, lengths, vtables); values: positions of its int64 constants and int attributes."""

    name: str
    kind: str  # "wgnn" or "onnx"
    data: bytes
    marks: tuple[int, ...] = ()
    values: tuple[int, ...] = ()


def _shape_ops_model():
    """Small ONNX model with a shape subgraph (Shape, Gather, Concat, Reshape, Expand, Range,
    ConstantOfShape, Slice): int64 constants whose mutation makes shapes explode."""
    from onnx import TensorProto, helper, numpy_helper

    def const(name, values):
        return numpy_helper.from_array(np.asarray(values, np.int64), name)

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0, name="batch"),
        helper.make_node("Concat", ["batch", "minus_one"], ["flat_shape"], axis=0, name="concat"),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"], name="reshape"),
        helper.make_node("Expand", ["flat", "expand_to"], ["wide"], name="expand"),
        helper.make_node("Range", ["r_start", "r_limit", "r_delta"], ["ramp"], name="range"),
        helper.make_node("Cast", ["ramp"], ["ramp_f"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Add", ["wide", "ramp_f"], ["summed"], name="add"),
        helper.make_node("ConstantOfShape", ["cos_shape"], ["ones"], name="cos",
                         value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Mul", ["summed", "ones"], ["scaled"], name="mul"),
        helper.make_node("Slice", ["scaled", "s_start", "s_end", "s_axes"], ["y"], name="slice"),
    ]
    inits = [const("zero", 0), const("minus_one", [-1]), const("expand_to", [2, 1, 12]),
             const("r_start", 0), const("r_limit", 12), const("r_delta", 1), const("cos_shape", [2, 1, 12]),
             const("s_start", [1]), const("s_end", [10]), const("s_axes", [2])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "shape_ops", [vi("x", TensorProto.FLOAT, ["N", 3, 4])],
                              [vi("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _small_onnx_models() -> dict:
    from ..models.zoo import build

    return {
        "resnet": build("resnet", size=8, width=4),
        "mobilenetv2": build("mobilenetv2", size=8, width=4),
        "bert": build("bert", vocab=20, hidden=8, heads=2, layers=1, ffn=16),
        "unet": build("unet", size=8, width=2),
        "shape_ops": _shape_ops_model(),
        "functions": _functions_model(),
    }


def _functions_model():
    """Ops the converter expands into their ONNX function bodies (tools/convert/onnx/functions.py):
    a causal grouped-query Attention on 3-D inputs, Swish, and a model-local function."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    scale = helper.make_function("custom", "Scale", ["a"], ["b"], [
        helper.make_node("Constant", [], ["k"], value_float=0.5), helper.make_node("Mul", ["a", "k"], ["b"])],
        [helper.make_opsetid("", 24)])
    nodes = [helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=1, is_causal=1),
             helper.make_node("Swish", ["y"], ["s"], alpha=1.5),
             helper.make_node("Scale", ["s"], ["out"], domain="custom")]
    graph = helper.make_graph(nodes, "functions", [vi("q", TensorProto.FLOAT, [1, 4, 8]),
                                                   vi("k", TensorProto.FLOAT, [1, 4, 4]),
                                                   vi("v", TensorProto.FLOAT, [1, 4, 4])],
                              [vi("out", TensorProto.FLOAT, [1, 4, 8])])
    return helper.make_model(graph, functions=[scale], opset_imports=[helper.make_opsetid("", 24),
                                                                       helper.make_opsetid("custom", 1)])


def _wgnn_value_positions(data: bytes) -> list[int]:
    """Byte positions of the int64 elements of initializers and int attributes of a .wgnn file."""
    from ..engine.dtypes import DTYPE_CODES
    from ..models.wgnn_fb import Model as FbModel
    from ..models.wgnn_fb.AttrType import AttrType

    graph = FbModel.Model.GetRootAs(data, 0).Graph()
    positions = []
    for i in range(graph.InitializersLength()):
        t = graph.Initializers(i)
        if t.Dtype() == DTYPE_CODES["int64"] and t.DataLength():
            start = t._tab.Vector(t._tab.Offset(10))
            positions += range(start, start + t.DataLength(), 8)
    for i in range(graph.NodesLength()):
        node = graph.Nodes(i)
        for j in range(node.AttributesLength()):
            a = node.Attributes(j)
            if a.Type() == AttrType.INT and a._tab.Offset(8):
                positions.append(a._tab.Pos + a._tab.Offset(8))
            elif a.Type() == AttrType.INTS and a.IntsLength():
                start = a._tab.Vector(a._tab.Offset(14))
                positions += range(start, start + 8 * a.IntsLength(), 8)
    return positions


def _onnx_value_positions(model, data: bytes) -> list[int]:
    """Byte positions of int64 initializer elements in a serialized ONNX model (raw_data bytes)."""
    from onnx import TensorProto

    positions = []
    for tensor in model.graph.initializer:
        if tensor.data_type == TensorProto.INT64 and tensor.raw_data:
            start = data.find(tensor.raw_data)
            if start >= 0:
                positions += range(start, start + len(tensor.raw_data), 8)
    return positions


def build_seeds(kinds: tuple[str, ...] = ("wgnn", "onnx")) -> list[Seed]:
    """The seed files: .wgnn files of the zoo models (default sizes), models/data/digits.wgnn and
    the shape-op model; small ONNX files of the same models."""
    from ..models.format import model_to_bytes
    from ..models.verify import structure_positions
    from .convert.onnx import convert_onnx

    onnx_models = _small_onnx_models()
    seeds = []
    if "wgnn" in kinds:
        from ..models.zoo import ZOO, build

        files = {name: model_to_bytes(convert_onnx(build(name))) for name in ZOO}
        files["shape_ops"] = model_to_bytes(convert_onnx(onnx_models["shape_ops"]))
        files["digits"] = (Path(__file__).resolve().parent.parent / "models" / "data" / "digits.wgnn").read_bytes()
        for name, data in files.items():
            marks = sorted({p for ps in structure_positions(data).values() for p in ps})
            seeds.append(Seed(f"{name}.wgnn", "wgnn", data, tuple(marks), tuple(_wgnn_value_positions(data))))
    if "onnx" in kinds:
        for name, model in onnx_models.items():
            data = model.SerializeToString()
            seeds.append(Seed(f"{name}.onnx", "onnx", data, (), tuple(_onnx_value_positions(model, data))))
    return seeds


# -------------------------------------------------------------------------------- mutations
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _position(seed: Seed, data: bytearray, where: tuple[str, int]) -> int:
    """A byte position: ("any", n) anywhere, ("struct", n) at an offset/length/vtable of the seed,
    ("value", n) at an int64 constant or int attribute."""
    kind, n = where
    marks = seed.marks if kind == "struct" else seed.values if kind == "value" else ()
    if marks:
        return marks[n % len(marks)] % max(len(data), 1)
    return n % max(len(data), 1)


def apply_mutations(seed: Seed, mutations) -> bytes:
    """The seed's bytes after the edits, applied in order (see mutation_strategy)."""
    data = bytearray(seed.data)
    for mutation in mutations:
        op = mutation[0]
        if not data:
            break
        if op == "truncate":
            del data[mutation[1] % len(data):]
        elif op == "flip":
            data[_position(seed, data, mutation[1])] ^= 1 << mutation[2]
        elif op == "overwrite":
            at = _position(seed, data, mutation[1])
            data[at:at + len(mutation[2])] = mutation[2]
        elif op == "insert":
            at = _position(seed, data, mutation[1])
            data[at:at] = mutation[2]
        elif op == "delete":
            at = _position(seed, data, mutation[1])
            del data[at:at + mutation[2]]
        elif op == "huge":
            at = _position(seed, data, mutation[1])
            payload = struct.pack("<I", mutation[2]) if seed.kind == "wgnn" else _varint(mutation[2] * 0x101)
            data[at:at + len(payload)] = payload
        elif op == "int64":  # same length: the file stays well-formed, the model's numbers change
            at = _position(seed, data, ("value", mutation[1]))
            data[at:at + 8] = struct.pack("<q", mutation[2])
    return bytes(data)


def mutation_strategy():
    """hypothesis strategy: a list of 1-4 edits."""
    from hypothesis import strategies as st

    where = st.tuples(st.sampled_from(["any", "struct", "value"]), st.integers(0, 2 ** 31))
    edit = st.one_of(
        st.tuples(st.just("truncate"), st.integers(0, 2 ** 31)),
        st.tuples(st.just("flip"), where, st.integers(0, 7)),
        st.tuples(st.just("overwrite"), where, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("insert"), where, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("delete"), where, st.integers(1, 64)),
        st.tuples(st.just("huge"), where, st.sampled_from(HUGE_VALUES)),
        st.tuples(st.just("int64"), st.integers(0, 2 ** 31), st.sampled_from(INT64_VALUES)),
    )
    return st.lists(edit, min_size=1, max_size=4)


# ----------------------------------------------------------------------------------- worker
def _feeds(inputs, rng) -> dict | None:
    """Small feeds for the declared inputs (symbolic dims 1); None when they cannot be made small."""
    feeds = {}
    for info in inputs:
        if info.shape is None:
            return None
        shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in info.shape)
        if len(shape) > 8 or any(d > MAX_FEED_ELEMENTS for d in shape) or int(np.prod(shape)) > MAX_FEED_ELEMENTS:
            return None
        dtype = np.dtype(info.dtype or "float32")
        if dtype.kind == "f":
            feeds[info.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[info.name] = rng.random(shape) < 0.5
        else:
            feeds[info.name] = rng.integers(0, 10, shape).astype(dtype)  # small: valid token ids
    return feeds


def _internal_frame(tb) -> str:
    """file:line of the innermost wgnn frame of a traceback (who to report the bug to)."""
    frames = [f for f in traceback.extract_tb(tb) if "wgnn" in f.filename or "/work/" in f.filename]
    frame = frames[-1] if frames else (traceback.extract_tb(tb)[-1] if tb else None)
    return f"{frame.filename}:{frame.lineno} ({frame.name})" if frame else "?"


def evaluate(data: bytes, mode: str = "run") -> dict:
    """Load (mode "load": wgnn.Interpreter only) or load and run (mode "run") one input in this
    process; the outcome as a JSON-able dict."""
    import wgnn

    from ..engine.errors import WgnnError

    result: dict = {"status": "loaded"}
    try:
        if mode == "load":
            wgnn.Interpreter(data)
            return result
        session = wgnn.InferenceSession(data, providers=["numpy"])
        feeds = _feeds(session.interpreter.graph.inputs, np.random.default_rng(0))
        if feeds is not None:
            session.run(None, feeds)
            result["status"] = "ran"
    except WgnnError as exc:
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, WgnnError):
            result.update(status="wrapped", error=type(cause).__name__, message=f"{exc}"[:500],
                          where=_internal_frame(cause.__traceback__),
                          traceback="".join(traceback.format_exception(cause))[-4000:])
        else:
            result.update(status="rejected", error=type(exc).__name__, message=str(exc)[:300])
    except MemoryError as exc:
        result.update(status="failure", error=type(exc).__name__, message=f"huge allocation: {exc}"[:500],
                      where=_internal_frame(exc.__traceback__),
                      traceback="".join(traceback.format_exception(exc))[-4000:])
    except Exception as exc:  # the point of fuzzing: anything untyped is a bug
        result.update(status="failure", error=type(exc).__name__, message=str(exc)[:500],
                      where=_internal_frame(exc.__traceback__),
                      traceback="".join(traceback.format_exception(exc))[-4000:])
    return result


def _statm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def worker_main(memory_mb: int, stack_file: str) -> None:
    """The worker loop: inputs on stdin (length, time limit, bytes), one JSON line per input on
    stdout. Shortly before an input's time limit the Python stacks go to stack_file, so the
    parent can say where a hang hangs."""
    import faulthandler
    import logging
    import resource
    import warnings

    from wgnn.backends import load_backends

    import wgnn

    load_backends()
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")  # numpy overflow warnings on garbage weights are expected
    np.seterr(all="ignore")
    evaluate(_shape_ops_model().SerializeToString())  # import what a run touches before the limit is set
    del wgnn
    limit = _statm_bytes() + memory_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stdin, stdout = sys.stdin.buffer, sys.stdout
    stdout.write("ready\n")
    stdout.flush()
    stacks = open(stack_file, "a")  # noqa: SIM115 - open for the worker's life; "a": the parent truncates it
    while True:
        header = stdin.read(9)
        if len(header) < 9:
            return
        size, timeout, mode = struct.unpack("<IfB", header)
        data = stdin.read(size)
        faulthandler.dump_traceback_later(max(0.1, 0.9 * timeout), file=stacks)
        result = evaluate(data, MODES[mode])
        faulthandler.cancel_dump_traceback_later()
        stdout.write(json.dumps(result) + "\n")
        stdout.flush()


class Runner:
    """Runs inputs in a worker process; restarts it after a hang or a crash."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB):
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.process: subprocess.Popen | None = None
        self.stack_file: str | None = None
        self.restarts = 0

    def _start(self) -> None:
        import tempfile

        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        handle, self.stack_file = tempfile.mkstemp(prefix="wgnn-fuzz-stacks-", suffix=".txt")
        os.close(handle)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wgnn.tools.fuzz", "--worker", "--memory-mb", str(self.memory_mb),
             "--stack-file", self.stack_file],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        line = self._readline(120.0)
        if line != "ready":
            self.close()
            raise RuntimeError(f"fuzz worker did not start (said {line!r})")

    def _readline(self, timeout: float) -> str | None:
        stream = self.process.stdout
        ready, _, _ = select.select([stream], [], [], timeout)
        if not ready:
            return None
        line = stream.readline()
        return line.decode().strip() if line else ""

    def run(self, data: bytes, mode: str = "run") -> dict:
        """The input's outcome (mode "load" or "run", see evaluate). One past the time limit is run
        again with 3x the limit (the machine may just be busy): finishing then makes it "slow",
        not a hang."""
        result = self._attempt(data, self.timeout, mode)
        if result.get("error") == "Hang":
            retry = self._attempt(data, 3 * self.timeout, mode)
            if retry.get("error") != "Hang":
                retry.update(slow_status=retry["status"], status="slow")
                return retry
        return result

    def _attempt(self, data: bytes, timeout: float, mode: str) -> dict:
        if self.process is None or self.process.poll() is not None:
            self._start()
        Path(self.stack_file).write_text("")
        start = time.perf_counter()
        try:
            self.process.stdin.write(struct.pack("<IfB", len(data), timeout, MODES.index(mode)) + data)
            self.process.stdin.flush()
        except BrokenPipeError:
            line = ""
        else:
            line = self._readline(timeout)
        seconds = time.perf_counter() - start
        if line:
            result = json.loads(line)
        elif line is None:
            stacks = Path(self.stack_file).read_text()
            inner = [ln.strip() for ln in stacks.splitlines() if ln.strip().startswith("File ")]
            where = next((ln for ln in inner if "/wgnn/" in ln or "/work/" in ln), inner[0] if inner else "?")
            result = {"status": "failure", "error": "Hang", "message": f"no answer within {timeout:g} s",
                      "where": where, "traceback": stacks[-4000:]}
            self.close()
        else:
            code = self.process.wait()
            result = {"status": "failure", "error": "WorkerDied",
                      "message": f"worker exited with {code} (a negative code is a signal, e.g. -9 killed "
                                 "by the memory limit, -6 aborted)"}
            self.close()
        result["seconds"] = round(seconds, 4)
        return result

    def close(self) -> None:
        if self.stack_file:
            Path(self.stack_file).unlink(missing_ok=True)
            self.stack_file = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()  # our own worker, by its handle
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream:
                    stream.close()
            self.process = None
            self.restarts += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------------------------ campaign
@dataclass
class Report:
    inputs: int = 0
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    rejections: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)
    wrapped: list[dict] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # distinct (status, error, place) already listed

    def as_dict(self) -> dict:
        return {"inputs": self.inputs, "seconds": round(self.seconds, 1), "statuses": dict(self.statuses),
                "rejections": dict(self.rejections.most_common()), "failures": self.failures,
                "wrapped": self.wrapped}

    def summary(self) -> str:
        lines = [f"{self.inputs} inputs in {self.seconds:.1f} s: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))]
        if self.rejections:
            lines.append("rejections: " + ", ".join(f"{k} {v}" for k, v in self.rejections.most_common()))
        for title, items in (("FAILURES", self.failures), ("internal errors behind safety nets", self.wrapped)):
            if items:
                lines.append(f"{title} ({len(items)}):")
                lines += [f"  {r['error']} at {r.get('where', '?')}: {r['message'][:200]}  [{r.get('file', '')}]"
                          for r in items]
        return "\n".join(lines)


def _save(out: Path | None, seed: Seed, data: bytes, result: dict) -> str:
    if out is None:
        return ""
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    path = out / f"{result['status']}-{digest}.{seed.kind}"
    path.write_bytes(data)
    path.with_suffix(path.suffix + ".txt").write_text(
        f"seed: {seed.name}\n" + json.dumps({k: v for k, v in result.items() if k != "traceback"}, indent=2)
        + "\n\n" + result.get("traceback", ""))
    return str(path)


def fuzz(seeds: list[Seed], runner: Runner, *, examples: int, seconds: float, seed: int = 0,
         out: Path | None = None, report: Report | None = None, mode: str = "run") -> Report:
    """One hypothesis campaign of up to `examples` inputs or `seconds`, whichever ends first
    (mode: "load" or "run", see evaluate). Failures are recorded (input saved under out) rather
    than raised, so hypothesis never spends the budget shrinking."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    report = report or Report()
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(index=st.integers(0, len(seeds) - 1), mutations=mutation_strategy())
    def one(index, mutations):
        if time.perf_counter() > deadline:
            return
        chosen = seeds[index]
        data = apply_mutations(chosen, mutations)
        result = runner.run(data, mode)
        report.inputs += 1
        report.statuses[result["status"]] += 1
        if result["status"] == "rejected":
            report.rejections[result["error"]] += 1
        elif result["status"] in ("failure", "wrapped"):
            # One report per distinct place and error type; every input is still saved.
            key = f"{result['status']}|{result['error']}|{result.get('where')}"
            result["file"] = _save(out, chosen, data, result)
            result["seed"] = chosen.name
            result.pop("traceback", None)
            if key not in report.seen:
                report.seen.add(key)
                (report.failures if result["status"] == "failure" else report.wrapped).append(result)

    one()
    report.seconds += time.perf_counter() - start
    return report


# ----------------------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgnn.tools.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    parser.add_argument("--kinds", default="wgnn,onnx", help="seed kinds: wgnn, onnx or both (default)")
    parser.add_argument("--out", default="fuzz-failures", help="folder for failing inputs (default fuzz-failures)")
    parser.add_argument("--seed", type=int, default=None, help="first hypothesis seed (default: random)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per input (default 2)")
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB,
                        help="extra address space per worker in MiB (default 1024)")
    parser.add_argument("--mode", choices=MODES, default="run",
                        help="load: wgnn.Interpreter only; run: load, then run on small inputs (default)")
    parser.add_argument("--replay", metavar="FILE", help="run one saved input and print its outcome")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stack-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.memory_mb, args.stack_file)
        return 0
    if args.replay:
        with Runner(timeout=args.timeout, memory_mb=args.memory_mb) as runner:
            result = runner.run(Path(args.replay).read_bytes(), args.mode)
        text = f"{result['status']}: {result.get('error', '')} {result.get('message', '')}"
        print(json.dumps(result, indent=2) if args.json else f"{text}\n{result.get('traceback', '')}")
        return 1 if result["status"] == "failure" else 0
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    seeds = build_seeds(kinds)
    first = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    report = Report()
    stop = time.perf_counter() + args.seconds
    with Runner(timeout=args.timeout, memory_mb=args.memory_mb) as runner:
        batch = 0
        while time.perf_counter() < stop:  # batches with fresh seeds until the budget is spent
            fuzz(seeds, runner, examples=500, seconds=stop - time.perf_counter(), seed=first + batch,
                 out=Path(args.out), report=report, mode=args.mode)
            batch += 1
            if not args.json:
                print(f"\r{report.inputs} inputs, {len(report.failures)} failure kinds, {report.seconds:.0f} s",
                      end="", file=sys.stderr, flush=True)
        restarts = runner.restarts
    if not args.json:
        print(file=sys.stderr)
    result = {**report.as_dict(), "seeds": [s.name for s in seeds], "first_seed": first,
              "worker_restarts": restarts}
    print(json.dumps(result, indent=2) if args.json else report.summary() + f"\n(hypothesis seeds from {first})")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
