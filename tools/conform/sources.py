"""Where conformance cases come from: wgnn's own op case library, the ONNX backend node tests (built
in memory by onnx >= 1.23, read from the data files older releases ship), model files given by
path (ONNX files, or folders in the ONNX test layout) and the model zoo.

Every source yields `Case`s whose op (the matrix row) and name are known up front, so filtering
is cheap; the model, feeds and expected outputs are built when the case runs (`Case.load()`).
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...engine.errors import InputError, ModelError
from ..convert.onnx.functions import DEFAULT_DOMAINS

SUITE_RTOL, SUITE_ATOL = 1e-3, 1e-7  # the ONNX backend suite's tolerances (onnx.backend.test.loader)
# Whole models accumulate float32 rounding over many layers: outputs near zero need an absolute floor.
MODEL_RTOL, MODEL_ATOL = 1e-3, 1e-4
KEYWORDS = ("own", "node", "zoo")
EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass
class Loaded:
    """A case ready to run: the ONNX model and one or more (feeds, expected outputs) data sets."""

    model: object  # onnx.ModelProto
    data_sets: list[tuple[dict[str, np.ndarray], list]]


@dataclass
class Case:
    id: str  # "<source>/<name>", unique in a run and stable between runs (baselines match on it)
    source: str  # own | node | zoo | path
    name: str
    op: str  # matrix row: the op type under test, "<Op> (expanded)" or "model:<name>"
    ops: list[str]  # op types in the graph (other domains as "<domain>.<Op>")
    opset: int | None
    rtol: float
    atol: float
    loader: Callable[[], Loaded] = field(repr=False)
    backends: tuple[str, ...] | None = None  # None: every target; else the target kinds it runs on

    def load(self) -> Loaded:
        return self.loader()


# ------------------------------------------------------------------------------------ helpers
def op_label(node) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def graph_ops(model) -> list[str]:
    """Op types of a model's graph and its subgraphs, sorted, each once."""
    found: set[str] = set()

    def scan(graph):
        for node in graph.node:
            found.add(op_label(node))
            for attr in node.attribute:
                if attr.g and attr.g.node:
                    scan(attr.g)
                for sub in attr.graphs:
                    scan(sub)

    scan(model.graph)
    return sorted(found)


def default_opset(model) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)


def graph_input_names(model) -> list[str]:
    initializers = {t.name for t in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in initializers]


def as_value(item):
    """A data-set entry as the runtime sees it: TensorProto -> array, numpy scalar -> 0-d array
    (in-memory node cases pass 0-d inputs as numpy scalars); sequences and optionals stay."""
    from onnx import TensorProto, numpy_helper

    if isinstance(item, TensorProto):
        return numpy_helper.to_array(item)
    if isinstance(item, (np.ndarray, np.generic)):
        return np.asarray(item)
    if isinstance(item, list):
        return [as_value(x) for x in item]
    return item


@contextmanager
def quiet():
    """Silence numpy/onnx warnings (overflow and division by zero in the cases are intended)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def onnxruntime_run(model, feeds: dict) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: old-opset cases make it warn on stderr
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# ONNX inputs that carry shapes, axes, sizes or ranges (by op type: input indices). wgnn plans
# shapes before running, so it needs these values then; the ONNX node tests feed them as inputs.
SHAPE_OPERANDS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Split": (1,),
    "Squeeze": (1,), "Unsqueeze": (1,), "Resize": (1, 2, 3), "Upsample": (1,), "Range": (0, 1, 2),
    "ConstantOfShape": (0,), "Dropout": (1, 2), "CenterCropPad": (1,), "TopK": (1,), "OneHot": (1,),
    "CumSum": (1,), "Trilu": (1,), "MaxUnpool": (2,), "AffineGrid": (1,), "Col2Im": (1, 2),
    **dict.fromkeys(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"), (1,)),
}


def constant_shape_inputs(loaded: Loaded) -> tuple[Loaded, list[str]]:
    """The case with the graph inputs that feed shape operands turned into initializers holding
    the data set's values (one data set only: each would need its own model)."""
    from onnx import numpy_helper

    if len(loaded.data_sets) != 1:
        return loaded, []
    feeds, expected = loaded.data_sets[0]
    frozen = sorted({node.input[i] for node in loaded.model.graph.node for i in SHAPE_OPERANDS.get(node.op_type, ())
                     if i < len(node.input) and isinstance(feeds.get(node.input[i]), np.ndarray)})
    if not frozen:
        return loaded, []
    model = type(loaded.model)()
    model.CopyFrom(loaded.model)
    kept = [vi for vi in model.graph.input if vi.name not in frozen]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(numpy_helper.from_array(feeds[name], name) for name in frozen)
    return Loaded(model, [({k: v for k, v in feeds.items() if k not in frozen}, expected)]), frozen


