"""Read and write .wgnn files (flatbuffers, schema in models/schema/wgnn.fbs).

Weights are stored 16-byte aligned and read back zero-copy as read-only numpy views of the file.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import flatbuffers
import numpy as np

from ..engine.dtypes import CODE_DTYPES, DTYPE_CODES, dtype_name
from ..engine.errors import FormatVersionError, ModelError, ModelVerificationError, node_label
from ..engine.graph import Graph, Model, Node, TensorInfo
from .verify import DEFAULT_LIMITS, Limits, check_dims, read_format_version, verify_buffer, verify_graph
from .verify import FILE_IDENTIFIER as _FILE_IDENTIFIER
from .wgnn_fb import Attribute as FbAttribute
from .wgnn_fb import Dim as FbDim
from .wgnn_fb import Graph as FbGraph
from .wgnn_fb import KeyValue as FbKeyValue
from .wgnn_fb import Model as FbModel
from .wgnn_fb import Node as FbNode
from .wgnn_fb import Tensor as FbTensor
from .wgnn_fb import ValueInfo as FbValueInfo
from .wgnn_fb.AttrType import AttrType

FORMAT_VERSION = 1
FILE_IDENTIFIER = _FILE_IDENTIFIER  # b"WGNN"
MAGIC_OFFSET = 4  # flatbuffers puts the file identifier after the root offset
WEIGHT_ALIGNMENT = 16


# ------------------------------------------------------------------------------------ writing
class _Writer:
    def __init__(self):
        self.b = flatbuffers.Builder(1024)

    def strings(self, values, start_vector) -> int:
        offsets = [self.b.CreateString(v) for v in values]
        start_vector(self.b, len(offsets))
        for off in reversed(offsets):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def tables(self, offsets, start_vector) -> int:
        start_vector(self.b, len(offsets))
        for off in reversed(offsets):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def aligned_bytes(self, payload: bytes) -> int:
        b = self.b
        b.StartVector(1, len(payload), WEIGHT_ALIGNMENT)
        b.head = b.head - len(payload)
        b.Bytes[b.head:b.head + len(payload)] = payload
        return b.EndVector()

    def value_info(self, info: TensorInfo) -> int:
        b = self.b
        name = b.CreateString(info.name)
        shape = None
        if info.shape is not None:
            dims = []
            for d in info.shape:
                symbol = b.CreateString(d) if isinstance(d, str) else None
                FbDim.Start(b)
                if symbol is not None:
                    FbDim.AddSymbol(b, symbol)
                else:
                    FbDim.AddValue(b, int(d))
                dims.append(FbDim.End(b))
            shape = self.tables(dims, FbValueInfo.StartShapeVector)
        FbValueInfo.Start(b)
        FbValueInfo.AddName(b, name)
        FbValueInfo.AddDtype(b, DTYPE_CODES[info.dtype] if info.dtype else 0)
        FbValueInfo.AddHasShape(b, info.shape is not None)
        if shape is not None:
            FbValueInfo.AddShape(b, shape)
        return FbValueInfo.End(b)

    def tensor(self, name: str, value: np.ndarray) -> int:
        b = self.b
        array = np.asarray(value, order="C")
        code = DTYPE_CODES[dtype_name(array.dtype)]
        payload = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        data = self.aligned_bytes(payload)
        dims = b.CreateNumpyVector(np.asarray(array.shape, dtype=np.int64))
        name_off = b.CreateString(name)
        FbTensor.Start(b)
        FbTensor.AddName(b, name_off)
        FbTensor.AddDtype(b, code)
        FbTensor.AddDims(b, dims)
        FbTensor.AddData(b, data)
        return FbTensor.End(b)

    def attribute(self, node: Node, key: str, value) -> int:
        b = self.b
        kind, fields = _attr_kind(node, key, value), {}
        if kind == AttrType.STRING:
            fields["s"] = b.CreateString(value)
        elif kind == AttrType.INTS:
            fields["ints"] = b.CreateNumpyVector(np.asarray(value, dtype=np.int64))
        elif kind == AttrType.FLOATS:
            fields["floats"] = b.CreateNumpyVector(np.asarray(value, dtype=np.float64))
        elif kind == AttrType.STRINGS:
            fields["strings"] = self.strings(value, FbAttribute.StartStringsVector)
        elif kind == AttrType.TENSOR:
            fields["tensor"] = self.tensor("", value)
        elif kind == AttrType.GRAPH:
            fields["graph"] = self.graph(value)
        name = b.CreateString(key)
        FbAttribute.Start(b)
        FbAttribute.AddName(b, name)
        FbAttribute.AddType(b, kind)
        if kind == AttrType.INT:
            FbAttribute.AddI(b, int(value))
        elif kind == AttrType.FLOAT:
            FbAttribute.AddF(b, float(value))
        adders = {"s": FbAttribute.AddS, "ints": FbAttribute.AddInts, "floats": FbAttribute.AddFloats,
                  "strings": FbAttribute.AddStrings, "tensor": FbAttribute.AddTensor,
                  "graph": FbAttribute.AddGraph}
        for field_name, offset in fields.items():
            adders[field_name](b, offset)
        return FbAttribute.End(b)

    def node(self, node: Node) -> int:
        b = self.b
        attrs = [self.attribute(node, k, v) for k, v in sorted(node.attrs.items())]
        attrs_vec = self.tables(attrs, FbNode.StartAttributesVector)
        inputs = self.strings(node.inputs, FbNode.StartInputsVector)
        outputs = self.strings(node.outputs, FbNode.StartOutputsVector)
        name = b.CreateString(node.name)
        op_type = b.CreateString(node.op_type)
        FbNode.Start(b)
        FbNode.AddName(b, name)
        FbNode.AddOpType(b, op_type)
        FbNode.AddInputs(b, inputs)
        FbNode.AddOutputs(b, outputs)
        FbNode.AddAttributes(b, attrs_vec)
        return FbNode.End(b)

    def graph(self, graph: Graph) -> int:
        b = self.b
        inits = self.tables([self.tensor(k, v) for k, v in graph.initializers.items()],
                            FbGraph.StartInitializersVector)
        nodes = self.tables([self.node(n) for n in graph.nodes], FbGraph.StartNodesVector)
        inputs = self.tables([self.value_info(t) for t in graph.inputs], FbGraph.StartInputsVector)
        outputs = self.tables([self.value_info(t) for t in graph.outputs], FbGraph.StartOutputsVector)
        infos = self.tables([self.value_info(t) for t in graph.value_info.values()],
                            FbGraph.StartValueInfosVector)
        name = b.CreateString(graph.name)
        FbGraph.Start(b)
        FbGraph.AddName(b, name)
        FbGraph.AddInputs(b, inputs)
        FbGraph.AddOutputs(b, outputs)
        FbGraph.AddValueInfos(b, infos)
        FbGraph.AddInitializers(b, inits)
        FbGraph.AddNodes(b, nodes)
        return FbGraph.End(b)


def _attr_kind(node: Node, key: str, value) -> int:
    """The stored type of an attribute: from its op definition when known, else from the value."""
    from ..engine.ops.base import OPS

    spec = OPS.get(node.op_type).attrs.get(key) if node.op_type in OPS else None
    if spec is not None:
        return getattr(AttrType, spec.type.upper())
    if isinstance(value, (bool, int, np.integer)):
        return AttrType.INT
    if isinstance(value, (float, np.floating)):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, np.ndarray):
        return AttrType.TENSOR
    if isinstance(value, Graph):
        return AttrType.GRAPH
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and value:
            return AttrType.STRINGS
        if all(isinstance(v, (int, np.integer)) for v in value):
            return AttrType.INTS
        return AttrType.FLOATS
    raise ModelError(f'{node.op_type} node "{node.name}": attribute {key!r} has unstorable type '
                     f"{type(value).__name__}")


def model_to_bytes(model: Model) -> bytes:
    w = _Writer()
    b = w.b
    graph = w.graph(model.graph)
    meta = []
    for key, value in model.metadata.items():
        k, v = b.CreateString(key), b.CreateString(value)
        FbKeyValue.Start(b)
        FbKeyValue.AddKey(b, k)
        FbKeyValue.AddValue(b, v)
        meta.append(FbKeyValue.End(b))
    meta_vec = w.tables(meta, FbModel.StartMetadataVector)
    producer = b.CreateString(model.producer_name)
    version = b.CreateString(model.producer_version)
    source = b.CreateString(model.source)
    FbModel.Start(b)
    FbModel.AddFormatVersion(b, FORMAT_VERSION)
    FbModel.AddProducerName(b, producer)
    FbModel.AddProducerVersion(b, version)
    FbModel.AddSource(b, source)
    FbModel.AddMetadata(b, meta_vec)
    FbModel.AddGraph(b, graph)
    b.Finish(FbModel.End(b), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def save_model(model: Model, path) -> None:
    """Write model to path atomically: a failed write never leaves a half-written file."""
    data = model_to_bytes(model)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------ reading
def read_model(data: bytes, *, origin: str = "<bytes>", limits: Limits | None = None) -> Model:
    """Decode a .wgnn file's bytes after verifying them (models/verify.py): any corruption becomes a
    ModelError (ModelVerificationError) naming the file, the object at fault and its byte offset.

    Arguments:
        data: the file's bytes (kept alive by the returned weights, which view them zero-copy).
        origin: the file name used in error messages.
        limits: size limits (models.verify.Limits; default DEFAULT_LIMITS).
    """
    buffer = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    limits = limits or DEFAULT_LIMITS
    # The version first: a newer file may be laid out differently and must not fail as "corrupted".
    version = read_format_version(buffer, origin=origin)
    if version > FORMAT_VERSION:
        raise FormatVersionError(f"{origin} uses .wgnn format version {version}; this wgnn reads up to "
                                 f"version {FORMAT_VERSION}. Upgrade wgnn to load it.")
    if version == 0:
        raise ModelVerificationError(f"{origin} is truncated or corrupted: it has no format version",
                                     where="format_version")
    verify_buffer(buffer, origin=origin, limits=limits)
    root = FbModel.Model.GetRootAs(buffer, 0)
    try:
        if root.Graph() is None:
            raise ModelError(f"{origin} has no graph")
        model = Model(
            _read_graph(root.Graph(), buffer, origin, limits),
            producer_name=_str(root.ProducerName()),
            producer_version=_str(root.ProducerVersion()),
            source=_str(root.Source()),
            metadata=_read_metadata(root, origin),
        )
    except ModelError:
        raise
    except Exception as exc:  # a gap in verify_buffer: still a ModelError, the cause kept for the fuzzer
        raise ModelError(f"{origin} is truncated or corrupted ({type(exc).__name__}: {exc})") from exc
    verify_graph(model.graph, origin=origin, limits=limits)
    return model


def load_wgnn(path, *, limits: Limits | None = None) -> Model:
    path = Path(path)
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    return read_model(path.read_bytes(), origin=str(path), limits=limits)


def _str(value) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""


def _read_metadata(root, origin: str) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for i in range(root.MetadataLength()):
        key = _str(root.Metadata(i).Key())
        if key in metadata:
            raise ModelVerificationError(f"{origin}: metadata key {key!r} appears twice", where=f"metadata[{i}]")
        metadata[key] = _str(root.Metadata(i).Value())
    return metadata


def _read_tensor(t, buffer, origin: str, limits: Limits, what: str) -> np.ndarray:
    name = _str(t.Name())
    label = f'tensor "{name}"' if name else what
    dtype = CODE_DTYPES.get(t.Dtype())
    if dtype is None:
        raise ModelVerificationError(f'{origin}: {label} has unknown dtype code {t.Dtype()}', where=label)
    dims = tuple(int(d) for d in t.DimsAsNumpy()) if t.DimsLength() else ()
    check_dims(dims, what=label, origin=origin, limits=limits)
    count = math.prod(dims)
    itemsize = np.dtype(dtype).itemsize
    length = t.DataLength()
    if length != count * itemsize:
        raise ModelVerificationError(f"{origin}: {label} holds {length} bytes, but shape {list(dims)} of "
                                     f"{dtype} needs {count * itemsize}", where=label)
    if length == 0:
        return np.zeros(dims, dtype)
    start = t._tab.Vector(t._tab.Offset(10))  # field 'data' (vtable slot 10): payload start
    if start + length > len(buffer):  # verify_buffer checked this; kept as the last line of defence
        raise ModelVerificationError(f"{origin}: {label} data runs past the end of the file", where=label,
                                     offset=start)
    array = np.frombuffer(buffer, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=start)
    return array.reshape(dims)


def _read_info(v, origin: str) -> TensorInfo:
    shape = None
    if v.HasShape():
        shape = tuple(_str(d.Symbol()) if d.Symbol() is not None else int(d.Value())
                      for d in (v.Shape(i) for i in range(v.ShapeLength())))
    code = v.Dtype()
    if code and code not in CODE_DTYPES:
        raise ModelVerificationError(f'{origin}: tensor "{_str(v.Name())}" has unknown dtype code {code}',
                                     where=f'tensor "{_str(v.Name())}"')
    return TensorInfo(_str(v.Name()), CODE_DTYPES.get(code), shape)


def _read_attr(a, buffer, origin: str, limits: Limits, label: str):
    kind = a.Type()
    if kind == AttrType.INT:
        return a.I()
    if kind == AttrType.FLOAT:
        return a.F()
    if kind == AttrType.STRING:
        return _str(a.S())
    if kind == AttrType.INTS:
        return [int(x) for x in a.IntsAsNumpy()] if a.IntsLength() else []
    if kind == AttrType.FLOATS:
        return [float(x) for x in a.FloatsAsNumpy()] if a.FloatsLength() else []
    if kind == AttrType.STRINGS:
        return [_str(a.Strings(i)) for i in range(a.StringsLength())]
    if kind == AttrType.TENSOR:
        if a.Tensor() is None:
            raise ModelVerificationError(f"{origin}: {label} has type TENSOR but holds no tensor", where=label)
        return _read_tensor(a.Tensor(), buffer, origin, limits, label)
    if kind == AttrType.GRAPH:
        if a.Graph() is None:
            raise ModelVerificationError(f"{origin}: {label} has type GRAPH but holds no graph", where=label)
        return _read_graph(a.Graph(), buffer, origin, limits)
    raise ModelVerificationError(f"{origin}: {label} has unknown type code {kind}", where=label)


def _unique(mapping: dict, key: str, origin: str, what: str) -> None:
    if key in mapping:
        raise ModelVerificationError(f'{origin}: {what} "{key}" appears twice', where=f'{what} "{key}"')


def _read_graph(g, buffer, origin: str, limits: Limits) -> Graph:
    graph = Graph(name=_str(g.Name()))
    graph.inputs = [_read_info(g.Inputs(i), origin) for i in range(g.InputsLength())]
    graph.outputs = [_read_info(g.Outputs(i), origin) for i in range(g.OutputsLength())]
    for i in range(g.ValueInfosLength()):
        info = _read_info(g.ValueInfos(i), origin)
        _unique(graph.value_info, info.name, origin, "value info")
        graph.value_info[info.name] = info
    for i in range(g.InitializersLength()):
        t = g.Initializers(i)
        name = _str(t.Name())
        _unique(graph.initializers, name, origin, "initializer")
        graph.initializers[name] = _read_tensor(t, buffer, origin, limits, f"initializer {i}")
    for i in range(g.NodesLength()):
        n = g.Nodes(i)
        node = Node(_str(n.OpType()), [_str(n.Inputs(j)) for j in range(n.InputsLength())],
                    [_str(n.Outputs(j)) for j in range(n.OutputsLength())], {}, name=_str(n.Name()))
        for j in range(n.AttributesLength()):
            a = n.Attributes(j)
            key = _str(a.Name())
            label = f"{node_label(node)} attribute {key!r}"
            if key in node.attrs:
                raise ModelVerificationError(f"{origin}: {label} appears twice", where=label)
            node.attrs[key] = _read_attr(a, buffer, origin, limits, label)
        graph.nodes.append(node)
    return graph
