"""Control flow: If, Loop, Scan. Their subgraphs are run by the engine (engine/control_flow.py);
captured outer tensors follow the ONNX inputs as extra inputs."""
from __future__ import annotations

from abc import abstractmethod

from ..control_flow import branch_specs, inline_branch, run_loop, run_scan
from .base import Attr, InferContext, Inlined, OpDef, TensorSpec, register_op


def _specs(arrays) -> list[TensorSpec]:
    return [TensorSpec(tuple(a.shape), a.dtype.name) for a in arrays]


def _condition(ctx: InferContext) -> bool:
    cond = ctx.value(0)
    if cond.size != 1:
        raise ctx.fail(f"the condition must hold one element, got shape {list(cond.shape)}")
    return bool(cond.reshape(-1)[0])


@register_op
class If(OpDef):
    """If(cond, captures...): the then or else branch's outputs."""

    op_type = "If"
    family = "control"
    attrs = {"then_branch": Attr("graph"), "else_branch": Attr("graph")}
    value_inputs = (0,)

    def _branch(self, ctx: InferContext):
        branch = ctx.attrs["then_branch"] if _condition(ctx) else ctx.attrs["else_branch"]
        if len(branch.outputs) < len(ctx.node.outputs):
            raise ctx.fail(f"branch {branch.name!r} has {len(branch.outputs)} outputs, "
                           f"the node {len(ctx.node.outputs)}")
        return branch

    def inline(self, ctx: InferContext) -> Inlined:
        return inline_branch(ctx.node, self._branch(ctx))

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        return branch_specs(ctx.node, self._branch(ctx), ctx.inputs, ctx.values)

    def flops(self, ctx, outputs) -> int:
        return 0


class _HostLoop(OpDef):
    """Loop and Scan: the body runs iteration by iteration on the CPU; the outputs' shapes are
    known only once it has run, so inference computes them (ctx.computed)."""

    family = "control"
    data_dependent = True

    @abstractmethod
    def run(self, ctx: InferContext, inputs) -> list:
        """The outputs, computed by running the body."""

    def infer(self, ctx: InferContext) -> list[TensorSpec]:
        inputs = [ctx.value(i) if ctx.has(i) else None for i in range(len(ctx.node.inputs))]
        ctx.computed = self.run(ctx, inputs)
        return _specs(ctx.computed)

    def flops(self, ctx, outputs) -> int:
        return 0


@register_op
class Loop(_HostLoop):
    """Loop(M?, cond?, carried..., captures...) -> (carried..., scan outputs...)."""

    op_type = "Loop"
    attrs = {"body": Attr("graph")}
    value_inputs = (0, 1)

    def run(self, ctx: InferContext, inputs):
        return run_loop(ctx.node, ctx.attrs, inputs)


@register_op
class Scan(_HostLoop):
    """Scan(states..., scan inputs..., captures...) -> (states..., scan outputs...), opset 9+."""

    op_type = "Scan"
    attrs = {"body": Attr("graph"), "num_scan_inputs": Attr("int"), "scan_input_axes": Attr("ints", []),
             "scan_input_directions": Attr("ints", []), "scan_output_axes": Attr("ints", []),
             "scan_output_directions": Attr("ints", [])}

    def run(self, ctx: InferContext, inputs):
        return run_scan(ctx.node, ctx.attrs, inputs)