# ------------------------------------------------------------------------------ own op cases
def make_model(op_type: str, inputs: list, attrs: dict, *, outputs: int, opset: int):
    """One-node model: input i is graph input in<i> (array), initializer in<i> (Const), absent
    (None) or a graph input only its subgraph attributes read (Outer, after the node's inputs);
    outputs out<i> are untyped so that both references infer them."""
    import onnx
    from onnx import helper, numpy_helper

    from ...engine.dtypes import DTYPE_TO_ONNX
    from .cases import Const, Outer

    names, graph_inputs, initializers = [], [], []
    for i, item in enumerate(inputs):
        if item is None:
            names.append("")
            continue
        name = f"in{i}"
        if not isinstance(item, Outer):
            names.append(name)
        if isinstance(item, Const):
            initializers.append(numpy_helper.from_array(np.asarray(item.value), name))
        else:
            array = np.asarray(item.value if isinstance(item, Outer) else item)
            graph_inputs.append(helper.make_tensor_value_info(name, DTYPE_TO_ONNX[array.dtype.name], array.shape))
    attributes = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in attrs.items()}
    out_names = [f"out{i}" for i in range(outputs)]
    node = helper.make_node(op_type, names, out_names, **attributes)
    graph = helper.make_graph([node], f"conform_{op_type}", graph_inputs,
                              [onnx.ValueInfoProto(name=n) for n in out_names], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # accepted by every onnxruntime that runs these opsets
    return model


def _own_loader(case) -> Callable[[], Loaded]:
    def load() -> Loaded:
        model = make_model(case.op_type, case.inputs, case.attrs, outputs=case.outputs, opset=case.opset)
        feeds = case.feeds()
        if case.reference == "given":
            expected = [np.asarray(x) for x in case.expected]
        else:
            oracle = model
            if case.reference_attrs is not None:
                oracle = make_model(case.op_type, case.inputs, case.reference_attrs, outputs=case.outputs,
                                    opset=case.opset)
            with quiet():
                if case.reference == "ort":
                    expected = [np.asarray(x) for x in onnxruntime_run(oracle, feeds)]
                else:
                    from onnx.reference import ReferenceEvaluator

                    expected = [np.asarray(x) for x in ReferenceEvaluator(oracle).run(None, feeds)]
        return Loaded(model, [(feeds, expected)])

    return load


def own_cases() -> list[Case]:
    """wgnn's op case library (tools/conform/cases.py). The comparison is never tighter than the
    suite's tolerances; a case may declare looser ones."""
    from .cases import CASES

    return [Case(id=f"own/{c.name}", source="own", name=c.name, op=c.op_type, ops=[c.op_type], opset=c.opset,
                 rtol=max(c.rtol, SUITE_RTOL), atol=max(c.atol, SUITE_ATOL), loader=_own_loader(c),
                 backends=c.backends)
            for c in CASES]


# ------------------------------------------------------------------------------ ONNX node tests
def node_cases() -> list[Case]:
    """The ONNX backend node tests that the installed onnx provides: in memory (onnx >= 1.23
    builds them with the case generators) or, in older releases, from the data files it ships."""
    from onnx.backend.test import loader

    with quiet():  # the case generators overflow casts on purpose
        tests = loader.load_model_tests(kind="node")
    entries = []
    for test in tests:
        if test.model is not None:  # built in memory
            data_sets = [(list(inputs), list(outputs)) for inputs, outputs in test.data_sets or []]
            entries.append((test.name, test.model, _memory_loader(test.model, data_sets), test.rtol, test.atol))
        elif test.model_dir:  # a data folder: model.onnx + test_data_set_*/{input,output}_*.pb
            entries.append(_folder_entry(Path(test.model_dir), test.name, test.rtol, test.atol))
    return _node_style_cases(entries, "node")


def _memory_loader(model, data_sets) -> Callable[[], Loaded]:
    names = graph_input_names(model)

    def load() -> Loaded:
        sets = [({name: as_value(x) for name, x in zip(names, inputs)}, [as_value(y) for y in outputs])
                for inputs, outputs in data_sets]
        return Loaded(model, sets)

    return load


def _folder_entry(folder: Path, name: str, rtol: float = SUITE_RTOL, atol: float = SUITE_ATOL):
    import onnx

    model = onnx.load(str(folder / "model.onnx"))
    return name, model, _folder_loader(folder, model), rtol, atol


def _read_proto(path: Path, type_proto):
    """One .pb file of a test data set, parsed as the graph input/output type says."""
    import onnx
    from onnx import numpy_helper

    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    data = path.read_bytes()
    if kind == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if kind == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def _numbered(folder: Path, prefix: str) -> list[Path]:
    files = [(int(m.group(1)), p) for p in folder.glob(f"{prefix}_*.pb")
             if (m := re.fullmatch(rf"{prefix}_(\d+)\.pb", p.name))]
    return [p for _, p in sorted(files)]


def _folder_loader(folder: Path, model) -> Callable[[], Loaded]:
    def load() -> Loaded:
        names = graph_input_names(model)
        in_types = {vi.name: vi.type for vi in model.graph.input}
        out_types = [vi.type for vi in model.graph.output]
        sets = []
        for data_dir in sorted(folder.glob("test_data_set_*")):
            inputs = _numbered(data_dir, "input")
            outputs = _numbered(data_dir, "output")
            feeds = {name: _read_proto(p, in_types.get(name)) for name, p in zip(names, inputs)}
            expected = [_read_proto(p, out_types[i] if i < len(out_types) else None) for i, p in enumerate(outputs)]
            sets.append((feeds, expected))
        if not sets:
            raise ModelError(f"{folder}: no test_data_set_* folder")
        return Loaded(model, sets)

    return load


def _node_style_cases(entries, source: str) -> list[Case]:
    """Cases from (name, model, loader, rtol, atol): a one-node graph is filed under its op; an
    "_expanded" case (the op's function body) under "<Op> (expanded)" of its base case."""
    base_ops = {}
    for name, model, *_ in entries:
        if not EXPANDED.search(name) and len(model.graph.node) == 1:
            base_ops[name] = op_label(model.graph.node[0])
    cases = []
    for name, model, load, rtol, atol in entries:
        expanded = EXPANDED.search(name)
        if expanded and name[:expanded.start()] in base_ops:
            op = f"{base_ops[name[:expanded.start()]]} (expanded)"
        elif len(model.graph.node) == 1:
            op = op_label(model.graph.node[0])
        else:
            op = "+".join(graph_ops(model)) or "(empty graph)"
        cases.append(Case(id=f"{source}/{name}", source=source, name=name, op=op, ops=graph_ops(model),
                          opset=default_opset(model), rtol=rtol, atol=atol, loader=load))
    return cases


# ------------------------------------------------------------------------------ models and zoo
def _random_model_loader(model_fn: Callable[[], object], feeds_fn: Callable[[object], dict]) -> Callable[[], Loaded]:
    def load() -> Loaded:
        model = model_fn()
        feeds = feeds_fn(model)
        return Loaded(model, [(feeds, [np.asarray(x) for x in onnxruntime_run(model, feeds)])])

    return load


def zoo_cases() -> list[Case]:
    """Every zoo model at batch 2; expected outputs from onnxruntime."""
    from ...models.zoo import OPSET, ZOO, build, example_inputs

    def case(name: str) -> Case:
        return Case(id=f"zoo/{name}", source="zoo", name=name, op=f"model:{name}", ops=[], opset=OPSET,
                    rtol=MODEL_RTOL, atol=MODEL_ATOL,
                    loader=_random_model_loader(lambda: build(name), lambda m: example_inputs(m, batch=2)))

    return [case(name) for name in sorted(ZOO)]


def _file_feeds(model) -> dict[str, np.ndarray]:
    """Random feeds for a model file: symbolic dims take 1 (as `wgnn run` does)."""
    from ...engine.dtypes import ONNX_DTYPES
    from ...engine.graph import TensorInfo
    from ..cli import random_feeds, resolve_shapes

    initializers = {t.name for t in model.graph.initializer}
    infos = []
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        ttype = vi.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or f"{vi.name}:{i}")
                     for i, d in enumerate(ttype.shape.dim))
        infos.append(TensorInfo(vi.name, ONNX_DTYPES.get(ttype.elem_type, "float32"), dims))
    return random_feeds(infos, resolve_shapes(infos, {}))


