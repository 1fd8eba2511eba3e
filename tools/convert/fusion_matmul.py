"""Fusion into MatMul's epilogue, Y = act(alpha * A @ B + beta * C), beyond a constant bias (run
after fusion.fold_bias_add_into_matmul, before the residual and activation passes):

- fold_scale_into_matmul: Div(MatMul, s) or Mul(MatMul, s), s a float32 scalar constant, scales
  alpha and beta (attention's scores / sqrt(d)).
- fold_add_into_matmul_bias: Add(MatMul, t) with a MatMul that has no C yet, t any tensor that
  broadcasts onto the product without enlarging it (attention's additive mask, [B, 1, 1, S] onto
  [B, heads, S, S]), makes t the C input.
- fuse_erf_gelu: x * 0.5 * (1 + erf(x / sqrt(2))), spelled out in any association, becomes
  Unary(gelu), which fusion.fuse_activations then folds into the producing MatMul or Conv.

Each saves a dispatch per occurrence on the GPU: on lavapipe one costs about 50 us, and a small
transformer block is made of such steps. A fused-away tensor has the fusing node as sole reader
and is no graph output (the rules of fusion.py).
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.graph import Graph, Node
from .fusion_chains import _Graph

GELU_CONSTANT_TOLERANCE = 1e-4  # sqrt(2) and 0.5 as exporters write them in float32 or float64


def _scalar_constant(g: _Graph, name: str, rank: int) -> float | None:
    """The value of a float32 constant with one element and at most `rank` axes (so it cannot
    enlarge a rank-`rank` tensor it is combined with), else None."""
    value = g.constant(name)
    if value is None or value.size != 1 or value.ndim > rank or value.dtype != np.float32:
        return None
    return float(value.reshape(-1)[0])


def _bare_float_matmul(g: _Graph, name: str, reader: Node) -> Node | None:
    """The float32 MatMul producing `name`, read only by `reader`, with no activation or
    residual yet (the epilogue applies those after alpha and C)."""
    matmul = g.producers.get(name)
    if (matmul is None or matmul.op_type != "MatMul" or matmul.attrs.get("activation") or matmul.input(3)
            or not g.only_read_by(name, [reader]) or g.dtype(name) != "float32"):
        return None
    return matmul


def _replace(graph: Graph, replaced: dict[int, Node]) -> None:
    """Each node keyed in `replaced` (by id) is replaced there by its value, whose old place in
    the graph's order is dropped (its new inputs may be produced later)."""
    moved = {id(node) for node in replaced.values()}
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in moved]


def _scalings(g: _Graph, node: Node):
    """(x, s) for each way Binary `node` multiplies a tensor x by a float32 scalar constant s:
    Mul(x, s), Mul(s, x), or Div(x, 1 / s)."""
    if node.op_type != "Binary" or node.attrs.get("kind") not in ("mul", "div") or len(node.inputs) != 2:
        return
    divide = node.attrs["kind"] == "div"
    for operand, factor in [node.inputs] if divide else [node.inputs, node.inputs[::-1]]:
        shape = g.shape(operand)
        scale = _scalar_constant(g, factor, len(shape)) if shape is not None else None
        if scale is not None and not (divide and scale == 0.0):
            yield operand, 1.0 / scale if divide else scale


def fold_scale_into_matmul(graph: Graph) -> None:
    g = _Graph(graph)
    replaced: dict[int, Node] = {}
    for node in graph.nodes:
        for product, scale in _scalings(g, node):
            matmul = _bare_float_matmul(g, product, node) if id(node) not in replaced else None
            if matmul is None:
                continue
            matmul.attrs["alpha"] = float(matmul.attrs.get("alpha", 1.0)) * scale
            matmul.attrs["beta"] = float(matmul.attrs.get("beta", 1.0)) * scale
            matmul.outputs = [node.outputs[0], *matmul.outputs[1:]]
            replaced[id(node)] = matmul
            break
    _replace(graph, replaced)


