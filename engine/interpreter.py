"""Interpreter: a loaded, validated model; sessions are created from it."""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from .config import Config
from .errors import ModelError, UnsupportedOpError, WgnnError
from .graph import Model
from .ops import load_ops
from .ops.base import OPS


def load_model(source) -> Model:
    """A Model from a .wgnn or .onnx path, their bytes, an onnx ModelProto or a Model."""
    from ..models.format import FILE_IDENTIFIER, MAGIC_OFFSET, read_model

    if isinstance(source, Model):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise ModelError(f"model file not found: {path}")
        if path.is_dir():
            raise ModelError(f"model path is a directory, not a file: {path}")
        data = path.read_bytes()
        origin = str(path)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data, origin = bytes(source), "<bytes>"
    elif type(source).__name__ == "ModelProto":
        from ..tools.convert.onnx import convert_onnx

        return convert_onnx(source)
    else:
        raise ModelError(f"cannot load a model from {type(source).__name__}; give a path or bytes")
    if data[MAGIC_OFFSET:MAGIC_OFFSET + 4] == FILE_IDENTIFIER:
        return read_model(data, origin=origin)
    if _looks_like_onnx(data):
        from ..tools.convert.onnx import convert_onnx

        # From its path, an ONNX model finds its external data files next to it.
        return convert_onnx(source if isinstance(source, (str, os.PathLike)) else data, origin=origin)
    raise ModelError(f"{origin} is neither a .wgnn nor an ONNX model file "
                     f"({len(data)} bytes, starts with {data[:8]!r})")


def _looks_like_onnx(data: bytes) -> bool:
    # ONNX ModelProto starts with field 1 (ir_version, varint) tag 0x08 in every exporter we know.
    return len(data) > 2 and data[0] == 0x08


def _all_nodes(graph):
    """The graph's nodes and those of its control-flow subgraphs."""
    from .graph import Graph

    for node in graph.nodes:
        yield node
        for value in node.attrs.values():
            if isinstance(value, Graph):
                yield from _all_nodes(value)


class Interpreter:
    """A model ready to create sessions (MNN's Interpreter).

    Arguments:
        source: path to a .wgnn or .onnx file, its bytes, an onnx ModelProto or a wgnn Model.
    """

    def __init__(self, source):
        load_ops()
        self.model = load_model(source)
        self.graph = self.model.graph
        self._validate()

    def _validate(self) -> None:
        unknown = Counter(n.op_type for n in _all_nodes(self.graph) if n.op_type not in OPS)
        if unknown:
            listed = ", ".join(f"{op} ({count} node{'s' * (count > 1)})" for op, count in sorted(unknown.items()))
            raise UnsupportedOpError(f"model uses op types wgnn does not know: {listed}", dict(unknown))
        self.graph.toposort()
        self.node_ops = [OPS[n.op_type] for n in self.graph.nodes]
        self.node_attrs = [op.resolve_attrs(n) for op, n in zip(self.node_ops, self.graph.nodes)]
        names = self.graph.tensor_names()
        for out in self.graph.outputs:
            if out.name not in names:
                raise ModelError(f'graph output "{out.name}" is not produced by any node')

    def create_session(self, config: Config | None = None, *, providers=None,
                       shapes: dict | None = None):
        """A Session; resized at once when every input shape is known (or given)."""
        from .session import Session

        if config is None:
            config = Config(providers=tuple(providers or ("numpy",)))
        elif providers is not None:
            raise WgnnError("give providers either in config or as an argument, not both")
        session = Session(self, config)
        static = all(t.shape is not None and all(isinstance(d, int) for d in t.shape)
                     for t in self.graph.inputs)
        if shapes or static:
            session.resize(shapes)
        return session
