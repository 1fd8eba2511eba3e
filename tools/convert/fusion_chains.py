"""Fusion of element-wise chains (run after the passes of fusion.py, so a Conv / MatMul epilogue
takes its bias, residual and activation first).

- fuse_layer_norm_pattern: LayerNormalization spelled out, as exporters write it before opset 17
  (ReduceMean, Sub, Pow or Mul, ReduceMean, Add epsilon, Sqrt, Div or Reciprocal + Mul, then an
  optional Mul by a scale and Add of a bias), becomes one LayerNorm node.
- fold_add_into_layer_norm: an Add read only by a LayerNorm (a transformer's word + position
  embeddings) becomes the LayerNorm's skip input, added as its rows load.
- fuse_elementwise_chains: connected float32 Unary / Binary (arithmetic) nodes become one
  FusedElementwise node (engine/ops/fused.py), so SiLU (x * sigmoid(x)), GELU as Div/Erf/Add/Mul/
  Mul, HardSwish as Add/Clip/Div/Mul or a scale-then-mask in attention run as one GPU dispatch.

A node's output is fused away only when no node outside the fused group reads it, no subgraph
reads it and it is no graph output, so nothing can observe the difference.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from ...engine.graph import Graph, Node
from ...engine.ops.binary import ARITHMETIC_KINDS, COMPARE_KINDS
from ...engine.ops.fused import STEP_KINDS, Step, encode_program
from .quant import _subgraph_reads

log = logging.getLogger("wgnn.convert")

MAX_INPUTS = 8  # a GPU dispatch binds each input (and the output) as a storage buffer
MAX_STEPS = 16


# ------------------------------------------------------------------------------- helpers
class _Graph:
    """Readers, producers and observed tensors of a graph, and tensor element types."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.producers = graph.producers()
        self.readers: dict[str, list[Node]] = graph.consumers()
        # Tensors that must stay materialised: graph outputs and tensors subgraphs read.
        self.observed = {t.name for t in graph.outputs} | _subgraph_reads(graph)
        self.dtypes = {t.name: t.dtype for t in graph.inputs if t.dtype}
        self.dtypes.update((name, info.dtype) for name, info in graph.value_info.items() if info.dtype)
        self.dtypes.update((name, value.dtype.name) for name, value in graph.initializers.items())
        self.probe: dict | None = None
        self.same_type = _same_type_classes(graph)

    def spec(self, name: str):
        """The tensor's spec under fusion.probe_shapes (symbolic dims bound to probe sizes), or None."""
        if self.probe is None:
            # fusion.py imports this module: import it here, when a pass first needs it.
            from .fusion import PROBE_BINDINGS, probe_shapes

            self.probe = probe_shapes(self.graph, PROBE_BINDINGS[0])
        return self.probe.get(name)

    def dtype(self, name: str) -> str | None:
        """The tensor's element type: declared, or that of a tensor the IR's typing rules make it
        share, or found by the shape probe; None when unknown."""
        for other in self.same_type.get(name, (name,)):
            if other in self.dtypes:
                return self.dtypes[other]
        spec = self.spec(name)
        return spec.dtype if spec is not None else None

    def shape(self, name: str) -> tuple | None:
        """The tensor's shape under the probe: its rank is right, symbolic dims have probe sizes."""
        spec = self.spec(name)
        return spec.shape if spec is not None else None

    def add_initializer(self, value: np.ndarray, base: str) -> str:
        taken = self.graph.tensor_names()
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        self.graph.initializers[name] = value
        self.dtypes[name] = value.dtype.name
        return name

    def only_read_by(self, name: str, nodes) -> bool:
        """Whether every reader of tensor name is one of nodes, and nothing else observes it."""
        members = {id(n) for n in nodes}
        return name not in self.observed and all(id(r) in members for r in self.readers.get(name, []))

    def constant(self, name: str) -> np.ndarray | None:
        return self.graph.initializers.get(name)

    def producer(self, name: str, op_type: str, kind: str | None = None) -> Node | None:
        node = self.producers.get(name)
        if node is None or node.op_type != op_type or (kind is not None and node.attrs.get("kind") != kind):
            return None
        return node


