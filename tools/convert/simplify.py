"""Simplifications that general graphs, above all expanded ONNX function bodies, need before
fusion: drop_no_ops (after constant folding; see passes.optimize_graph) and sink_row_selection
(a fusion pass, just before fuse_attention; see its docstring).

drop_no_ops: nodes that hand their input on unchanged, found from constants and the shape probes.

ONNX function bodies are written for every case of their op, so the expanded forms
(onnx/functions.py) carry steps that do nothing in a given model: Attention's body casts the
scores to float32 when they are float32 already, adds a zero bias when there is no mask, selects
between the softmax and zeros for rows a mask could empty when there is none, and repeats the
key/value heads once when there are as many as query heads (Unsqueeze, Expand, Reshape back).
Each such node costs a pass over its tensor, and it hides the MatMul -> Softmax -> MatMul
pattern from fuse_attention. A dropped node's readers read its source instead:

- Cast to the type its input has; CastLike of a constant becomes the constant in the other
  input's type;
- Add or Sub of zeros, Mul or Div by ones (constants), where the other operand has the
  output's shape (x + 0 would turn -0 into +0: the only difference);
- Where with a constant condition all true or all false, the chosen operand of the output's shape;
- Transpose by the identity permutation; a Transpose of a Transpose's output reads that one's
  input through the composed permutation;
- Expand, Reshape, Unsqueeze, Squeeze and Flatten whose output has its input's shape; a Reshape
  of a reshape-family node's output reads that node's input instead (with its shape constant free
  of the 0 that copies an input dim), so that Unsqueeze -> Reshape back to the input's shape goes.

Shapes are compared under both probe bindings (fusion.PROBE_BINDINGS), so symbolic dims count
as equal only when they are the same expression. Graph outputs and tensors that subgraphs read
stay produced by their nodes.
"""
from __future__ import annotations

import numpy as np

from ...engine.graph import Graph, Node
from .fusion_chains import _Graph

RESHAPES = ("Reshape", "Unsqueeze", "Squeeze", "Flatten")
NEUTRAL = {"add": (0, (0, 1)), "sub": (0, (1,)), "mul": (1, (0, 1)), "div": (1, (1,))}  # value, its operand slots


class _Probes:
    """Tensor specs under both probe bindings."""

    def __init__(self, graph: Graph):
        from .fusion import PROBE_BINDINGS, probe_shapes

        self.specs = [probe_shapes(graph, base) for base in PROBE_BINDINGS]

    def same(self, a: str, b: str) -> bool:
        """Whether tensors a and b have one shape and one element type under every probe."""
        pairs = [(specs.get(a), specs.get(b)) for specs in self.specs]
        return all(x is not None and y is not None and x.shape == y.shape and x.dtype == y.dtype for x, y in pairs)


def _all_equal(value: np.ndarray | None, target) -> bool:
    return value is not None and value.size > 0 and value.dtype != object and bool(np.all(value == target))


def _source(node: Node, g: _Graph, probes: _Probes) -> str | None:
    """The input `node` hands on unchanged, or None."""
    out, kind = node.outputs[0], node.attrs.get("kind")
    if node.op_type == "Cast" and len(node.inputs) == 1 and probes.same(node.inputs[0], out) \
            and all(t.dtype is not None for t in g.graph.inputs):  # else the probe guesses their types
        return node.inputs[0]
    if node.op_type == "Binary" and kind in NEUTRAL and len(node.inputs) == 2:
        value, slots = NEUTRAL[kind]
        for slot in slots:
            kept = node.inputs[1 - slot]
            if _all_equal(g.constant(node.inputs[slot]), value) and probes.same(kept, out):
                return kept
    if node.op_type == "Where" and len(node.inputs) == 3:
        condition = g.constant(node.inputs[0])
        for truth, chosen in ((True, node.inputs[1]), (False, node.inputs[2])):
            if _all_equal(condition, truth) and probes.same(chosen, out):
                return chosen
    if node.op_type in ("Expand", *RESHAPES) and node.inputs and probes.same(node.inputs[0], out):
        return node.inputs[0]
    perm = node.attrs.get("perm")
    if node.op_type == "Transpose" and perm and list(perm) == list(range(len(perm))):
        return node.inputs[0]
    return None


def _merge_inner_transpose(node: Node, g: _Graph) -> bool:
    """Transpose(Transpose(x, inner), outer) -> Transpose(x, inner[outer]): one step, which a MatMul
    can then read through its strides (Attention's body transposes K again after the head split)."""
    if node.op_type != "Transpose" or not node.attrs.get("perm"):
        return False
    inner = g.producers.get(node.inputs[0])
    if inner is None or inner.op_type != "Transpose" or not inner.attrs.get("perm") \
            or len(inner.attrs["perm"]) != len(node.attrs["perm"]):
        return False
    node.attrs = {**node.attrs, "perm": [int(inner.attrs["perm"][axis]) for axis in node.attrs["perm"]]}
    node.inputs = [inner.inputs[0], *node.inputs[1:]]
    return True


def _fold_cast_like(node: Node, g: _Graph) -> bool:
    """CastLike(constant, x) (Cast with a second input) becomes the constant in x's type: only
    x's type is read, so constant folding, which wants every input constant, leaves it (Swish's
    body casts its alpha like that)."""
    if node.op_type != "Cast" or len(node.inputs) != 2 or node.outputs[0] in g.observed \
            or any(t.dtype is None for t in g.graph.inputs):  # the probe would guess float32 for those
        return False
    value, dtype = g.constant(node.inputs[0]), g.dtype(node.inputs[1])
    if value is None or dtype is None:
        return False
    g.graph.initializers[node.outputs[0]] = np.asarray(value).astype(dtype)
    return True