def fold_operand_scale_into_matmul(graph: Graph) -> None:
    """MatMul(x * s, b) or MatMul(a, x / s), s a float32 scalar constant and the scaled tensor read
    by that MatMul alone, reads x and multiplies alpha by s (or 1 / s): the same product, one pass
    over an operand less (ONNX's Attention body scales Q and K by sqrt(scale) each)."""
    g = _Graph(graph)
    for node in list(graph.nodes):
        readers = g.readers.get(node.outputs[0], []) if node.outputs else []
        if len(readers) != 1 or readers[0].op_type != "MatMul" or node.outputs[0] in g.observed:
            continue
        matmul = readers[0]
        if node.outputs[0] not in matmul.inputs[:2] or matmul.inputs[0] == matmul.inputs[1] \
                or g.dtype(matmul.outputs[0]) != "float32":
            continue
        for operand, scale in _scalings(g, node):
            if g.shape(node.outputs[0]) != g.shape(operand):
                continue
            matmul.attrs["alpha"] = float(matmul.attrs.get("alpha", 1.0)) * scale
            matmul.inputs = [operand if name == node.outputs[0] else name for name in matmul.inputs]
            graph.nodes.remove(node)
            break


def fold_add_into_matmul_bias(graph: Graph) -> None:
    g = _Graph(graph)
    replaced: dict[int, Node] = {}
    for add in graph.nodes:
        if add.op_type != "Binary" or add.attrs.get("kind") != "add" or len(add.inputs) != 2:
            continue
        for product, addend in (add.inputs, add.inputs[::-1]):
            matmul = _bare_float_matmul(g, product, add)
            if matmul is None or matmul.input(2) or product == addend or id(add) in replaced:
                continue
            out, other = g.shape(product), g.shape(addend)
            if out is None or other is None or g.dtype(addend) != "float32" or not _broadcasts_onto(other, out):
                continue
            matmul.inputs = [matmul.input(0), matmul.input(1), addend]
            matmul.attrs["beta"] = 1.0
            matmul.outputs = [add.outputs[0], *matmul.outputs[1:]]
            replaced[id(add)] = matmul
            break
    _replace(graph, replaced)


