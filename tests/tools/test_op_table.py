"""tools/op_table.py (docs/ops.md): the page from a small fake conform.json, the converters' IR
mapping it reads statically against what they really emit, and the committed page's op list."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wgnn.backends import load_backends
from wgnn.engine.ops.base import OPS
from wgnn.tools import op_table
from wgnn.tools.convert.onnx import _load_table
from wgnn.tools.convert.onnx.table import CONVERTERS

ROOT = Path(__file__).resolve().parents[2]
GPU = "wgpu:0 FakeGPU (Vulkan)"


def setup_module():
    load_backends()
    _load_table()


def case(name: str, op: str, ops: list[str], numpy: str, gpu: str, source: str = "node") -> dict:
    return {"id": f"{source}/{name}", "source": source, "name": name, "op": op, "ops": ops,
            "results": {"numpy": {"outcome": numpy}, GPU: {"outcome": gpu}}}


@pytest.fixture(scope="module")
def fake_json(tmp_path_factory) -> Path:
    """Structure only: two targets and a handful of cases, one of each outcome."""
    cases = [
        case("test_relu", "Relu", ["Relu"], "pass", "pass"),
        case("test_relu_float64", "Relu", ["Relu"], "pass", "fallback"),
        case("test_add_wrong", "Add", ["Add"], "fail", "error"),
        case("test_cast_bfloat16", "Cast", ["Cast"], "unsupported", "unsupported"),
        case("test_mish_expanded", "Mish (expanded)", ["Softplus", "Tanh", "Mul"], "pass", "pass"),
        case("test_foo", "FooBar", ["FooBar"], "unsupported", "unsupported"),
        case("test_swish", "Swish", ["Swish"], "pass", "fallback"),  # expanded into its ONNX function body
        case("test_foo_seq", "FooBar+SequenceAt", ["FooBar", "SequenceAt"], "unsupported", "unsupported"),
        case("Relu_own", "Relu", ["Relu"], "fail", "fail", source="own"),  # not a node test: ignored
    ]
    report = {
        "created": "2026-01-02T03:04:05+00:00", "command": "wgnn conform --sources node --out fake",
        "targets": ["numpy", GPU],
        "environment": {"onnx": "9.9", "wgnn": "0.1.0", "adapters": [],
                        "targets": [{"id": "numpy", "kind": "numpy", "index": None},
                                    {"id": GPU, "kind": "wgpu", "index": 0, "name": "FakeGPU", "backend": "Vulkan",
                                     "adapter_type": "DiscreteGPU", "driver": "fake 1.0"}]},
        "cases": cases,
    }
    path = tmp_path_factory.mktemp("op_table") / "conform.json"
    path.write_text(json.dumps(report))
    return path


@pytest.fixture(scope="module")
def page(fake_json, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("op_table_out") / "ops.md"
    assert op_table.main(["--conform-json", str(fake_json), "--out", str(out)]) == 0
    return out.read_text()


def row(page: str, op: str) -> list[str]:
    section = page.split(op_table.SECTION, 1)[1]
    line = next(r for r in section.splitlines() if r.startswith(f"| {op} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_page_lists_every_converted_op_once(page):
    listed = op_table.listed_ops(page)
    assert sorted(listed) == sorted(CONVERTERS)
    assert len(listed) == len(set(listed))
    assert listed == sorted(listed, key=str.lower)


def test_page_counts_per_op_and_target(page):
    outcomes = "/".join(op_table.OUTCOMES)
    assert f"per target `{outcomes}`" in page
    relu = row(page, "Relu")
    assert relu[1:5] == ["Unary.relu", "yes", "yes", "2"]
    assert relu[5:] == ["2/0/0/0/0", "1/1/0/0/0"]  # the own case is not a node test
    assert row(page, "Add")[4:] == ["1", "0/0/1/0/0", "0/0/0/1/0"]
    assert row(page, "Cast")[4:] == ["1", "0/0/0/0/1", "0/0/0/0/1"]
    assert row(page, "Softplus")[4:] == ["0", "—", "—"]  # only inside an expanded test
    assert "| numpy | all node tests | 4 | 0 | 1 | 0 | 3 | 8 |" in page
    assert "| wgpu:0 (Vulkan) | all node tests | 2 | 2 | 0 | 1 | 3 | 8 |" in page
    assert "| wgpu:0 (Vulkan) | one-node tests of converted ops | 1 | 2 | 0 | 1 | 1 | 5 |" in page
    expanded = page.split("## ONNX ops expanded into their ONNX function bodies", 1)[1].split("\n## ", 1)[0]
    assert "1 op types" in expanded and "| Swish | 1 | 1/0/0/0/0 | 0/1/0/0/0 |" in expanded


def test_page_header_and_unconverted_ops(page):
    assert "`python -m wgnn.tools.op_table --conform-json" in page
    assert "(onnx 9.9: 8 cases) on 2026-01-02T03:04:05+00:00 by `wgnn conform --sources node --out fake`" in page
    assert "- `wgpu:0 (Vulkan)`: FakeGPU, Vulkan, adapter type DiscreteGPU, driver fake 1.0" in page
    assert "**fallback**" in page and "**unsupported**" in page
    unconverted = page.split("## ONNX ops in the node tests that wgnn does not convert", 1)[1]
    assert "| FooBar | 2 |" in unconverted and "| SequenceAt | 1 |" in unconverted
    assert "| Relu |" not in unconverted and "| Swish |" not in unconverted


def test_module_entry_point_gives_the_same_page(fake_json, page):
    """python -m runs the module as __main__: the mapping must not depend on its own name."""
    done = subprocess.run([sys.executable, "-m", "wgnn.tools.op_table", "--conform-json", str(fake_json)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    strip = [line for line in page.splitlines() if not line.startswith("Generated on")]
    assert [line for line in done.stdout.splitlines() if not line.startswith("Generated on")] == strip


@pytest.mark.parametrize("content, args, message", [
    (None, [], "file not found"),
    ("{not json", [], "not a conform.json"),
    (json.dumps({"targets": ["numpy"], "cases": [case("Relu_own", "Relu", ["Relu"], "pass", "pass", "own")]}), [],
     "no ONNX node test"),
    (json.dumps({"targets": [], "cases": []}), ["--adapters", "numpy"], "--adapters"),
])
def test_bad_input(tmp_path, capsys, content, args, message):
    path = tmp_path / "conform.json"
    if content is not None:
        path.write_text(content)
    assert op_table.main(["--conform-json", str(path), *args]) == 2
    assert message in capsys.readouterr().err


def test_static_mapping_names_real_ops_and_kinds():
    for onnx_op, mapping in op_table.ir_mappings().items():
        for label in mapping.labels:
            ir, _, kind = label.partition(".")
            assert ir in OPS, f"{onnx_op}: {label}"
            assert not kind or kind in OPS[ir].kinds, f"{onnx_op}: {label}"
        assert mapping.composite or mapping.labels or mapping.initializer, onnx_op


def test_static_mapping_covers_what_converters_emit():
    """Every node the converters emit for wgnn's own op cases (before optimisation) is listed."""
    from wgnn.tools.conform.cases import CASES
    from wgnn.tools.conform.sources import make_model, quiet
    from wgnn.tools.convert.onnx import convert_onnx

    mappings = op_table.ir_mappings()
    assert sum(m.composite for m in mappings.values()) <= 3  # the analysis follows nearly every converter
    missed, checked = [], set()
    for c in CASES:
        mapping = mappings[c.op_type]
        if mapping.composite:
            continue
        with quiet():
            model = convert_onnx(make_model(c.op_type, c.inputs, c.attrs, outputs=c.outputs, opset=c.opset),
                                 optimize=False)
        for node in model.graph.nodes:
            kind = node.attrs.get("kind")
            label = f"{node.op_type}.{kind}" if isinstance(kind, str) else node.op_type
            if label not in mapping.labels and node.op_type not in mapping.labels:
                missed.append(f"{c.name}: {label} not in {mapping.labels}")
        checked.add(c.op_type)
    assert not missed, missed
    # The forms the analysis resolves through helpers, closures, tables and conditions were exercised.
    assert {"Relu", "Clip", "Dropout", "Max", "Sum", "Mod", "Gelu", "ArgMax", "MaxPool", "AveragePool", "Softmax",
            "ReduceSum", "Squeeze", "Upsample"} <= checked


def test_committed_page_lists_every_converted_op():
    page = (ROOT / "docs" / "ops.md").read_text()
    listed = set(op_table.listed_ops(page))
    missing = sorted(set(CONVERTERS) - listed)
    stale = sorted(listed - set(CONVERTERS))
    hint = f"docs/ops.md is out of date; regenerate it with `{op_table.REGENERATE}`"
    assert not missing, f"{hint} (ops with a converter it does not list: {missing})"
    assert not stale, f"{hint} (ops it lists that have no converter: {stale})"