def _skip_inner_reshape(node: Node, g: _Graph) -> bool:
    """Reshape(R(x), shape) -> Reshape(x, shape), R a reshape-family node: the same elements in
    the same order. Not where the shape constant has a 0 (a dim copied from the input)."""
    if node.op_type != "Reshape" or len(node.inputs) != 2 or node.attrs.get("allowzero"):
        return False
    inner = g.producers.get(node.inputs[0])
    shape = g.constant(node.inputs[1])
    if inner is None or inner.op_type not in RESHAPES or shape is None or np.any(shape == 0):
        return False
    node.inputs = [inner.inputs[0], node.inputs[1]]
    return True


def drop_no_ops(graph: Graph, rounds: int = 4) -> None:
    from .passes import eliminate_dead_code, rename_uses

    for _ in range(rounds):
        g = _Graph(graph)
        # The rewrites below rewire nodes and fold constants without changing any tensor's spec:
        # one shape probe per round serves them all (g's own probe is the first binding's).
        probes = _Probes(graph)
        g.probe = probes.specs[0]
        changed = sum(_skip_inner_reshape(node, g) + _merge_inner_transpose(node, g)
                      for node in graph.nodes) > 0  # every node, no short cut
        folded = {id(node) for node in graph.nodes if _fold_cast_like(node, g)}
        graph.nodes = [node for node in graph.nodes if id(node) not in folded]
        changed = changed or bool(folded)
        kept: list[Node] = []
        for node in graph.nodes:
            source = None if node.outputs[0] in g.observed else _source(node, g, probes)
            if source is None:
                kept.append(node)
                continue
            rename_uses(graph, node.outputs[0], source)
            changed = True
        graph.nodes = kept
        if not changed:
            break
        eliminate_dead_code(graph)


def sink_row_selection(graph: Graph) -> None:
    """MatMul(Where(c, 0, p), v), c of shape (..., rows, 1), becomes Where(c, 0, MatMul(p, v)):
    a row of zeros times v is a row of zeros. ONNX's Attention body zeroes the probabilities of
    query rows its mask hides at every key (their softmax is NaN) before the context product;
    after this, MatMul -> Softmax -> MatMul is left for fuse_attention, and the selection runs
    on the attention's output. Where the product is stored transposed (perm_y), c is transposed
    alike (padded to the product's rank first): a few bytes. It differs only where a hidden row
    meets an infinite or NaN value in v: 0 here, NaN in the body (0 * inf)."""
    g = _Graph(graph)
    moved: dict[int, list[Node]] = {}
    for where in graph.nodes:
        if where.op_type != "Where" or len(where.inputs) != 3 or where.outputs[0] in g.observed:
            continue
        condition, zero, probs = where.inputs
        readers = g.readers.get(where.outputs[0], [])
        if len(readers) != 1 or readers[0].op_type != "MatMul":
            continue
        matmul = readers[0]
        attrs = matmul.attrs
        if (matmul.inputs[0] != where.outputs[0] or matmul.inputs[1] == where.outputs[0] or matmul.input(2)
                or matmul.input(3) or attrs.get("perm_a") or attrs.get("trans_a")
                or attrs.get("split_y", 1) != 1 or attrs.get("activation") or attrs.get("alpha", 1.0) != 1.0):
            continue
        value, rows, shape = g.constant(zero), g.shape(condition), g.shape(probs)
        product_shape = g.shape(matmul.outputs[0])
        if (value is None or value.size != 1 or value.reshape(-1)[0] != 0 or rows is None or shape is None
                or product_shape is None or len(rows) > len(shape) or len(rows) < 2 or rows[-1] != 1):
            continue
        product = matmul.outputs[0]
        inner = _fresh(g, f"{product}/unselected")
        selection = [*_transposed_like(g, condition, len(product_shape), attrs.get("perm_y")), where]
        matmul.inputs = [probs, *matmul.inputs[1:]]
        matmul.outputs = [inner, *matmul.outputs[1:]]
        where.inputs = [selection[-2].outputs[0] if len(selection) > 1 else condition, zero, inner]
        where.outputs = [product]
        moved[id(matmul)] = [matmul, *selection]
    if moved:
        sunk = {id(node) for group in moved.values() for node in group}
        graph.nodes = [n for node in graph.nodes
                       for n in (moved[id(node)] if id(node) in moved else [] if id(node) in sunk else [node])]


def _fresh(g: _Graph, base: str) -> str:
    name = base
    while name in g.readers or name in g.producers or name in g.graph.initializers:
        name += "_"
    g.producers[name] = None  # reserved
    return name


def _transposed_like(g: _Graph, condition: str, rank: int, perm) -> list[Node]:
    """Nodes giving `condition` as the product's perm_y stores it: Unsqueeze to the product's rank
    (leading axes), then Transpose by perm; none without perm."""
    if not perm:
        return []
    nodes, name = [], condition
    missing = rank - len(g.shape(condition))
    if missing:
        axes = _fresh(g, f"{condition}/axes")
        g.graph.initializers[axes] = np.arange(missing, dtype=np.int64)
        padded = _fresh(g, f"{condition}/padded")
        nodes.append(Node("Unsqueeze", [name, axes], [padded], {}, name=padded))
        name = padded
    transposed = _fresh(g, f"{condition}/transposed")
    nodes.append(Node("Transpose", [name], [transposed], {"perm": [int(a) for a in perm]}, name=transposed))
    return nodes