def _same_type_classes(graph: Graph) -> dict[str, list[str]]:
    """Tensors that have one element type in any valid graph: a Unary's input and output (kinds
    that keep the type), a Binary's inputs (and its output for arithmetic kinds; Pow's exponent
    aside). So a chain fed by a float32 constant is float32 even where no shape can be probed."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def union(*names: str) -> None:
        roots = [find(n) for n in names if n]
        for root in roots[1:]:
            parent[root] = roots[0]

    for node in graph.nodes:
        kind = node.attrs.get("kind")
        if node.op_type == "Unary" and kind in STEP_KINDS["Unary"] and len(node.inputs) == 1:
            union(node.inputs[0], *node.outputs[:1])
        elif node.op_type == "Binary" and len(node.inputs) == 2 and kind in ARITHMETIC_KINDS + COMPARE_KINDS:
            if kind == "pow":
                union(node.inputs[0], *node.outputs[:1])
            elif kind in COMPARE_KINDS:
                union(*node.inputs)
            else:
                union(*node.inputs, *node.outputs[:1])
    classes: dict[str, list[str]] = {}
    for name in parent:
        classes.setdefault(find(name), []).append(name)
    return {name: classes[find(name)] for name in parent}


def _scalar(value: np.ndarray | None) -> float | None:
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


# -------------------------------------------------------------------------- LayerNorm
def fuse_layer_norm_pattern(graph: Graph) -> None:
    """y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale] [+ bias] over trailing
    axes -> LayerNorm(x, scale, bias). Scale and bias must be float32 constants that broadcast
    onto the normalized axes only (LayerNorm cannot scale along the outer ones)."""
    g = _Graph(graph)
    replaced: dict[int, Node] = {}  # id(last node of a match) -> its LayerNorm
    removed: set[int] = set()
    for node in graph.nodes:
        match = _match_layer_norm(g, node)
        if match is None or any(id(n) in removed or id(n) in replaced for n in match.nodes):
            continue
        last = match.nodes[-1]
        replaced[id(last)] = Node("LayerNorm", [match.x, match.scale, match.bias], [last.outputs[0]],
                                  {"axis": match.axis, "epsilon": match.epsilon}, name=last.name)
        removed.update(id(n) for n in match.nodes[:-1])
    if replaced:
        log.debug("fuse_layer_norm_pattern: %d LayerNorm(s) from %d nodes", len(replaced), len(removed) + len(replaced))
        graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


def fold_add_into_layer_norm(graph: Graph) -> None:
    """Add(a, b) whose only reader is a float32 LayerNorm (as X) -> LayerNorm(a, scale, bias, b):
    one dispatch fewer, the sum formed as the rows load. The operand of the sum's shape stays X;
    the other becomes the skip, under both probe bindings of the symbolic dims: whole normalized
    rows, broadcasting over the leading axes only. Only where the rows are whole vec4s and scale
    and bias cover them exactly (the GPU kernels that add the skip; numpy adds it anywhere)."""
    from .fusion import PROBE_BINDINGS, _Rewriter, probe_shapes
    from .quant import _subgraph_reads

    rw = _Rewriter(graph)
    hidden = _subgraph_reads(graph)
    probes = None
    for norm in graph.nodes:
        if norm.op_type != "LayerNorm" or norm.input(3):
            continue
        add = rw.producer(norm.input(0), ("Binary",))
        if (add is None or add.attrs.get("kind") != "add" or not rw.sole_reader(add.outputs[0], norm)
                or add.outputs[0] in hidden or add.input(0) == add.input(1)):
            continue
        if probes is None:
            probes = [probe_shapes(graph, base) for base in PROBE_BINDINGS]
        for x, skip in ((add.input(0), add.input(1)), (add.input(1), add.input(0))):
            if all(_skip_fits(probe, x, skip, norm) for probe in probes):
                norm.inputs = [x, norm.input(1), norm.input(2), skip]
                rw.removed.add(id(add))
                break
    rw.finish("fold_add_into_layer_norm")


def _skip_fits(probe: dict, x: str, skip: str, norm: Node) -> bool:
    specs = [probe.get(name) for name in (x, skip, norm.outputs[0], norm.input(1))]
    if any(spec is None or spec.dtype != "float32" for spec in specs):
        return False
    x_spec, skip_spec, y_spec, scale_spec = specs
    shape, skip_shape = tuple(x_spec.shape), tuple(skip_spec.shape)
    if shape != tuple(y_spec.shape) or len(skip_shape) > len(shape):
        return False
    axis = norm.attrs.get("axis", -1) % len(shape)
    normalized = shape[axis:]
    leading = skip_shape[:len(skip_shape) - len(normalized)] if len(skip_shape) >= len(normalized) else None
    bias = probe.get(norm.input(2)) if norm.input(2) else None
    return (leading is not None and skip_shape[len(leading):] == normalized
            and all(s in (1, n) for s, n in zip(reversed(leading), reversed(shape[:axis]), strict=False))
            and math.prod(normalized) % 4 == 0
            and all(_covers(spec.shape, normalized) for spec in (scale_spec, bias) if spec is not None))


def _covers(shape: tuple, normalized: tuple) -> bool:
    """A scale / bias of exactly the normalized shape (leading 1s aside): contiguous along the rows."""
    shape = tuple(shape)
    while len(shape) > len(normalized) and shape[0] == 1:
        shape = shape[1:]
    return shape == tuple(normalized)


@dataclass
class _LayerNormMatch:
    x: str
    axis: int
    epsilon: float
    nodes: list[Node]  # in graph order; the last one's output is the LayerNorm's
    scale: str = ""
    bias: str = ""


def _match_layer_norm(g: _Graph, norm: Node) -> _LayerNormMatch | None:
    """The spelled-out LayerNorm whose normalizing step is norm: Div(d, sqrt(var + eps)), or
    Mul(d, Reciprocal(sqrt(var + eps))) in either order; None when norm is no such step."""
    if norm.op_type != "Binary" or norm.attrs.get("kind") not in ("div", "mul"):
        return None
    reciprocal = None
    if norm.attrs["kind"] == "div":
        d, root = norm.inputs
    else:
        found = [(a, g.producer(b, "Unary", "reciprocal")) for a, b in (norm.inputs, norm.inputs[::-1])]
        d, reciprocal = next(((a, r) for a, r in found if r is not None), (None, None))
        if reciprocal is None:
            return None
        root = reciprocal.inputs[0]
    sqrt = g.producer(root, "Unary", "sqrt")
    add_eps = g.producer(sqrt.inputs[0], "Binary", "add") if sqrt else None
    sub = g.producer(d, "Binary", "sub")
    if add_eps is None or sub is None:
        return None
    var_name, epsilon = next(((a, _scalar(g.constant(b))) for a, b in (add_eps.inputs, add_eps.inputs[::-1])
                              if _scalar(g.constant(b)) is not None), ("", None))
    var = g.producer(var_name, "Reduce", "mean")
    square = g.producer(var.inputs[0], "Binary") if var else None
    x, mean_name = sub.inputs
    mean = g.producer(mean_name, "Reduce", "mean")
    if square is None or mean is None or mean.inputs[0] != x or not _squares(g, square, d):
        return None
    axes = _trailing_axes(g, mean, var)
    if axes is None or g.dtype(x) != "float32":
        return None
    inner = [(mean_name, [sub]), (d, [square, norm]), (square.outputs[0], [var]), (var_name, [add_eps]),
             (add_eps.outputs[0], [sqrt]), (sqrt.outputs[0], [reciprocal or norm])]
    if reciprocal is not None:
        inner.append((reciprocal.outputs[0], [norm]))
    if not all(g.only_read_by(name, readers) for name, readers in inner):
        return None
    nodes = [mean, sub, square, var, add_eps, sqrt, *([reciprocal] if reciprocal else []), norm]
    match = _LayerNormMatch(x, -len(axes), epsilon, nodes)
    for kind in ("mul", "add"):  # the optional scale, then the optional bias
        _take_affine(g, match, kind, len(axes))
    if not match.scale:
        match.scale = g.add_initializer(np.ones((), np.float32), f"{match.nodes[-1].name}/ln_scale")
    return match


def _take_affine(g: _Graph, match: _LayerNormMatch, kind: str, normalized: int) -> None:
    """Extends match by a following Mul (scale) or Add (bias) with a float32 constant that
    broadcasts onto the normalized axes only."""
    out = match.nodes[-1].outputs[0]
    readers = g.readers.get(out, [])
    node = readers[0] if len(readers) == 1 else None
    if node is None or node.op_type != "Binary" or node.attrs.get("kind") != kind or not g.only_read_by(out, [node]):
        return
    other = node.inputs[1] if node.inputs[0] == out else node.inputs[0]
    value = g.constant(other)
    if value is None or value.dtype != np.float32 or other == out:
        return
    shape = value.shape
    while len(shape) > normalized and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > normalized:
        return
    name = other if shape == value.shape else g.add_initializer(value.reshape(shape), f"{node.name}/{kind}")
    if kind == "mul":
        match.scale = name
    else:
        match.bias = name
    match.nodes.append(node)


def _squares(g: _Graph, square: Node, d: str) -> bool:
    """Whether square computes d * d or d ** 2."""
    kind = square.attrs.get("kind")
    if kind == "mul":
        return list(square.inputs) == [d, d]
    return kind == "pow" and square.inputs[0] == d and _scalar(g.constant(square.inputs[1])) == 2.0


def _trailing_axes(g: _Graph, mean: Node, var: Node) -> list[int] | None:
    """The axes both ReduceMeans reduce, keeping them, as the trailing axes -k..-1; or None."""
    from ...engine.ops.base import get_op

    resolved = [get_op("Reduce").resolve_attrs(n) for n in (mean, var)]
    if any(not a["keepdims"] or not a["axes"] for a in resolved):
        return None
    axes = [set(a["axes"]) for a in resolved]
    if any(a >= 0 for s in axes for a in s):  # positive axes become trailing ones given the rank
        shape = g.shape(mean.inputs[0])
        if shape is None:
            return None
        axes = [{a - len(shape) if a >= 0 else a for a in s} for s in axes]
    trailing = sorted(axes[0])
    if axes[0] != axes[1] or trailing != list(range(-len(trailing), 0)):
        return None
    return trailing


# ---------------------------------------------------------------------- element-wise chains
@dataclass
class _Group:
    """Nodes fused into one FusedElementwise; only the last one's output leaves the group."""

    nodes: list[Node] = field(default_factory=list)

    def inputs(self) -> list[str]:
        made = {o for n in self.nodes for o in n.outputs}
        names = [name for n in self.nodes for name in n.inputs if name not in made]
        return list(dict.fromkeys(names))