def _broadcasts_onto(shape: tuple, target: tuple) -> bool:
    """Whether shape broadcasts onto target without changing it (numpy rules)."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def fuse_erf_gelu(graph: Graph) -> None:
    g = _Graph(graph)
    replaced: dict[int, Node] = {}
    removed: set[int] = set()
    for erf in graph.nodes:
        if erf.op_type != "Unary" or erf.attrs.get("kind") != "erf":
            continue
        match = _match_erf_gelu(g, erf)
        if match is None or any(id(n) in removed or id(n) in replaced for n in match[1]):
            continue
        x, nodes = match
        last = nodes[-1]
        replaced[id(last)] = Node("Unary", [x], [last.outputs[0]], {"kind": "gelu"}, name=last.name)
        removed.update(id(n) for n in nodes[:-1])
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in removed]


def _match_erf_gelu(g: _Graph, erf: Node) -> tuple[str, list[Node]] | None:
    """(x, the pattern's nodes with the one whose output is gelu(x) last) when erf computes
    erf(x / sqrt(2)) (or erf(x * (1 / sqrt(2)))) of a float32 x and its result only reaches
    x * 0.5 * (1 + erf(...)) through an Add of 1 and at most two Muls, else None."""
    scaled = g.producers.get(erf.inputs[0])
    if scaled is None or scaled.op_type != "Binary" or scaled.attrs.get("kind") not in ("div", "mul"):
        return None
    shape = g.shape(erf.outputs[0])
    if shape is None:
        return None
    rank = len(shape)  # constants with more axes would enlarge x: no GELU then
    wanted = math.sqrt(2.0) if scaled.attrs["kind"] == "div" else 1.0 / math.sqrt(2.0)
    orders = [scaled.inputs] if scaled.attrs["kind"] == "div" else [scaled.inputs, scaled.inputs[::-1]]
    x = next((a for a, b in orders if _near(_scalar_constant(g, b, rank), wanted)), None)
    if x is None or g.dtype(x) != "float32":
        return None
    one_plus = _sole_reader(g, erf.outputs[0], "add")
    if one_plus is None or not _near(_scalar_constant(g, _other(one_plus, erf.outputs[0]), rank), 1.0):
        return None
    # Up to two Muls combine x, 0.5 and (1 + erf): whichever is multiplied first.
    nodes, factors, tip = [scaled, erf, one_plus], [], one_plus
    for _ in range(2):
        mul = _sole_reader(g, tip.outputs[0], "mul")
        if mul is None:
            return None
        nodes.append(mul)
        factor = _other(mul, tip.outputs[0])
        inner = g.producers.get(factor)
        if (inner is not None and inner.op_type == "Binary" and inner.attrs.get("kind") == "mul"
                and g.only_read_by(factor, [mul]) and not factors):  # (x * 0.5) * (1 + erf)
            factors += list(inner.inputs)
            nodes.insert(-1, inner)
            break
        factors.append(factor)
        tip = mul
        if len(factors) == 2:
            break
    halves = [f for f in factors if _near(_scalar_constant(g, f, rank), 0.5)]
    if sorted(factors) != sorted([x, *halves]) or len(halves) != 1:
        return None
    if not (g.only_read_by(scaled.outputs[0], [erf]) and all(g.only_read_by(n.outputs[0], nodes) for n in nodes[1:-1])):
        return None
    return x, nodes


def _sole_reader(g: _Graph, name: str, kind: str) -> Node | None:
    readers = g.readers.get(name, [])
    if len(readers) != 1 or name in g.observed:
        return None
    node = readers[0]
    return node if node.op_type == "Binary" and node.attrs.get("kind") == kind and len(node.inputs) == 2 else None


def _other(node: Node, name: str) -> str:
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _near(value: float | None, wanted: float) -> bool:
    return value is not None and abs(value - wanted) <= GELU_CONSTANT_TOLERANCE * abs(wanted)


MATMUL_EPILOGUE_PASSES = (fold_scale_into_matmul, fold_add_into_matmul_bias)


def fold_transpose_into_matmul(graph: Graph) -> None:
    """Transpose(X, perm) read only by a MatMul, as its A or B, becomes that MatMul's perm_a /
    perm_b: the kernels read X through permuted strides, and the copy (a dispatch on the GPU)
    disappears. Attention's split-heads transposes of Q, K and V are the common case. An explicit
    perm only (the default one depends on the rank), and X no constant (constant folding has
    transposed those already).
    Likewise a Transpose that is the only reader of a MatMul's product becomes its perm_y (the
    kernels store through permuted strides): attention's merge-heads transpose of the context.
    Not on a MatMul with a fused residual, which is added to the product before the Transpose."""
    from .fusion import _Rewriter  # fusion.py lists this pass: imported when it runs
    from .quant import _subgraph_reads

    rw = _Rewriter(graph)
    hidden = _subgraph_reads(graph)
    for node in graph.nodes:
        if node.op_type != "MatMul":
            continue
        for slot, key in ((0, "perm_a"), (1, "perm_b")):
            name = node.input(slot)
            transpose = rw.producer(name, ("Transpose",))
            if (transpose is None or node.attrs.get(key) or not transpose.attrs.get("perm") or name in hidden
                    or not rw.sole_reader(name, node) or transpose.input(0) in graph.initializers):
                continue
            node.inputs[slot] = transpose.input(0)
            node.attrs[key] = [int(p) for p in transpose.attrs["perm"]]
            rw.removed.add(id(transpose))
            graph.value_info.pop(name, None)
        product = node.outputs[0]
        readers = rw.consumers.get(product, [])
        transpose = readers[0] if len(readers) == 1 else None
        if (transpose is None or transpose.op_type != "Transpose" or not transpose.attrs.get("perm")
                or node.attrs.get("perm_y") or (len(node.inputs) > 3 and node.inputs[3]) or product in hidden
                or not rw.sole_reader(product, transpose)):
            continue
        node.attrs["perm_y"] = [int(p) for p in transpose.attrs["perm"]]
        rw.absorb(node, transpose)
        graph.value_info.pop(product, None)
    rw.finish("fold_transpose_into_matmul")


SIBLINGS_PER_PRODUCT = 3  # outputs of one split product (the GPU kernels store at most 3)


def merge_sibling_matmuls(graph: Graph) -> None:
    """MatMuls that read the same A the same way (perm_a, trans_a, alpha, activation) with constant
    2-D Bs of one shape and constant (N,) biases or none become one MatMul whose product's columns
    split into their outputs (split_y): B and the biases concatenated along N, each bias scaled by
    its beta (a missing one zeros). Attention's Q, K and V projections are the common case: one
    dispatch instead of three on the GPU, and one wider product. At most SIBLINGS_PER_PRODUCT per
    product; not with perm_b, perm_y, a split already or a residual. The product takes the first
    sibling's place in the node order (A and the constants are there already)."""
    from ...engine.ops.base import get_op
    from .fusion import _Rewriter  # fusion.py lists this pass: imported when it runs

    rw = _Rewriter(graph)
    groups: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        if node.op_type != "MatMul":
            continue
        attrs = get_op("MatMul").resolve_attrs(node)
        b = graph.initializers.get(node.input(1))
        if (b is None or b.ndim != 2 or attrs["perm_b"] or attrs["perm_y"] or attrs["split_y"] != 1
                or node.input(3)):
            continue
        columns = b.shape[0] if attrs["trans_b"] else b.shape[1]
        bias = graph.initializers.get(node.input(2)) if node.input(2) else np.zeros(columns, b.dtype)
        if bias is None or bias.shape != (columns,) or bias.dtype != b.dtype:
            continue
        key = (node.input(0), tuple(attrs["perm_a"]), attrs["trans_a"], attrs["trans_b"], attrs["alpha"],
               attrs["activation"], attrs["activation_alpha"], attrs["activation_beta"], b.shape, b.dtype.str)
        groups.setdefault(key, []).append(node)
    merged: dict[int, Node] = {}
    for siblings in groups.values():
        for start in range(0, len(siblings) - 1, SIBLINGS_PER_PRODUCT):
            chunk = siblings[start:start + SIBLINGS_PER_PRODUCT]
            if len(chunk) > 1:
                first = chunk[0]
                merged[id(first)] = _merged_product(graph, rw, chunk)
                rw.removed.update(id(n) for n in chunk[1:])
    graph.nodes = [merged.get(id(n), n) for n in graph.nodes]
    rw.finish("merge_sibling_matmuls")


