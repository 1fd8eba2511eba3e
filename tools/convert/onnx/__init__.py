"""ONNX frontend: ModelProto -> wgnn Model, through the converter table and the graph passes."""
from __future__ import annotations

import importlib
import logging
import math
import pkgutil
import re
from collections import Counter
from pathlib import Path

import numpy as np

from ....engine.dtypes import ONNX_DTYPES, onnx_type_name
from ....engine.errors import ConversionError, ModelError, UnsupportedOpError, WgnnError
from ....engine.graph import Graph, Model, TensorInfo
from ....models.verify import DEFAULT_LIMITS, Limits, check_dims, verify_graph
from ...progress import progress
from .functions import DEFAULT_DOMAINS, copy_fields, expand_functions, expandable
from .table import CONVERTERS, ConvertContext, OnnxNode


def _load_table() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "table":
            importlib.import_module(f"{__name__}.{module.name}")


def convert_onnx(source, *, origin: str = "", optimize: bool = True, show_progress: bool = False,
                 limits: Limits | None = None) -> Model:
    """Convert an ONNX model (path, bytes or ModelProto) into a wgnn Model.

    Raises UnsupportedOpError listing every unsupported op type with its node count, ModelError
    for unreadable or invalid input (onnx.checker failures name the node; bad external data names
    the tensor and file) and ConversionError naming the node that cannot be converted.

    Arguments:
        limits: size limits (models.verify.Limits) for initializers and declared shapes.
    """
    try:
        import onnx
    except ImportError as exc:  # optional dependency
        raise ModelError("converting ONNX needs the onnx package: pip install 'wgnn[convert]'") from exc
    _load_table()
    base_dir = None
    limits = limits or DEFAULT_LIMITS
    if isinstance(source, (str, Path)):
        path = Path(source)
        origin = origin or str(path)
        base_dir = path.parent
        if not path.is_file():
            raise ModelError(f"model file not found: {path}")
        source = path.read_bytes()
    if isinstance(source, (bytes, bytearray)):
        try:
            proto = onnx.load_model_from_string(bytes(source))
        except Exception as exc:  # protobuf raises its own DecodeError types
            raise ModelError(f"{origin or '<bytes>'} is not a readable ONNX model: {exc}") from None
    else:
        proto = source
    origin = origin or "<onnx>"
    opset = next((o.version for o in proto.opset_import if o.domain in DEFAULT_DOMAINS), 0)
    if opset == 0:
        raise ModelError(f"{origin}: the model imports no default-domain opset")

    _check_text(proto, origin)
    calls = expandable(proto, opset, CONVERTERS)
    _check_supported(proto.graph, origin, calls)
    _check_external(proto.graph, base_dir, origin, limits)
    _check_onnx(proto, origin)
    if calls:  # ops ONNX defines by other ops, model-local functions: their bodies (onnx.inliner)
        if proto is source:  # the caller's ModelProto stays as it was
            proto = onnx.ModelProto()
            proto.CopyFrom(source)
        expand_functions(proto, opset, CONVERTERS, origin)
        try:
            _check_supported(proto.graph, origin)
        except UnsupportedOpError as exc:  # every op the model names has a body: a body needs them
            bodies = ", ".join(sorted({op if domain in DEFAULT_DOMAINS else f"{domain}.{op}" for domain, op in calls}))
            raise UnsupportedOpError(f"{exc} (in the ONNX function bodies of {bodies})", exc.op_counts) from None
    graph = _convert_graph(proto.graph, opset, origin, base_dir, show_progress, limits)
    if optimize:
        from ..passes import optimize_graph

        try:
            optimize_graph(graph)
        except WgnnError:
            raise
        except Exception as exc:  # a bug in a pass: typed for the user, the cause kept for the fuzzer
            raise ConversionError(f"{origin}: optimizing the converted graph failed ({type(exc).__name__}: "
                                  f"{exc})") from exc
    verify_graph(graph, origin=origin, limits=limits)
    return Model(graph, producer_name="wgnn.convert", producer_version=_version(),
                 source=f"onnx opset {opset} from {proto.producer_name or 'unknown'} "
                        f"{proto.producer_version}".strip(),
                 metadata={p.key: p.value for p in proto.metadata_props})


def _version() -> str:
    from .... import __version__

    return __version__


