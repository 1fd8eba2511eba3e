"""Fusion passes run after constant folding (see passes.optimize_graph).

- fold_batchnorm_into_conv: Conv -> BatchNorm with constant parameters becomes one Conv with
  rescaled weights and a new bias.
- fold_bias_add_into_matmul: MatMul -> Add(constant vector) becomes MatMul with a bias input.
- fold_residual_add: Add(Conv(x), r) / Add(MatMul(a, b), r), r of the output's exact shape, becomes
  Conv(x, w, b, r) / MatMul(a, b, c, r): the residual is added in the epilogue (before a fused
  activation, so a following Relu fuses next, giving act(conv + bias + r)).
- fuse_activations: Conv / ConvTranspose / MatMul -> Unary(relu, clip, ...) becomes the producer
  with a fused `activation` attribute (applied in its epilogue, after the bias).

A producer is only rewritten when the fused-away tensor has exactly one reader and is not a graph
output, so no other node can observe the difference.
"""
from __future__ import annotations

import contextlib
import logging

import numpy as np

from ...engine.graph import Graph, Node
from ...engine.ops import load_ops
from ...engine.ops.base import OPS, InferContext, TensorSpec, get_op
from .fusion_chains import CHAIN_PASSES
from .fusion_conv_pool import fuse_conv_maxpool
from .fusion_conv_pw import fuse_conv_pointwise
from .fusion_dwpw import fuse_depthwise_pointwise
from .fusion_dwpw_expand import fuse_dwpw_expand
from .fusion_matmul import (
    MATMUL_EPILOGUE_PASSES,
    fold_operand_scale_into_matmul,
    fold_transpose_into_matmul,
    fuse_attention,
    fuse_erf_gelu,
    merge_sibling_matmuls,
)
from .fusion_pool_matmul import fuse_globalpool_matmul
from .fusion_resize import swap_resize_pointwise
from .simplify import sink_row_selection

log = logging.getLogger("wgnn.convert")

FUSABLE_ACTIVATIONS = ("relu", "clip", "leaky_relu", "sigmoid", "hard_swish", "tanh", "gelu", "gelu_tanh", "elu",
                       "selu", "celu", "mish", "softsign")
ACTIVATION_HOSTS = ("Conv", "ConvTranspose", "MatMul")


class _Rewriter:
    """Producer/reader maps of a graph and bookkeeping for one pass."""

    def __init__(self, graph: Graph):
        load_ops()
        self.graph = graph
        self.producers = graph.producers()
        self.consumers = graph.consumers()
        self.outputs = {t.name for t in graph.outputs}
        self.taken = graph.tensor_names()
        self.removed: set[int] = set()

    def sole_reader(self, name: str, reader: Node) -> bool:
        """Whether reader is the only node reading tensor name, once, and no graph output is it."""
        readers = self.consumers.get(name, [])
        return name not in self.outputs and len(readers) == 1 and readers[0] is reader

    def producer(self, name: str, op_types) -> Node | None:
        node = self.producers.get(name)
        if node is None or id(node) in self.removed or node.op_type not in op_types:
            return None
        return node

    def fresh_name(self, base: str) -> str:
        """base, or base_<i>: a tensor name the graph does not use yet (reserved)."""
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        return name

    def add_initializer(self, value: np.ndarray, base: str) -> str:
        name = self.fresh_name(base)
        self.graph.initializers[name] = np.asarray(value, order="C")
        return name

    def absorb(self, host: Node, node: Node) -> None:
        """host takes over node's output; node disappears."""
        host.outputs = [node.outputs[0], *host.outputs[1:]]
        self.producers[node.outputs[0]] = host
        self.removed.add(id(node))

    def finish(self, what: str) -> None:
        if self.removed:
            log.debug("%s: %d node(s) fused", what, len(self.removed))
            self.graph.nodes = [n for n in self.graph.nodes if id(n) not in self.removed]


