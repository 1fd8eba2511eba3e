"""The graph IR shared by the converter, the model file and the engine.

Tensors are referred to by name. A node's absent optional input is the empty string. Shapes are
tuples whose dims are ints (fixed) or strings (symbolic, bound when a session is resized); a shape
of None means the rank is unknown.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ModelError

Dim = int | str
Shape = tuple[Dim, ...]


@dataclass
class TensorInfo:
    name: str
    dtype: str | None = None
    shape: Shape | None = None

    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


@dataclass
class Node:
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def input(self, i: int) -> str:
        """Name of input i, or "" when it is absent."""
        return self.inputs[i] if i < len(self.inputs) else ""


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    value_info: dict[str, TensorInfo] = field(default_factory=dict)
    name: str = ""

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs if out}

    def consumers(self) -> dict[str, list[Node]]:
        result: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    result.setdefault(name, []).append(node)
        return result

    def toposort(self) -> None:
        """Order nodes so every input is produced before use; raise ModelError on cycles or
        references to tensors that nothing defines."""
        known = {t.name for t in self.inputs} | set(self.initializers)
        producer = self.producers()
        order: list[Node] = []
        state: dict[int, int] = {}  # id(node) -> 1 visiting, 2 done

        def visit(node: Node) -> None:
            stack = [(node, iter(node.inputs))]
            state[id(node)] = 1
            while stack:
                current, pending = stack[-1]
                advanced = False
                for name in pending:
                    if not name or name in known:
                        continue
                    dep = producer.get(name)
                    if dep is None:
                        raise ModelError(
                            f'{current.op_type} node "{current.name}" reads tensor "{name}", '
                            "which no node, input or initializer defines")
                    mark = state.get(id(dep))
                    if mark == 1:
                        raise ModelError(f'graph has a cycle through node "{dep.name}" ({dep.op_type})')
                    if mark is None:
                        state[id(dep)] = 1
                        stack.append((dep, iter(dep.inputs)))
                        advanced = True
                        break
                if not advanced:
                    stack.pop()
                    state[id(current)] = 2
                    order.append(current)

        for node in self.nodes:
            if id(node) not in state:
                visit(node)
        self.nodes = order

    def tensor_names(self) -> set[str]:
        names = {t.name for t in self.inputs} | set(self.initializers)
        for node in self.nodes:
            names.update(o for o in node.outputs if o)
        return names


@dataclass
class Model:
    graph: Graph
    producer_name: str = "wgnn"
    producer_version: str = ""
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