def _check_text(proto, origin: str) -> None:
    """protobuf hands out a string field that is not valid UTF-8 as bytes: refuse it here, before
    any name reaches code that expects str."""
    def check(value, what: str) -> None:
        if isinstance(value, bytes):
            raise ModelError(f"{origin} is not a valid ONNX model: {what} {value[:40]!r} is not valid UTF-8")

    def scan(g):
        check(g.name, "graph name")
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            check(vi.name, "tensor name")
            if vi.type.HasField("tensor_type"):
                for d in vi.type.tensor_type.shape.dim:
                    check(d.dim_param, f'dim name of "{vi.name}"')
        for t in g.initializer:
            check(t.name, "initializer name")
            for entry in t.external_data:
                check(entry.key, f'external data key of "{t.name}"')
                check(entry.value, f'external data value of "{t.name}"')
        for node in g.node:
            for value, what in ((node.name, "node name"), (node.op_type, "op type"), (node.domain, "domain")):
                check(value, what)
            label = f'{node.op_type} node "{node.name}"'
            for name in list(node.input) + list(node.output):
                check(name, f"{label}: tensor name")
            for attr in node.attribute:
                check(attr.name, f"{label}: attribute name")
                if attr.HasField("g"):
                    scan(attr.g)
                for sub in attr.graphs:
                    scan(sub)

    scan(proto.graph)
    for prop in proto.metadata_props:
        check(prop.key, "metadata key")
        check(prop.value, f"metadata value of {prop.key!r}")
    check(proto.producer_name, "producer name")
    check(proto.producer_version, "producer version")


def _check_supported(graph_proto, origin: str, expandable_calls=frozenset()) -> None:
    """UnsupportedOpError listing the op types of graph_proto with no converter (and no body to
    expand them into: expandable_calls), with their node counts."""
    missing: Counter = Counter()

    def scan(g):
        for node in g.node:
            if (node.domain, node.op_type) in expandable_calls:
                continue
            if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
                key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
                missing[key] += 1
            for attr in node.attribute:
                if attr.g and attr.g.node:
                    scan(attr.g)
                for sub in attr.graphs:
                    scan(sub)

    scan(graph_proto)
    if missing:
        listed = ", ".join(f"{op} ({n} node{'s' * (n > 1)})" for op, n in sorted(missing.items()))
        raise UnsupportedOpError(f"{origin}: {sum(missing.values())} node(s) use op types wgnn cannot "
                                 f"convert: {listed}", dict(missing))


# onnx.checker names the node as "Name: <name> OpType: <op>" in its messages.
_CHECKER_NODE = re.compile(r"Name: (\S*) OpType: (\S+)")


def _check_onnx(proto, origin: str) -> None:
    """onnx.checker (structure, op schemas, attributes, SSA, topological order) as a ModelError
    naming the node. It checks a light copy of the model (see _checkable)."""
    import onnx

    try:
        onnx.checker.check_model(_checkable(proto), full_check=False)
    except (onnx.checker.ValidationError, ValueError) as exc:  # ValueError: a copy past 2 GiB
        text = str(exc).strip()
        if "is deprecated in domain_version" in text:
            # onnx marks ops it has since redefined (GroupNormalization 18) as deprecated, and the
            # checker refuses them; exporters still write them, and the converter handles them.
            logging.getLogger("wgnn.convert").info("%s: onnx.checker: %s", origin, text.split("\n")[0])
            return
        found = _CHECKER_NODE.search(text)
        where = f'{found.group(2)} node "{found.group(1)}": ' if found else ""
        first = text.split("\n\n==> Context")[0].replace("\n", " ").strip()
        raise ModelError(f"{origin} is not a valid ONNX model: {where}{first}") from None


def _checkable(proto):
    """The model as onnx.checker should see it. Tensors become empty stand-ins of the same name
    and type: the converter checks their data itself, a copy of the weights would double memory,
    and the checker resolves external data against the working directory rather than the model's
    folder (_check_external does that properly). Value infos without a type, element type or shape
    get stand-in values: the checker insists on them, while onnxruntime and the reference evaluator
    treat them as optional (and so do many exporters and tests)."""
    import onnx

    light = onnx.ModelProto()
    copy_fields(proto, light, skip="graph")
    light.graph.CopyFrom(_checkable_graph(proto.graph))
    return light


def _checkable_tensor(tensor):
    import onnx

    return onnx.TensorProto(name=tensor.name, data_type=tensor.data_type, dims=[0])


def _checkable_graph(graph_proto):
    import onnx

    light = onnx.GraphProto(name=graph_proto.name)
    light.input.extend(graph_proto.input)
    light.output.extend(graph_proto.output)
    light.value_info.extend(graph_proto.value_info)
    for vi in list(light.input) + list(light.output) + list(light.value_info):
        if not vi.HasField("type"):
            vi.type.tensor_type.SetInParent()
        if vi.type.HasField("tensor_type"):
            ttype = vi.type.tensor_type
            if not ttype.elem_type:  # unknown element type: a stand-in the converter ignores
                ttype.elem_type = onnx.TensorProto.FLOAT
            if not ttype.HasField("shape"):
                ttype.shape.SetInParent()
    light.initializer.extend(_checkable_tensor(t) for t in graph_proto.initializer)
    light.sparse_initializer.extend(graph_proto.sparse_initializer)
    for node in graph_proto.node:
        copy = light.node.add()
        copy.CopyFrom(node)
        for attr in copy.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                attr.t.CopyFrom(_checkable_tensor(attr.t))
            for k, tensor in enumerate(attr.tensors):
                attr.tensors[k].CopyFrom(_checkable_tensor(tensor))
            if attr.HasField("g"):
                attr.g.CopyFrom(_checkable_graph(attr.g))
            for k, sub in enumerate(attr.graphs):
                attr.graphs[k].CopyFrom(_checkable_graph(sub))
    return light