def fold_batchnorm_into_conv(graph: Graph) -> None:
    """W' = W * s, b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps), per output channel."""
    rw = _Rewriter(graph)
    for bn in graph.nodes:
        if bn.op_type != "BatchNorm":
            continue
        conv = rw.producer(bn.inputs[0], ("Conv",))
        if conv is None or conv.attrs.get("activation") or conv.input(3) or not rw.sole_reader(bn.inputs[0], bn):
            continue
        weight = graph.initializers.get(conv.inputs[1])
        bias_name = conv.input(2)
        bias = graph.initializers.get(bias_name) if bias_name else None
        params = [graph.initializers.get(name) for name in bn.inputs[1:5]]
        if weight is None or (bias_name and bias is None) or any(p is None for p in params):
            continue
        channels = weight.shape[0]
        if any(p.shape != (channels,) for p in params):
            continue  # per-activation (spatial=0) statistics cannot fold into per-channel weights
        gamma, beta, mean, var = (p.astype(np.float64) for p in params)
        scale = gamma / np.sqrt(var + get_op("BatchNorm").resolve_attrs(bn)["epsilon"])
        new_weight = weight.astype(np.float64) * scale.reshape((-1,) + (1,) * (weight.ndim - 1))
        old_bias = bias.astype(np.float64) if bias is not None else 0.0
        new_bias = (old_bias - mean) * scale + beta
        conv.inputs = [conv.inputs[0],
                       rw.add_initializer(new_weight.astype(weight.dtype), f"{conv.name}/bn_weight"),
                       rw.add_initializer(new_bias.astype(weight.dtype), f"{conv.name}/bn_bias")]
        rw.absorb(conv, bn)
    rw.finish("fold_batchnorm_into_conv")


def fold_bias_add_into_matmul(graph: Graph) -> None:
    """Add(MatMul(A, B), c) with c a constant of shape (), (1,) or (N,) (N = columns of a constant
    B) becomes MatMul(A, B, bias). Such a c broadcasts onto the product without enlarging it. An
    existing constant bias C merges: beta * C + c, beta = 1."""
    rw = _Rewriter(graph)
    for add in graph.nodes:
        if add.op_type != "Binary" or add.attrs.get("kind") != "add" or len(add.inputs) != 2:
            continue
        for mm_index in (0, 1):
            name, other = add.inputs[mm_index], add.inputs[1 - mm_index]
            mm = rw.producer(name, ("MatMul",))
            vector = graph.initializers.get(other)
            if mm is None or vector is None or mm.attrs.get("activation") or not rw.sole_reader(name, add):
                continue
            weight = graph.initializers.get(mm.inputs[1])
            if weight is None or weight.ndim < 2 or vector.dtype != weight.dtype:
                continue
            attrs = get_op("MatMul").resolve_attrs(mm)
            columns = weight.shape[-2] if attrs["trans_b"] else weight.shape[-1]
            if vector.ndim > 1 or vector.size not in (1, columns):
                continue
            bias_name = mm.input(2)
            if bias_name:
                old = graph.initializers.get(bias_name)
                if old is None:
                    continue
                merged = (old.astype(np.float64) * attrs["beta"] + vector.astype(np.float64)).astype(vector.dtype)
                bias_name = rw.add_initializer(merged, f"{mm.name}/bias")
            else:
                bias_name = other
            mm.inputs = [mm.inputs[0], mm.inputs[1], bias_name]
            mm.attrs["beta"] = 1.0
            rw.absorb(mm, add)
            break
    rw.finish("fold_bias_add_into_matmul")


# Sizes the symbolic dims take in the shape probes of fold_residual_add: two bindings, so that
# shapes equal under both are equal as expressions of the dims, short of a contrived coincidence.
PROBE_BINDINGS = (1009, 1361)
PROBE_FOLD_ELEMENTS = 1 << 16  # shape computations evaluated in the probe (as at resize)