def fuse_elementwise_chains(graph: Graph, *, max_inputs: int = MAX_INPUTS, max_steps: int = MAX_STEPS) -> None:
    """Greedy, in graph order: a fusable node joins the groups of the fusable nodes it reads when
    their output has no reader outside the merged group (and is no graph output), while the group
    stays within max_inputs distinct inputs and max_steps nodes. Groups of two or more nodes
    become FusedElementwise nodes at the place of their last node."""
    g = _Graph(graph)
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    group_of: dict[int, _Group] = {}
    fusable: set[str] = set()  # outputs of fusable nodes (float32 by construction)
    for node in graph.nodes:
        if not _fusable(g, node, fusable):
            continue
        fusable.add(node.outputs[0])
        group = _Group([node])
        # Inputs of groups merged in are tried too: a tensor read on several paths that meet
        # here (a diamond) becomes internal once every path is in the group.
        tried: set[str] = set()
        while pending := [name for name in group.inputs() if name not in tried]:
            for name in pending:
                tried.add(name)
                producer = g.producers.get(name)
                feeding = group_of.get(id(producer)) if producer is not None else None
                if feeding is None or feeding is group:
                    continue
                merged = _Group(sorted(feeding.nodes + group.nodes, key=lambda n: order[id(n)]))
                if (g.only_read_by(name, merged.nodes) and len(merged.nodes) <= max_steps
                        and len(merged.inputs()) <= max_inputs):
                    group = merged
        for member in group.nodes:
            group_of[id(member)] = group
    groups = {id(grp): grp for grp in group_of.values() if len(grp.nodes) > 1}
    if not groups:
        return
    replaced = {id(grp.nodes[-1]): _fused_node(grp) for grp in groups.values()}
    removed = {id(n) for grp in groups.values() for n in grp.nodes[:-1]}
    log.debug("fuse_elementwise_chains: %d node(s) became %d FusedElementwise", len(removed) + len(replaced),
              len(replaced))
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


