"""Subgraphs of If, Loop and Scan, run by the engine.

A control-flow node lists the outer tensors its subgraphs read ("captures") as extra inputs after
its ONNX inputs, so ordering, lifetimes and dead-code elimination see them; the subgraph nodes
read those tensors by their outer names.

- If with a condition known at resize is replaced by its branch's nodes (inline_branch); with a
  condition computed at run time it is a sync point, and the branch is inlined when planning the
  rest of the graph for the condition's value.
- Loop and Scan bodies run iteration by iteration in a numpy session (a host loop: each
  iteration's carried values decide the next), at resize when their inputs are known, else at a
  sync point.
"""
from __future__ import annotations

import numpy as np

from .errors import ShapeError, WgnnError, node_label
from .graph import Graph, Model, Node, TensorInfo

# A Loop whose trip count and condition never stop it is refused past this many iterations.
MAX_LOOP_ITERATIONS = 1 << 20


def subgraph_nodes(graph: Graph):
    """The graph's nodes with resolved attributes and op definitions."""
    from .ops.base import OPS

    for node in graph.nodes:
        op = OPS.get(node.op_type)
        if op is None:
            raise WgnnError(f"{node_label(node)} in subgraph {graph.name!r}: unknown op type")
        yield node, op.resolve_attrs(node), op


def reads_inside(graph: Graph, name: str) -> bool:
    """Whether a nested subgraph of graph's nodes reads tensor name."""
    for node in graph.nodes:
        for value in node.attrs.values():
            if isinstance(value, Graph) and (any(name in n.inputs for n in value.nodes) or reads_inside(value, name)):
                return True
    return False


def inline_branch(node: Node, branch: Graph):
    """The nodes that replace an If node: the branch's nodes, writing the If's outputs."""
    from .ops.base import OPS, Inlined

    produced = {out for n in branch.nodes for out in n.outputs if out}
    rename: dict[str, str] = {}
    copies: list[tuple[str, str]] = []
    for branch_out, if_out in zip(branch.outputs, node.outputs):
        if not if_out:
            continue
        name = branch_out.name
        if name in produced and name not in rename and not reads_inside(branch, name):
            rename[name] = if_out
        else:  # an outer tensor, a constant, an output listed twice: copy it
            copies.append((rename.get(name, name), if_out))
    nodes = []
    for n, attrs, op in subgraph_nodes(branch):
        copy = Node(n.op_type, [rename.get(i, i) for i in n.inputs], [rename.get(o, o) for o in n.outputs],
                    n.attrs, name=n.name)
        nodes.append((copy, attrs, op))
    identity = OPS["Unary"]
    for source, target in copies:
        copy = Node("Unary", [source], [target], {"kind": "identity"}, name=f"{node.name}/{target}")
        nodes.append((copy, identity.resolve_attrs(copy), identity))
    return Inlined(nodes, dict(branch.initializers))


def _wrapper(body: Graph, formal: list[tuple[str, np.ndarray]], captures: dict[str, np.ndarray]) -> Graph:
    """The body as a stand-alone graph: its formal inputs and the captured outer tensors are
    inputs, typed by the values they get (declared body shapes may not hold for every iteration)."""
    inputs = [TensorInfo(name, value.dtype.name, None) for name, value in formal if name]
    inputs += [TensorInfo(name, value.dtype.name, None) for name, value in captures.items()]
    return Graph(nodes=list(body.nodes), inputs=inputs, outputs=list(body.outputs),
                 initializers=dict(body.initializers), name=body.name)


