"""ONNX frontend: ModelProto -> wgnn Model, through the converter table and the graph passes."""
from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from pathlib import Path

import numpy as np

from ....engine.dtypes import ONNX_DTYPES
from ....engine.errors import ConversionError, ModelError, UnsupportedOpError
from ....engine.graph import Graph, Model, TensorInfo
from ...progress import progress
from .table import CONVERTERS, ConvertContext, OnnxNode

DEFAULT_DOMAINS = ("", "ai.onnx")


def _load_table() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "table":
            importlib.import_module(f"{__name__}.{module.name}")


def convert_onnx(source, *, origin: str = "", optimize: bool = True, show_progress: bool = False) -> Model:
    """Convert an ONNX model (path, bytes or ModelProto) into a wgnn Model.

    Raises UnsupportedOpError listing every unsupported op type with its node count, ModelError
    for unreadable input and ConversionError naming the node that cannot be converted.
    """
    try:
        import onnx
    except ImportError as exc:  # optional dependency
        raise ModelError("converting ONNX needs the onnx package: pip install 'wgnn[convert]'") from exc
    _load_table()
    base_dir = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        origin = origin or str(path)
        base_dir = path.parent
        if not path.exists():
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

    _check_supported(proto.graph, origin)
    graph = _convert_graph(proto.graph, opset, origin, base_dir, show_progress)
    if optimize:
        from ..passes import optimize_graph

        optimize_graph(graph)
    return Model(graph, producer_name="wgnn.convert", producer_version=_version(),
                 source=f"onnx opset {opset} from {proto.producer_name or 'unknown'} "
                        f"{proto.producer_version}".strip(),
                 metadata={p.key: p.value for p in proto.metadata_props})


def _version() -> str:
    from .... import __version__

    return __version__


def _check_supported(graph_proto, origin: str) -> None:
    missing: Counter = Counter()

    def scan(g):
        for node in g.node:
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


def _value_info(vi) -> TensorInfo:
    if vi.type.HasField("sequence_type") or vi.type.HasField("optional_type") or vi.type.HasField("map_type"):
        raise ConversionError(f'tensor "{vi.name}" is a {vi.type.WhichOneof("value")}; wgnn runs tensors only')
    ttype = vi.type.tensor_type
    if ttype.elem_type and ttype.elem_type not in ONNX_DTYPES:
        import onnx

        raise ConversionError(f'tensor "{vi.name}" has element type '
                              f"{onnx.TensorProto.DataType.Name(ttype.elem_type)}, which wgnn does not support")
    dtype = ONNX_DTYPES.get(ttype.elem_type) if ttype.elem_type else None
    shape = None
    if ttype.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or f"{vi.name}:{i}")
            for i, d in enumerate(ttype.shape.dim))
    return TensorInfo(vi.name, dtype, shape)


def tensor_to_numpy(tensor, base_dir: Path | None) -> np.ndarray:
    from onnx import numpy_helper

    if tensor.data_location == 1:  # EXTERNAL
        from .external import load_external

        return load_external(tensor, base_dir)
    if tensor.data_type not in ONNX_DTYPES:
        raise ConversionError(f'initializer "{tensor.name}" has unsupported ONNX data type {tensor.data_type}')
    return np.asarray(numpy_helper.to_array(tensor), order="C")


def decode_attrs(proto, opset: int, origin: str, base_dir) -> dict:
    import onnx

    attrs = {}
    for attr in proto.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            attrs[attr.name] = _convert_graph(attr.g, opset, origin, base_dir, False)
        elif attr.type == onnx.AttributeProto.TENSOR:
            attrs[attr.name] = tensor_to_numpy(attr.t, base_dir)
        elif attr.type == onnx.AttributeProto.STRING:
            attrs[attr.name] = attr.s.decode("utf-8", "replace")
        elif attr.type == onnx.AttributeProto.STRINGS:
            attrs[attr.name] = [s.decode("utf-8", "replace") for s in attr.strings]
        else:
            value = onnx.helper.get_attribute_value(attr)
            attrs[attr.name] = list(value) if isinstance(value, (list, tuple)) else value
    return attrs


def _convert_graph(graph_proto, opset: int, origin: str, base_dir, show_progress: bool) -> Graph:
    graph = Graph(name=graph_proto.name)
    for tensor in graph_proto.initializer:
        graph.initializers[tensor.name] = tensor_to_numpy(tensor, base_dir)
    graph.inputs = [_value_info(vi) for vi in graph_proto.input if vi.name not in graph.initializers]
    graph.outputs = [_value_info(vi) for vi in graph_proto.output]
    graph.value_info = {vi.name: _value_info(vi) for vi in graph_proto.value_info}
    ctx = ConvertContext(graph, opset, origin)
    for proto in progress(graph_proto.node, "converting", enabled=show_progress):
        ctx.node = OnnxNode(proto, decode_attrs(proto, opset, origin, base_dir))
        CONVERTERS[proto.op_type](ctx, ctx.node)
    ctx.node = None
    return graph