def _tensors_of(graph_proto):
    """Every TensorProto of a graph and its subgraphs (initializers and tensor attributes)."""
    import onnx

    yield from graph_proto.initializer
    for node in graph_proto.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors_of(attr.g)
            for sub in attr.graphs:
                yield from _tensors_of(sub)


def _check_external(graph_proto, base_dir, origin: str, limits: Limits) -> None:
    """External data references checked before anything reads them (and before onnx.checker,
    which resolves them against the working directory when given a proto)."""
    from .external import EXTERNAL, locate_external

    for tensor in _tensors_of(graph_proto):
        if tensor.data_location == EXTERNAL:
            try:
                locate_external(tensor, base_dir, limits)
            except ModelError as exc:
                raise ModelError(f"{origin}: {exc}") from None


def _value_info(vi) -> TensorInfo:
    if vi.type.HasField("sequence_type") or vi.type.HasField("optional_type") or vi.type.HasField("map_type"):
        raise ConversionError(f'tensor "{vi.name}" is a {vi.type.WhichOneof("value")}; wgnn runs tensors only')
    ttype = vi.type.tensor_type
    if ttype.elem_type and ttype.elem_type not in ONNX_DTYPES:
        raise ConversionError(f'tensor "{vi.name}" has element type {onnx_type_name(ttype.elem_type)}, '
                              "which wgnn does not support")
    dtype = ONNX_DTYPES.get(ttype.elem_type) if ttype.elem_type else None
    shape = None
    if ttype.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or f"{vi.name}:{i}")
            for i, d in enumerate(ttype.shape.dim))
    return TensorInfo(vi.name, dtype, shape)


def tensor_to_numpy(tensor, base_dir: Path | None, limits: Limits | None = None) -> np.ndarray:
    from onnx import numpy_helper

    if tensor.data_location == 1:  # EXTERNAL
        from .external import load_external

        return load_external(tensor, base_dir, limits)
    if tensor.data_type not in ONNX_DTYPES:
        raise ConversionError(f'initializer "{tensor.name}" has unsupported ONNX data type '
                              f"{onnx_type_name(tensor.data_type)}")
    dims = tuple(int(d) for d in tensor.dims)
    check_dims(dims, what=f'initializer "{tensor.name}"', origin="ONNX model", limits=limits or DEFAULT_LIMITS)
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # data fields that do not match dims/type: numpy's or onnx's own errors
        raise ModelError(f'initializer "{tensor.name}" (dims {list(dims)}) cannot be decoded: {exc}') from None
    if array.size != math.prod(dims):
        raise ModelError(f'initializer "{tensor.name}" holds {array.size} values, its dims {list(dims)} need '
                         f"{math.prod(dims)}")
    return np.asarray(array, order="C").reshape(dims)


def decode_attrs(proto, opset: int, origin: str, base_dir, limits: Limits | None = None) -> dict:
    import onnx

    attrs = {}
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            attrs[attr.name] = _convert_graph(attr.g, opset, origin, base_dir, False, limits)
        elif attr.type == onnx.AttributeProto.TENSOR:
            attrs[attr.name] = tensor_to_numpy(attr.t, base_dir, limits)
        elif attr.type == onnx.AttributeProto.STRING:
            attrs[attr.name] = attr.s.decode("utf-8", "replace")
        elif attr.type == onnx.AttributeProto.STRINGS:
            attrs[attr.name] = [s.decode("utf-8", "replace") for s in attr.strings]
        else:
            value = onnx.helper.get_attribute_value(attr)
            attrs[attr.name] = list(value) if isinstance(value, (list, tuple)) else value
    return attrs


def _convert_graph(graph_proto, opset: int, origin: str, base_dir, show_progress: bool,
                   limits: Limits | None = None) -> Graph:
    graph = Graph(name=graph_proto.name)
    for tensor in graph_proto.initializer:
        graph.initializers[tensor.name] = tensor_to_numpy(tensor, base_dir, limits)
    graph.inputs = [_value_info(vi) for vi in graph_proto.input if vi.name not in graph.initializers]
    graph.outputs = [_value_info(vi) for vi in graph_proto.output]
    graph.value_info = {vi.name: _value_info(vi) for vi in graph_proto.value_info}
    ctx = ConvertContext(graph, opset, origin)
    for proto in progress(graph_proto.node, "converting", enabled=show_progress):
        try:
            ctx.node = OnnxNode(proto, decode_attrs(proto, opset, origin, base_dir, limits))
            CONVERTERS[proto.op_type](ctx, ctx.node)
        except WgnnError:
            raise
        except Exception as exc:  # a converter bug: typed for the user, the cause kept for the fuzzer
            raise ConversionError(f'{origin}: {proto.op_type} node "{proto.name or "<unnamed>"}" could not be '
                                  f"converted ({type(exc).__name__}: {exc})") from exc
    ctx.node = None
    return graph
