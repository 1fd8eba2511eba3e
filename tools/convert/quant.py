"""fold_qdq: QuantizeLinear -> DequantizeLinear pairs become one FakeQuantize (float -> float).

QDQ models (onnxruntime's quantizer, PyTorch's export) mark where a float tensor is rounded to
int8/uint8 by a QuantizeLinear whose readers are DequantizeLinear nodes with the same parameters.
The GPU stores no 8/16-bit tensors, so the pair runs as one FakeQuantize whose tensors are all
floats: the rounding and saturation are kept, the integer tensor between them is not.
DequantizeLinear of a constant (quantized weights) needs nothing here: constant folding, which
runs after this pass, turns it into a float initializer.

A QuantizeLinear is folded only when its output is no graph output, every reader is a
DequantizeLinear reading it as x with an equal scale, zero point, axis and block size (and no
other output type), and its zero point is absent or constant (it becomes a float constant).
Anything else keeps its QuantizeLinear / DequantizeLinear, which run on numpy.
"""
from __future__ import annotations

import logging

import numpy as np

from ...engine.graph import Graph, Node
from ...engine.ops.quant import DEFAULT_QUANT_DTYPE

log = logging.getLogger("wgnn.convert")


def fold_qdq(graph: Graph) -> None:
    from .passes import rename_uses

    consumers = graph.consumers()
    # Tensors read inside subgraphs (If / Loop bodies) are readers this pass cannot rewrite.
    outputs = {t.name for t in graph.outputs} | _subgraph_reads(graph)
    taken = graph.tensor_names()
    replaced: dict[int, Node | None] = {}  # id(node) -> its FakeQuantize (Q) or None (dropped DQ)
    renames: list[tuple[str, str]] = []
    for q in graph.nodes:
        if q.op_type != "QuantizeLinear" or q.attrs.get("precision"):
            continue
        y = q.outputs[0]
        readers = consumers.get(y, [])
        if y in outputs or not readers or len({id(r) for r in readers}) != len(readers):
            continue
        zero_point = _constant_or_absent(graph, q.input(2))
        if zero_point is False or not all(_same_params(graph, q, r) for r in readers):
            continue
        inputs = [q.inputs[0], q.inputs[1], _float_zero_point(graph, q, zero_point, taken)]
        attrs = {"axis": q.attrs.get("axis", 1), "block_size": q.attrs.get("block_size", 0),
                 "dtype": _quant_dtype(q, zero_point)}
        fake = Node("FakeQuantize", [n for n in inputs if n], [readers[0].outputs[0]], attrs, name=q.name)
        replaced[id(q)] = fake
        for reader in readers:
            replaced[id(reader)] = None
        # Further readers of the same QuantizeLinear compute the same values: read the first one's.
        for reader in readers[1:]:
            if reader.outputs[0] in outputs:
                replaced[id(reader)] = Node("Unary", [fake.outputs[0]], reader.outputs, {"kind": "identity"},
                                            name=reader.name)
            else:
                renames.append((reader.outputs[0], fake.outputs[0]))
    if not replaced:
        return
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if replaced.get(id(n), n) is not None]
    for old, new in renames:
        rename_uses(graph, old, new)
    log.debug("fold_qdq: %d QuantizeLinear -> DequantizeLinear pairs became FakeQuantize",
              sum(1 for n in replaced.values() if n is not None and n.op_type == "FakeQuantize"))


def _subgraph_reads(graph: Graph) -> set[str]:
    names: set[str] = set()
    for node in graph.nodes:
        for value in node.attrs.values():
            if isinstance(value, Graph):
                for inner in value.nodes:
                    names.update(n for n in inner.inputs if n)
                names.update(t.name for t in value.outputs)
                names |= _subgraph_reads(value)
    return names


def _constant_or_absent(graph: Graph, name: str):
    """The value of an optional input: None when absent, False when only known at run time."""
    if not name:
        return None
    return graph.initializers.get(name, False)


def _quant_dtype(q: Node, zero_point: np.ndarray | None) -> str:
    if zero_point is not None:
        return zero_point.dtype.name
    return q.attrs.get("dtype") or DEFAULT_QUANT_DTYPE


def _same_params(graph: Graph, q: Node, dq: Node) -> bool:
    """Whether dq undoes q exactly: same scale, zero point, axis and block size, float output of the
    scale's type."""
    if dq.input(0) != q.outputs[0] or q.outputs[0] in dq.inputs[1:] or dq.attrs.get("dtype"):
        return False
    if not _same_tensor(graph, q.input(1), dq.input(1)):
        return False
    q_zero, dq_zero = q.input(2), dq.input(2)
    if q_zero != dq_zero:
        a, b = _constant_or_absent(graph, q_zero), _constant_or_absent(graph, dq_zero)
        if a is False or b is False:
            return False
        if a is not None and b is not None and not _equal(a, b):
            return False
        # An absent zero point is 0 (of the same type: DequantizeLinear reads QuantizeLinear's output).
        if (a is None) != (b is None) and np.any((a if b is None else b) != 0):
            return False
    if q.attrs.get("block_size", 0) != dq.attrs.get("block_size", 0):
        return False
    scale = graph.initializers.get(q.input(1))
    if scale is not None and scale.size == 1 and scale.ndim <= 1:
        return True  # per tensor: the axis is not used
    return _same_axis(graph, q, q.attrs.get("axis", 1), dq.attrs.get("axis", 1), scale)


def _same_axis(graph: Graph, q: Node, a: int, b: int, scale: np.ndarray | None) -> bool:
    if a == b:
        return True
    if (a < 0) == (b < 0):
        return False
    # One counts from the end: equal when they differ by x's rank (a blocked scale has x's rank).
    rank = scale.ndim if scale is not None and q.attrs.get("block_size", 0) else _rank(graph, q.input(0))
    return rank is not None and abs(a - b) == rank


def _rank(graph: Graph, name: str) -> int | None:
    if name in graph.initializers:
        return graph.initializers[name].ndim
    for info in [*graph.inputs, *graph.value_info.values()]:
        if info.name == name and info.shape is not None:
            return len(info.shape)
    return None


def _same_tensor(graph: Graph, a: str, b: str) -> bool:
    if a == b:
        return True
    va, vb = graph.initializers.get(a), graph.initializers.get(b)
    return va is not None and vb is not None and _equal(va, vb)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def _float_zero_point(graph: Graph, q: Node, zero_point: np.ndarray | None, taken: set[str]) -> str:
    """The zero point as a float constant of the scale's type ("" when absent or all zeros)."""
    if zero_point is None or not np.any(zero_point):
        return ""
    scale = graph.initializers.get(q.input(1))
    dtype = scale.dtype if scale is not None else np.float32
    base = name = f"{q.input(2)}/float"
    i = 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    graph.initializers[name] = zero_point.astype(dtype)
    return name