class BodyRunner:
    """Runs a subgraph repeatedly on numpy; re-plans only when its input shapes change."""

    def __init__(self, node: Node, body: Graph, formal: list[tuple[str, np.ndarray]],
                 captures: dict[str, np.ndarray]):
        from .config import Config
        from .interpreter import Interpreter

        self.node = node
        self.captures = captures
        try:
            interpreter = Interpreter(Model(_wrapper(body, formal, captures)))
            self.session = interpreter.create_session(Config(providers=("numpy",)))
        except WgnnError as exc:
            raise type(exc)(f"{node_label(node)} subgraph: {exc}") from None
        self.outputs = [t.name for t in body.outputs]

    def __call__(self, formal: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
        feeds = {name: value for name, value in formal if name}
        feeds.update(self.captures)
        try:
            result = self.session.run(feeds, self.outputs)
        except WgnnError as exc:
            raise type(exc)(f"{node_label(self.node)} subgraph: {exc}") from None
        return [result[name] for name in self.outputs]


def _scalar(value: np.ndarray, what: str, node: Node):
    array = np.asarray(value)
    if array.size != 1:
        raise ShapeError(f"{node_label(node)}: {what} must hold one element, got shape {list(array.shape)}")
    return array.reshape(-1)[0]


def run_branch(node: Node, attrs: dict, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """An If evaluated on numpy: its branch run with the captured tensors."""
    branch = attrs["then_branch"] if bool(_scalar(inputs[0], "the condition", node)) else attrs["else_branch"]
    captures = {name: value for name, value in zip(node.inputs[1:], inputs[1:]) if name}
    return BodyRunner(node, branch, [], captures)([])


def run_loop(node: Node, attrs: dict, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """ONNX Loop: carried values and scan outputs after the body ran while i < M and cond."""
    body: Graph = attrs["body"]
    carried_count = len(body.inputs) - 2
    if carried_count < 0 or len(body.outputs) < carried_count + 1:
        raise ShapeError(f"{node_label(node)}: the body must take (iteration, condition, carried...) and return "
                         f"(condition, carried..., scan outputs...); it has {len(body.inputs)} inputs and "
                         f"{len(body.outputs)} outputs")
    trip = inputs[0] if len(inputs) > 0 else None
    cond = inputs[1] if len(inputs) > 1 else None
    limit = int(_scalar(trip, "the trip count M", node)) if trip is not None else None
    keep_going = bool(_scalar(cond, "the condition", node)) if cond is not None else True
    carried = [np.asarray(v) for v in inputs[2:2 + carried_count]]
    if len(carried) != carried_count:
        raise ShapeError(f"{node_label(node)}: the body carries {carried_count} values, the node gives {len(carried)}")
    captures = {name: value for name, value in zip(node.inputs[2 + carried_count:], inputs[2 + carried_count:])
                if name}
    names = [t.name for t in body.inputs]
    scan_count = len(body.outputs) - 1 - carried_count
    scans: list[list[np.ndarray]] = [[] for _ in range(scan_count)]
    runner = None
    iteration = 0
    while keep_going and (limit is None or iteration < limit):
        if iteration >= MAX_LOOP_ITERATIONS:
            raise WgnnError(f"{node_label(node)}: the loop ran {MAX_LOOP_ITERATIONS} iterations without stopping")
        formal = list(zip(names, [np.array(iteration, np.int64), np.array(keep_going), *carried]))
        runner = runner or BodyRunner(node, body, formal, captures)
        outs = runner(formal)
        keep_going = bool(_scalar(outs[0], "the body's condition output", node))
        carried = outs[1:1 + carried_count]
        for i, value in enumerate(outs[1 + carried_count:]):
            scans[i].append(value)
        iteration += 1
    stacked = [np.stack(values) if values else _empty_scan(body, 1 + carried_count + i)
               for i, values in enumerate(scans)]
    return carried + stacked


def _empty_scan(body: Graph, index: int) -> np.ndarray:
    info = body.outputs[index]
    dims = [d if isinstance(d, int) else 0 for d in (info.shape or ())]
    return np.zeros((0, *dims), info.dtype or "float32")


def run_scan(node: Node, attrs: dict, inputs: list[np.ndarray | None]) -> list[np.ndarray]:
    """ONNX Scan (opset 9+): the body runs once per slice of the scan inputs, carrying states."""
    body: Graph = attrs["body"]
    scan_inputs = attrs["num_scan_inputs"]
    states = len(body.inputs) - scan_inputs
    scan_outputs = len(body.outputs) - states
    if states < 0 or scan_outputs < 0:
        raise ShapeError(f"{node_label(node)}: num_scan_inputs {scan_inputs} does not fit a body with "
                         f"{len(body.inputs)} inputs and {len(body.outputs)} outputs")
    values = [np.asarray(v) for v in inputs[:states + scan_inputs]]
    captures = {name: value for name, value in zip(node.inputs[states + scan_inputs:],
                                                   inputs[states + scan_inputs:]) if name}
    in_axes = _per_input(attrs["scan_input_axes"], scan_inputs, node, "scan_input_axes")
    in_dirs = _per_input(attrs["scan_input_directions"], scan_inputs, node, "scan_input_directions")
    out_axes = _per_input(attrs["scan_output_axes"], scan_outputs, node, "scan_output_axes")
    out_dirs = _per_input(attrs["scan_output_directions"], scan_outputs, node, "scan_output_directions")
    sequences = []
    for i, (value, axis) in enumerate(zip(values[states:], in_axes)):
        if not -value.ndim <= axis < value.ndim:
            raise ShapeError(f"{node_label(node)}: scan input {i} of rank {value.ndim} has no axis {axis}")
        moved = np.moveaxis(value, axis, 0)
        sequences.append(moved[::-1] if in_dirs[i] else moved)
    lengths = {len(s) for s in sequences}
    if len(lengths) > 1:
        raise ShapeError(f"{node_label(node)}: scan inputs have different sequence lengths {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    carried = values[:states]
    names = [t.name for t in body.inputs]
    collected: list[list[np.ndarray]] = [[] for _ in range(scan_outputs)]
    runner = None
    for t in range(length):
        formal = list(zip(names, [*carried, *(s[t] for s in sequences)]))
        runner = runner or BodyRunner(node, body, formal, captures)
        outs = runner(formal)
        carried = outs[:states]
        for i, value in enumerate(outs[states:]):
            collected[i].append(value)
    results = list(carried)
    for i, parts in enumerate(collected):
        if not parts:
            results.append(_empty_scan(body, states + i))
            continue
        stacked = np.stack(parts[::-1] if out_dirs[i] else parts)
        axis = out_axes[i] + stacked.ndim if out_axes[i] < 0 else out_axes[i]
        if not 0 <= axis < stacked.ndim:
            raise ShapeError(f"{node_label(node)}: scan output {i} of rank {stacked.ndim} has no axis {out_axes[i]}")
        results.append(np.moveaxis(stacked, 0, axis))
    return results


def _per_input(values: list[int], count: int, node: Node, what: str) -> list[int]:
    if not values:
        return [0] * count
    if len(values) != count:
        raise ShapeError(f"{node_label(node)}: {what} has {len(values)} entries for {count} tensors")
    return list(values)


def branch_specs(node: Node, branch: Graph, specs: list, values: list) -> list:
    """Output specs of a branch, by shape inference on it with the captured tensors' specs."""
    from ..backends.base import Step
    from ..backends.numpy.kernel import evaluate
    from .shapes import infer_shapes

    captured = {name: spec for name, spec in zip(node.inputs[1:], specs[1:]) if name}
    graph = Graph(nodes=list(branch.nodes), inputs=[], outputs=list(branch.outputs),
                  initializers={**{n: v for n, v in zip(node.inputs[1:], values[1:]) if n and v is not None},
                                **branch.initializers}, name=branch.name)
    triples = list(subgraph_nodes(branch))
    result = infer_shapes(graph, [a for _, a, _ in triples], [o for _, _, o in triples],
                          {n: s for n, s in captured.items() if n not in graph.initializers},
                          lambda inferred, vals: evaluate(Step(inferred.node, inferred.op, inferred.attrs,
                                                               list(inferred.node.inputs),
                                                               list(inferred.node.outputs), inferred.input_specs,
                                                               inferred.output_specs, inferred.input_values), vals))
    if result.sync is not None:
        raise ShapeError(f"{node_label(node)}: branch {branch.name!r}: {result.sync.reason}")
    return [result.specs[t.name] for t in branch.outputs]
