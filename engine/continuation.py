"""Sync points: a graph whose shapes depend on data computed at run time (a Reshape target read
from a tensor, If on a computed condition, NonZero, NonMaxSuppression ...) runs in stages.

The session plans the nodes before the sync point as usual. At run time, once they have run, the
values the sync node needs are downloaded, and the rest of the graph is planned as a child
session for exactly those values (MNN resizes the same way when a shape depends on content):

- ops whose output shapes follow their input data (`OpDef.data_dependent`) run on the CPU here,
  and the child session starts after them, keyed by the shapes they produced;
- for other ops the run-time values become constants of the child session (an If condition
  inlines its branch, a Reshape target lowers to a copy), keyed by those values.

Child sessions are cached (least recently used first out) and share the compiled pipelines, so
a repeated shape or value costs nothing, and a new one costs a resize but no shader compilation.
"""
from __future__ import annotations

import logging
from collections import OrderedDict

import numpy as np

from .graph import Graph, Node, TensorInfo
from .ops.base import InferContext, OpDef
from .shapes import InferredNode, SyncPoint

log = logging.getLogger("wgnn")

CACHED_CONTINUATIONS = 8


class Program:
    """What a Session needs from an Interpreter: a sorted graph with resolved attributes."""

    def __init__(self, graph: Graph, node_attrs: list[dict], node_ops: list[OpDef]):
        self.graph = graph
        self.node_attrs = node_attrs
        self.node_ops = node_ops


class Continuation:
    """The part of a session's graph after its sync point."""

    def __init__(self, session, sync: SyncPoint, known: dict[str, np.ndarray], specs: dict):
        self.session = session
        self.sync = sync
        self.known = known  # values known at resize (initializers, folded nodes)
        self.specs = specs
        self.sessions: OrderedDict[tuple, tuple] = OrderedDict()  # key -> (child session, its tensors)
        self.plans = 0  # child sessions created (a test and the report read it)
        node, op = sync.node, sync.op
        self.runs_here = op.data_dependent
        rest = sync.pending[1:] if self.runs_here else sync.pending
        self.rest = rest
        # Tensors the rest of the graph reads (fixed per plan: run() needs them every time).
        self.rest_reads = {name for n, _, _ in rest for name in n.inputs if name}
        read = set(self.rest_reads)
        if self.runs_here:
            read |= {name for name in node.inputs if name}
        else:
            read |= {node.inputs[i] for i in op.value_inputs if i < len(node.inputs) and node.inputs[i]}
        # Tensors the parent must hand over: computed at run time and read after the sync point.
        self.boundary = sorted(name for name in read if name in specs and name not in known)

    def run(self, values: dict[str, np.ndarray], wanted: list[str], callback=None) -> dict[str, np.ndarray]:
        """Plan (or reuse) the child session for these values and run it."""
        node, op = self.sync.node, self.sync.op
        feeds = {name: values[name] for name in self.boundary}
        if self.runs_here:
            produced = self._run_on_cpu(node, op, feeds)
            feeds.update(produced)
            constants = {}
        else:
            constants = {name: feeds.pop(name) for name in self._runtime_value_inputs() if name in feeds}
        feeds = {name: value for name, value in feeds.items() if name in self.rest_reads}
        key = (tuple((name, v.shape, v.dtype.str) for name, v in sorted(feeds.items())),
               tuple((name, v.shape, v.dtype.str, v.tobytes()) for name, v in sorted(constants.items())))
        planned = self.sessions.get(key)
        if planned is None:
            planned = self.sessions[key] = self._plan(feeds, constants)
            if len(self.sessions) > CACHED_CONTINUATIONS:
                self.sessions.popitem(last=False)
        else:
            self.sessions.move_to_end(key)
        child, produced_by_child = planned
        child_wanted = [name for name in wanted if name in produced_by_child and name not in feeds]
        result = child.run(feeds, child_wanted, callback=callback) if child_wanted else {}
        if self.runs_here:
            result = {**{k: v for k, v in produced.items() if k in wanted}, **result}
        return result

    def _runtime_value_inputs(self) -> list[str]:
        node, op = self.sync.node, self.sync.op
        return [node.inputs[i] for i in op.value_inputs
                if i < len(node.inputs) and node.inputs[i] and node.inputs[i] not in self.known]

    def _run_on_cpu(self, node: Node, op: OpDef, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from ..backends.numpy.kernel import evaluate
        from .ops.base import TensorSpec

        inputs = [(feeds.get(n) if n in feeds else self.known.get(n)) if n else None for n in node.inputs]
        specs = [TensorSpec(tuple(v.shape), v.dtype.name) if v is not None else None for v in inputs]
        attrs = self.sync.pending[0][1]
        ctx = InferContext(node, attrs, specs, inputs)
        outs = op.infer(ctx)
        if ctx.computed is not None:
            arrays = ctx.computed
        else:
            inferred = InferredNode(node, op, attrs, specs, inputs, outs, 0, True)
            arrays = evaluate(self.session._step_from(inferred), inputs)
        return {name: np.asarray(value) for name, value in zip(node.outputs, arrays) if name}

    def _plan(self, feeds: dict[str, np.ndarray], constants: dict[str, np.ndarray]):
        from .session import Session

        parent = self.session.graph
        reads = self.rest_reads
        graph = Graph(
            nodes=[n for n, _, _ in self.rest],
            inputs=[TensorInfo(name, value.dtype.name, tuple(value.shape)) for name, value in feeds.items()],
            outputs=[t for t in parent.outputs
                     if any(t.name in n.outputs for n, _, _ in self.rest)],
            initializers={**{n: v for n, v in self.known.items() if n in reads}, **constants},
            name=f"{parent.name} after {self.sync.node.name}")
        program = Program(graph, [a for _, a, _ in self.rest], [o for _, _, o in self.rest])
        self.plans += 1
        log.debug("sync point at %s: planning the rest of the graph for %s",
                  self.sync.node.name, {n: v.shape for n, v in feeds.items()} | dict.fromkeys(constants, "value"))
        # The child session, and the tensors it computes (what run() may ask of it).
        return Session(program, self.session.config), graph.tensor_names() - set(graph.initializers)

    def describe(self) -> dict:
        node = self.sync.node
        return {"node": node.name, "op": node.op_type,
                "runs_on": "cpu" if self.runs_here else "planned after",
                "reason": self.sync.reason, "handed_over": self.boundary,
                "plans_cached": len(self.sessions), "plans_made": self.plans}