def _fusable(g: _Graph, node: Node, fusable: set[str]) -> bool:
    """A float32 Unary / arithmetic Binary node with one output."""
    if node.op_type == "Unary":
        ok = node.attrs.get("kind") in STEP_KINDS["Unary"] and len(node.inputs) == 1
    elif node.op_type == "Binary":
        ok = node.attrs.get("kind") in ARITHMETIC_KINDS and len(node.inputs) == 2
    else:
        return False
    if not ok or len(node.outputs) != 1 or not node.outputs[0] or not all(node.inputs):
        return False
    return all(name in fusable or g.dtype(name) == "float32" for name in node.inputs)


def _fused_node(group: _Group) -> Node:
    inputs = group.inputs()
    index = {name: i for i, name in enumerate(inputs)}
    steps = []
    for node in group.nodes:
        operands = tuple(index[name] for name in node.inputs)
        if node.op_type == "Unary":
            steps.append(Step("Unary", node.attrs["kind"], operands, float(node.attrs.get("alpha", 0.0)),
                              float(node.attrs.get("beta", 0.0))))
        else:
            steps.append(Step("Binary", node.attrs["kind"], operands))
        index[node.outputs[0]] = len(inputs) + len(steps) - 1
    last = group.nodes[-1]
    return Node("FusedElementwise", inputs, [last.outputs[0]], encode_program(steps), name=last.name)