def probe_shapes(graph: Graph, base: int) -> dict[str, TensorSpec]:
    """Every tensor's spec that shape inference reaches with the graph inputs' symbolic (or
    unknown) dims bound to distinct sizes from `base` on; tensors it cannot reach are absent."""
    from ...backends import load_backends
    from ...backends.base import Step
    from ...backends.numpy.kernel import evaluate

    load_backends()
    specs: dict[str, TensorSpec] = {}
    symbols: dict[str, int] = {}
    for info in graph.inputs:
        if info.shape is None:
            continue
        dims = []
        for d in info.shape:
            if isinstance(d, int) and d >= 0:
                dims.append(d)
            else:  # a named dim keeps one size across inputs, an unnamed one gets its own
                key = d if isinstance(d, str) and d else f"#{len(symbols)}"
                dims.append(symbols.setdefault(key, base + 2 * len(symbols)))
        specs[info.name] = TensorSpec(tuple(dims), info.dtype or "float32")
    values: dict[str, np.ndarray] = dict(graph.initializers)
    specs.update({name: TensorSpec(tuple(v.shape), v.dtype.name) for name, v in values.items()})
    for node in graph.nodes:
        op = OPS.get(node.op_type)
        in_specs = [specs.get(n) if n else None for n in node.inputs]
        if op is None or any(n and s is None for n, s in zip(node.inputs, in_specs)):
            continue
        in_values = [values.get(n) if n else None for n in node.inputs]
        attrs = op.resolve_attrs(node)
        # A probe, not a check: a node that cannot be inferred here (e.g. a Reshape to fixed sizes
        # that only fit the real dims) leaves its outputs unknown, so nothing past it is fused.
        try:
            outs = op.infer(InferContext(node, attrs, in_specs, in_values))
        except Exception:
            # Values the shapes do not need can still fail a check at probe sizes (a Gather of
            # positions 0..1010 from a 64-row table): the shapes without them, if they infer.
            shape_values = [v if i in op.value_inputs else None for i, v in enumerate(in_values)]
            try:
                outs = op.infer(InferContext(node, attrs, in_specs, shape_values))
            except Exception:
                continue
        known = all(v is not None for n, v in zip(node.inputs, in_values) if n)
        if op.shape_only or (known and sum(o.size for o in outs) <= PROBE_FOLD_ELEMENTS):
            step = Step(node, op, attrs, list(node.inputs), list(node.outputs), in_specs, outs, in_values)
            with contextlib.suppress(Exception):
                values.update((name, v) for name, v in zip(node.outputs, evaluate(step, in_values)) if name)
        specs.update((name, spec) for name, spec in zip(node.outputs, outs) if name)
    return specs


def fold_zero_pad_into_conv(graph: Graph) -> None:
    """Conv(Pad(x, constant 0 on spatial axes)) -> Conv(x) with the pads added to its own: one
    data copy (a dispatch on the GPU) less, and the conv kernels pad for free."""
    rw = _Rewriter(graph)
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
            continue
        pad = rw.producer(conv.input(0), ("Pad",))
        weight = graph.initializers.get(conv.input(1))
        if pad is None or weight is None or not rw.sole_reader(conv.input(0), conv):
            continue
        spatial = _zero_spatial_pads(graph, pad, weight.ndim)
        if spatial is None:
            continue
        rank = weight.ndim - 2
        own = list(conv.attrs.get("pads") or [0] * (2 * rank))
        if len(own) != 2 * rank:  # malformed: left for shape inference to report on the Conv
            continue
        conv.attrs["pads"] = [own[i] + spatial[i][0] for i in range(rank)] + \
                             [own[rank + i] + spatial[i][1] for i in range(rank)]
        conv.inputs = [pad.input(0), *conv.inputs[1:]]
        rw.removed.add(id(pad))
    rw.finish("fold_zero_pad_into_conv")


