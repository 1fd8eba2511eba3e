"""If, Loop and Scan. Subgraphs arrive converted (decode_attrs); here their own tensor names get
the node's name as a prefix (ONNX names need only be unique per model, and converters invent
names of their own), and the outer tensors they read become extra inputs of the node."""
from __future__ import annotations

from ....engine.graph import Graph, Node, TensorInfo
from .table import onnx_op


def defined_names(graph: Graph) -> set[str]:
    names = {t.name for t in graph.inputs} | set(graph.initializers)
    names.update(out for node in graph.nodes for out in node.outputs if out)
    return names


def captured_names(graph: Graph) -> list[str]:
    """Outer tensors the graph reads (its nodes' inputs and outputs it passes through), in order
    of first use. Nested control-flow nodes already list their captures as inputs."""
    defined = defined_names(graph)
    seen: dict[str, None] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name and name not in defined:
                seen.setdefault(name)
    for info in graph.outputs:
        if info.name not in defined:
            seen.setdefault(info.name)
    return list(seen)


def rename_tensors(graph: Graph, mapping: dict[str, str]) -> None:
    """Rename tensors everywhere in graph, nested subgraphs included (their references to the
    outer names follow)."""
    graph.inputs = [TensorInfo(mapping.get(t.name, t.name), t.dtype, t.shape) for t in graph.inputs]
    graph.outputs = [TensorInfo(mapping.get(t.name, t.name), t.dtype, t.shape) for t in graph.outputs]
    graph.initializers = {mapping.get(k, k): v for k, v in graph.initializers.items()}
    graph.value_info = {mapping.get(k, k): TensorInfo(mapping.get(k, k), v.dtype, v.shape)
                        for k, v in graph.value_info.items()}
    for node in graph.nodes:
        node.inputs = [mapping.get(n, n) for n in node.inputs]
        node.outputs = [mapping.get(n, n) for n in node.outputs]
        for value in node.attrs.values():
            if isinstance(value, Graph):
                rename_tensors(value, mapping)


def scoped(graph: Graph, prefix: str) -> Graph:
    """The subgraph with every tensor it defines renamed prefix/name, optimised on its own."""
    from ..passes import optimize_subgraph

    rename_tensors(graph, {name: f"{prefix}/{name}" for name in defined_names(graph)})
    return optimize_subgraph(graph)


def _control_node(ctx, node, inputs: list[str], attrs: dict, graphs: list[str]) -> Node:
    for key in graphs:
        attrs[key] = scoped(attrs[key], f"{node.name}/{key}")
    captures: dict[str, None] = {}
    for key in graphs:
        for name in captured_names(attrs[key]):
            captures.setdefault(name)
    return ctx.emit(node.op_type, inputs + list(captures), node.outputs, attrs)


@onnx_op("If")
def if_(ctx, node):
    _control_node(ctx, node, [node.input(0)], {"then_branch": node.attrs["then_branch"],
                                                "else_branch": node.attrs["else_branch"]},
                  ["then_branch", "else_branch"])


@onnx_op("Loop")
def loop(ctx, node):
    _control_node(ctx, node, list(node.inputs), {"body": node.attrs["body"]}, ["body"])


@onnx_op("Scan")
def scan(ctx, node):
    if ctx.opset < 9:
        raise ctx.fail("Scan of opset 8 (with a batch axis and sequence_lens) is not supported; "
                       "re-export the model with opset 9 or newer")
    attrs = {key: node.attrs[key] for key in ("num_scan_inputs", "scan_input_axes", "scan_input_directions",
                                              "scan_output_axes", "scan_output_directions") if key in node.attrs}
    attrs["body"] = node.attrs["body"]
    _control_node(ctx, node, list(node.inputs), attrs, ["body"])