def path_cases(path: str) -> list[Case]:
    """An .onnx file (random inputs, onnxruntime's outputs), a folder in the ONNX test layout
    (model.onnx + test_data_set_*), or a folder of either (e.g. onnx/backend/test/data/node)."""
    import onnx

    root = Path(path)
    if not root.exists():
        raise InputError(f"--sources: {path} is neither own, node, zoo nor an existing file or folder")
    if root.is_file():
        model = onnx.load(str(root), load_external_data=False)
        name = str(root)
        loader = _random_model_loader(lambda: onnx.load(str(root)), _file_feeds)
        return [Case(id=f"path/{name}", source="path", name=name, op=f"model:{root.name}", ops=graph_ops(model),
                     opset=default_opset(model), rtol=MODEL_RTOL, atol=MODEL_ATOL, loader=loader)]
    if (root / "model.onnx").is_file():
        return _node_style_cases([_folder_entry(root, root.name)], "path")
    entries, files = [], []
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / "model.onnx").is_file():
            entries.append(_folder_entry(child, child.name))
        elif child.is_file() and child.suffix == ".onnx":
            files.append(child)
    cases = _node_style_cases(entries, "path")
    for file in files:
        cases.extend(path_cases(str(file)))
    if not cases:
        raise InputError(f"--sources: {path} holds no .onnx model and no model.onnx test folder")
    return cases


# ------------------------------------------------------------------------------------ selection
def collect(sources: list[str], ops: str | None = None, limit: int | None = None) -> list[Case]:
    """Cases of the named sources (own, node, zoo or paths), those whose op or name matches the
    regex `ops`, at most `limit` from each source."""
    try:
        pattern = re.compile(ops) if ops else None
    except re.error as exc:
        raise InputError(f"--ops {ops!r} is not a valid regular expression: {exc}") from None
    builders = {"own": own_cases, "node": node_cases, "zoo": zoo_cases}
    cases: list[Case] = []
    seen: set[str] = set()
    for source in sources:
        found = builders[source]() if source in builders else path_cases(source)
        if pattern is not None:
            found = [c for c in found if pattern.search(c.op) or pattern.search(c.name)]
        if limit is not None:
            found = found[:limit]
        for case in found:
            if case.id not in seen:  # the same folder named twice runs once
                seen.add(case.id)
                cases.append(case)
    return cases