def _zero_spatial_pads(graph: Graph, pad: Node, rank: int) -> list[tuple[int, int]] | None:
    """(begin, end) per spatial axis of a constant zero Pad that leaves N and C alone, else None."""
    if pad.attrs.get("mode", "constant") != "constant":
        return None
    pads = graph.initializers.get(pad.input(1))
    fill = graph.initializers.get(pad.input(2)) if pad.input(2) else np.zeros(1)
    axes = graph.initializers.get(pad.input(3)) if pad.input(3) else np.arange(rank)
    if pads is None or fill is None or axes is None or np.any(np.asarray(fill) != 0):
        return None
    axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
        return None
    per_axis = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        per_axis[axis] = (pads[i], pads[len(axes) + i])
    if per_axis[0] != (0, 0) or per_axis[1] != (0, 0) or any(b < 0 or e < 0 for b, e in per_axis):
        return None
    return per_axis[2:]


def fold_residual_add(graph: Graph) -> None:
    """Add(Conv(x, w, b), r) -> Conv(x, w, b, r) and Add(MatMul(a, b, c), r) -> MatMul(a, b, c, r)
    where r has the host output's shape and dtype under every probe binding of the symbolic dims
    (no broadcasting: the kernels add element by element at the output's index) and the host has
    no activation and no residual yet. A MatMul keeps its bias C (absent stays absent: "" at index
    2). The host moves to the Add's place in the node order, after r's producer."""
    rw = _Rewriter(graph)
    probes = None
    moved: dict[int, Node] = {}  # id(Add) -> the host that replaces it
    for add in graph.nodes:
        if add.op_type != "Binary" or add.attrs.get("kind") != "add" or len(add.inputs) != 2:
            continue
        for host_index in (0, 1):
            name, other = add.inputs[host_index], add.inputs[1 - host_index]
            host = rw.producer(name, ("Conv", "MatMul"))  # both take the residual as input 3
            if (host is None or host.attrs.get("activation") or host.input(3) or other == name
                    or not rw.sole_reader(name, add)):
                continue
            if probes is None:
                probes = [probe_shapes(graph, base) for base in PROBE_BINDINGS]
            pairs = [(p.get(name), p.get(other)) for p in probes]
            if not all(a is not None and a == b for a, b in pairs):
                continue
            host.inputs = [host.input(0), host.input(1), host.input(2), other]
            rw.absorb(host, add)
            moved[id(add)] = host
            break
    if moved:
        hosts = {id(host) for host in moved.values()}
        graph.nodes = [moved.get(id(n), n) for n in graph.nodes if id(n) not in hosts]
    rw.finish("fold_residual_add")


def fuse_activations(graph: Graph) -> None:
    rw = _Rewriter(graph)
    for act in graph.nodes:
        if act.op_type != "Unary" or act.attrs.get("kind") not in FUSABLE_ACTIVATIONS:
            continue
        host = rw.producer(act.inputs[0], ACTIVATION_HOSTS)
        if host is None or host.attrs.get("activation") or not rw.sole_reader(act.inputs[0], act):
            continue
        host.attrs.update(activation=act.attrs["kind"], activation_alpha=float(act.attrs.get("alpha", 0.0)),
                          activation_beta=float(act.attrs.get("beta", 0.0)))
        rw.absorb(host, act)
    rw.finish("fuse_activations")


# In order: BatchNorm folding, bias folding and the residual Add must see the bare producer, before
# an activation is fused into it (the activation comes after bias, normalization and residual).
FUSION_PASSES = (fold_zero_pad_into_conv, fold_batchnorm_into_conv, fold_bias_add_into_matmul,
                 *MATMUL_EPILOGUE_PASSES, fold_residual_add, fuse_erf_gelu, fuse_activations,
                 swap_resize_pointwise, fuse_depthwise_pointwise, fuse_dwpw_expand, fuse_conv_pointwise,
                 fuse_conv_maxpool,
                 # operand scales after fuse_erf_gelu, whose pattern ends in a scale the next MatMul reads
                 fuse_globalpool_matmul, fold_operand_scale_into_matmul, fold_transpose_into_matmul,
                 merge_sibling_matmuls, sink_row_selection, fuse_attention,
                 *CHAIN_PASSES)  # then element-wise chains (fusion_chains.py), after epilogue fusion