def fold_casts_into_chains(graph: Graph) -> None:
    """Cast(x, to=float32) of an integer or bool x, read only by a FusedElementwise node (or by a
    lone float32 Unary / arithmetic Binary node, which becomes a FusedElementwise of one step),
    becomes that node's cast input: the program converts x as it loads it, and the Cast's dispatch
    is gone. Attention masks are made this way (Cast, then Sub and Mul). At least one input stays
    float32 (it gives the program's type)."""
    from ...engine.ops.fused import CASTABLE_DTYPES

    g = _Graph(graph)
    replaced: dict[int, Node] = {}
    removed: set[int] = set()
    for node in graph.nodes:
        if node.op_type == "FusedElementwise":
            target = node
        elif node.op_type in ("Unary", "Binary") and _fusable(g, node, set()) and any(
                g.producer(name, "Cast") is not None for name in node.inputs):
            target = _fused_node(_Group([node]))
        else:
            continue
        cast = set(target.attrs.get("cast_inputs") or ())
        inputs = list(target.inputs)
        for i, name in enumerate(inputs):
            producer = g.producers.get(name)
            if (producer is None or producer.op_type != "Cast" or producer.attrs.get("to") != "float32"
                    or g.dtype(producer.inputs[0]) not in CASTABLE_DTYPES or producer.inputs[0] in inputs
                    or not g.only_read_by(name, [node]) or len(cast) + 1 >= len(inputs)):
                continue
            inputs[i] = producer.inputs[0]
            cast.add(i)
            removed.add(id(producer))
        if cast != set(target.attrs.get("cast_inputs") or ()):
            replaced[id(node)] = Node("FusedElementwise", inputs, list(target.outputs),
                                      {**target.attrs, "cast_inputs": sorted(cast)}, name=target.name)
    if replaced:
        log.debug("fold_casts_into_chains: %d Cast(s) folded", len(removed))
        graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


# The LayerNorm pattern first: chain fusion would otherwise swallow its element-wise part.
CHAIN_PASSES = (fuse_layer_norm_pattern, fold_add_into_layer_norm, fuse_elementwise_chains, fold_casts_into_chains)
