"""The converter table: one small function per ONNX op type, registered with @onnx_op."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....engine.errors import ConversionError
from ....engine.graph import Node

CONVERTERS: dict[str, Callable] = {}


def onnx_op(*op_types: str):
    """Register fn(ctx, node) as the converter of each ONNX op type (default domain)."""

    def register(fn: Callable) -> Callable:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise RuntimeError(f"converter for {op_type} registered twice")
            CONVERTERS[op_type] = fn
        return fn

    return register


def same_op(onnx_type: str, op_type: str, **fixed_attrs) -> None:
    """Map an ONNX op 1:1 onto a wgnn op, copying its attributes and adding fixed ones."""

    def convert(ctx, node):
        ctx.emit(op_type, node.inputs, node.outputs, {**node.attrs, **fixed_attrs})

    CONVERTERS[onnx_type] = convert


class OnnxNode:
    """An ONNX NodeProto with decoded attributes (python values, numpy tensors, subgraphs)."""

    def __init__(self, proto, attrs: dict):
        self.proto = proto
        self.op_type = proto.op_type
        self.name = proto.name or (proto.output[0] if proto.output else proto.op_type)
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = attrs

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""


class ConvertContext:
    """What a converter function uses to read the ONNX node and emit wgnn nodes."""

    def __init__(self, graph, opset: int, origin: str = ""):
        self.graph = graph
        self.opset = opset
        self.origin = origin
        self.node: OnnxNode | None = None
        self._counter = 0

    def emit(self, op_type: str, inputs, outputs, attrs: dict | None = None, name: str | None = None) -> Node:
        node = Node(op_type, list(inputs), list(outputs), dict(attrs or {}),
                    name=name or (self.node.name if self.node else op_type))
        self.graph.nodes.append(node)
        return node

    def constant(self, name: str) -> np.ndarray | None:
        """The value of a tensor known at conversion (initializer or Constant), else None."""
        return self.graph.initializers.get(name) if name else None

    def require_constant(self, name: str, what: str) -> np.ndarray:
        value = self.constant(name)
        if value is None:
            raise self.fail(f"{what} (input {name!r}) must be a constant")
        return value

    def add_constant(self, value: np.ndarray, hint: str = "const") -> str:
        name = self.fresh(hint)
        self.graph.initializers[name] = np.asarray(value, order="C")
        return name

    def fresh(self, hint: str) -> str:
        self._counter += 1
        base = self.node.name if self.node else "wgnn"
        return f"{base}/{hint}_{self._counter}"

    def fail(self, message: str) -> ConversionError:
        where = f'{self.node.op_type} node "{self.node.name}"' if self.node else "graph"
        return ConversionError(f"{self.origin + ': ' if self.origin else ''}{where}: {message}")