def _merged_product(graph: Graph, rw, siblings: list[Node]) -> Node:
    from ...engine.ops.base import get_op

    first = siblings[0]
    attrs = get_op("MatMul").resolve_attrs(first)
    weights = [graph.initializers[n.input(1)] for n in siblings]
    axis = 0 if attrs["trans_b"] else 1
    biases = []
    for node, w in zip(siblings, weights):
        beta = get_op("MatMul").resolve_attrs(node)["beta"]
        bias = graph.initializers[node.input(2)] if node.input(2) else np.zeros(w.shape[axis], w.dtype)
        biases.append(bias if beta == 1.0 else (bias.astype(np.float64) * beta).astype(w.dtype))
    inputs = [first.input(0), rw.add_initializer(np.concatenate(weights, axis=axis), f"{first.name}/merged_b")]
    if any(n.input(2) for n in siblings):
        inputs.append(rw.add_initializer(np.concatenate(biases), f"{first.name}/merged_bias"))
    new_attrs = {**first.attrs, "split_y": len(siblings), "beta": 1.0}
    return Node("MatMul", inputs, [n.outputs[0] for n in siblings], new_attrs, name=first.name)


def fuse_attention(graph: Graph) -> None:
    """MatMul (scores: Q' @ K', alpha, the mask as C) -> Softmax over the last axis -> MatMul
    (context: probs @ V', perm_y) becomes one Attention op (engine/ops/attention.py): the scores and
    probabilities are never written, three GPU dispatches become one. Runs after the Transpose
    folds, so the head split and merge are the ops' permutations. Only where the scores and the
    probabilities have no other reader, Q', K' and V' have equal batch axes (checked under both
    probe bindings of the symbolic dims), the head sizes D and D_v are at most attention.MAX_HEAD,
    and neither MatMul has an activation, a residual or a split; the context one no bias,
    no alpha and no transposed A."""
    from ...engine.ops.base import get_op
    from .fusion import PROBE_BINDINGS, _Rewriter, probe_shapes
    from .quant import _subgraph_reads

    rw = _Rewriter(graph)
    hidden = _subgraph_reads(graph)
    probes = None
    matmul = get_op("MatMul")
    replaced: dict[int, Node] = {}
    for softmax in graph.nodes:
        if (softmax.op_type != "Softmax" or softmax.attrs.get("kind") != "softmax"
                or softmax.attrs.get("legacy_flatten")):
            continue
        scores_name, probs_name = softmax.input(0), softmax.outputs[0]
        scores = rw.producer(scores_name, ("MatMul",))
        readers = rw.consumers.get(probs_name, [])
        context = readers[0] if len(readers) == 1 and readers[0].op_type == "MatMul" else None
        if (scores is None or context is None or context.input(0) != probs_name or context.input(1) == probs_name
                or not rw.sole_reader(scores_name, softmax) or not rw.sole_reader(probs_name, context)
                or scores_name in hidden or probs_name in hidden):
            continue
        s, c = matmul.resolve_attrs(scores), matmul.resolve_attrs(context)
        if (s["activation"] or scores.input(3) or s["split_y"] != 1 or s["perm_y"]
                or c["activation"] or context.input(2) or context.input(3) or c["split_y"] != 1 or c["alpha"] != 1.0
                or c["trans_a"] or c["perm_a"]):
            continue
        attrs = {"perm_q": s["perm_a"], "trans_q": s["trans_a"], "perm_k": s["perm_b"], "trans_k": s["trans_b"],
                 "perm_v": c["perm_b"], "trans_v": c["trans_b"], "perm_y": c["perm_y"],
                 "alpha": s["alpha"], "beta": s["beta"]}
        inputs = [scores.input(0), scores.input(1), context.input(1)] + ([scores.input(2)] if scores.input(2) else [])
        if probes is None:
            probes = [probe_shapes(graph, base) for base in PROBE_BINDINGS]
        if not all(_attention_fits(probe, inputs, attrs, softmax) for probe in probes):
            continue
        replaced[id(context)] = Node("Attention", inputs, list(context.outputs), attrs, name=context.name)
        rw.removed.update((id(scores), id(softmax)))
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes]
    rw.finish("fuse_attention")


def _attention_fits(probe: dict, inputs: list[str], attrs: dict, softmax: Node) -> bool:
    """Whether the probed shapes make a kernel-sized Attention: Q', K', V' of rank >= 2 with equal
    batch axes, head sizes within attention.MAX_HEAD, and the softmax over the last axis."""
    from ...engine.ops.attention import MAX_HEAD, read_as

    shapes = []
    for name, key in zip(inputs[:3], "qkv"):
        spec = probe.get(name)
        perm = attrs[f"perm_{key}"]
        if spec is None or len(spec.shape) < 2 or (perm and sorted(perm) != list(range(len(spec.shape)))):
            return False
        shapes.append(read_as(spec.shape, perm, attrs[f"trans_{key}"]))
    q, k, v = shapes
    axis = softmax.attrs.get("axis", -1)
    return (q[:-2] == k[:-2] == v[:-2] and q[-1] == k[-2] and k[-1] == v[-2]
            and max(q[-1], v[-1]) <= MAX_HEAD and axis in (-1, len(q) - 1))
