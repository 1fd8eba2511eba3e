"""Graph passes run after conversion. Each takes a Graph and rewrites it in place."""
from __future__ import annotations

import logging
from dataclasses import replace

from ...engine.graph import Graph, Node

log = logging.getLogger("wgnn.convert")


def optimize_graph(graph: Graph) -> Graph:
    """The conversion pipeline: clean up, fold what is known, fuse, then drop what is unused."""
    from .fold import fold_constants
    from .fusion import FUSION_PASSES
    from .quant import fold_qdq
    from .simplify import drop_no_ops

    graph.toposort()
    for fn in (remove_identities, fold_qdq, fold_constants, drop_no_ops, *FUSION_PASSES, eliminate_dead_code):
        fn(graph)
    return graph


def optimize_subgraph(graph: Graph) -> Graph:
    """Subgraphs (If branches, Loop and Scan bodies) are cleaned, not folded: their inputs may
    change shape from one iteration to the next whatever they declare."""
    for fn in (remove_identities, eliminate_dead_code):
        fn(graph)
    return graph


def rename_uses(graph: Graph, old: str, new: str) -> None:
    """Point every reader of tensor old (nodes, and the subgraphs of control-flow nodes) at
    tensor new."""
    for node in graph.nodes:
        node.inputs = [new if name == old else name for name in node.inputs]
        for value in node.attrs.values():
            if isinstance(value, Graph):
                rename_uses(value, old, new)
                value.outputs = [replace(t, name=new) if t.name == old else t for t in value.outputs]


def remove_identities(graph: Graph) -> None:
    """Identity (and Dropout in inference) nodes disappear; readers read their input directly.
    An identity whose output is a graph output goes too where its input is another node's
    output that is no graph output itself: that node writes the graph output, and the input's
    other readers read it there (no copy: a KV cache's present keys, read by the attention too).
    Otherwise it stays, so output names are kept."""
    outputs = {t.name for t in graph.outputs}
    producers = graph.producers()
    inputs = {t.name for t in graph.inputs} | set(graph.initializers)
    kept: list[Node] = []
    for node in graph.nodes:
        if node.op_type != "Unary" or node.attrs.get("kind") != "identity":
            kept.append(node)
            continue
        source, target = node.inputs[0], node.outputs[0]
        if target not in outputs:
            rename_uses(graph, target, source)
            continue
        producer = producers.get(source)
        if producer is None or source in outputs or source in inputs:
            kept.append(node)
            continue
        producer.outputs = [target if name == source else name for name in producer.outputs]
        producers[target] = producer
        rename_uses(graph, source, target)
    graph.nodes = kept


def eliminate_dead_code(graph: Graph) -> None:
    """Drop nodes whose outputs nobody reads, and unused initializers."""
    needed = {t.name for t in graph.outputs}
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs if o):
            kept.append(node)
            needed.update(n for n in node.inputs if n)
    graph.nodes = list(reversed(kept))
    for name in list(graph.initializers):
        if name not in needed:
            del graph.initializers[name]
