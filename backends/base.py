"""The contract between the engine and its backends.

The session builds one Step per op at resize and asks each configured backend, in order, whether
it supports the step; the first that does creates an Execution for it. Executions prepare
everything at resize; run() (CPU) or encode() (GPU) must not compile or allocate.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..engine.ops.base import OPS, OpDef, TensorSpec


@dataclass
class Step:
    """One op as the session runs it: resolved attributes and concrete input/output specs."""

    node: Any  # engine.graph.Node (a synthetic one for Raster steps)
    op: OpDef
    attrs: dict[str, Any]
    inputs: list[str]
    outputs: list[str]
    input_specs: list[TensorSpec | None]
    output_specs: list[TensorSpec]
    input_values: list[np.ndarray | None] = field(default_factory=list)  # known at resize
    plan: Any = None  # engine.geometry.RasterPlan for Raster steps
    backend: str = ""
    flops: int = 0

    @property
    def label(self) -> str:
        return f'{self.op.op_type} "{self.node.name}"'


def part_step(parent: Step, node, input_specs: list, output_specs: list, input_values: list | None = None) -> Step:
    """A step a backend runs inside `parent` (a part of a fused op: `node`, with its attributes
    resolved), on the parent's backend."""
    op = OPS[node.op_type]
    values = input_values if input_values is not None else [None] * len(node.inputs)
    return Step(node, op, op.resolve_attrs(node), list(node.inputs), list(node.outputs), list(input_specs),
                list(output_specs), list(values), backend=parent.backend)


class Execution:
    """One step bound to a backend."""

    def __init__(self, backend: Backend, step: Step):
        self.backend = backend
        self.step = step
        self.attrs = step.attrs

    def prepare(self) -> None:
        """Build everything the step needs for its shapes (weights repacked, pipelines, ...).
        Then the backend's execute() drives it: CPU executions have run(inputs, outputs), GPU
        executions encode(recorder)."""

    def view_source(self) -> str | None:
        """The input whose bytes, unchanged, would be this step's output in this backend's
        memory (then the session may place the output on the input's storage and the step does
        nothing), or None. Asked after layouts are assigned."""
        return None

    def view_range(self) -> tuple[str, int] | None:
        """(input, byte offset) when this step's output is a contiguous range of that input's
        bytes, unchanged: the view_source at offset 0, or, on a backend that can place a tensor at
        any offset, a Slice or Split of one contiguous range. The session then places the output
        there and the step does nothing."""
        source = self.view_source()
        return None if source is None else (source, 0)

    def embedded_inputs(self) -> list[tuple[str, int]] | None:
        """[(input, byte offset)] when this step only places each input, whole, in one range of
        its output's storage, so their producers could write them there directly (then the
        session hosts them in the output and the step does nothing), or None. Asked after
        layouts are assigned."""
        return None


def whole_input_ranges(step: Step, element_bytes) -> list[tuple[str, int, int]] | None:
    """(input, byte offset in the output, bytes) of each region of a Raster step, when every
    region copies one whole input contiguously, element for element, into one range of the output
    and nothing is filled; else None. element_bytes(name, spec): bytes of one element in the
    backend's storage."""
    plan = step.plan
    if plan is None or plan.fill is not None:
        return None
    ranges = []
    for region in plan.regions:
        name, spec = step.inputs[region.src], step.input_specs[region.src]
        whole = region.src_strides == region.dst_strides == (1,) and region.size == (spec.size,)
        if not whole or region.src_offset:
            return None
        item = element_bytes(name, spec)
        ranges.append((name, region.dst_offset * item, spec.size * item))
    return ranges


def contiguous_run(step: Step) -> tuple[int, int] | None:
    """(input index, element offset) when a Raster step fills its whole output with one
    contiguous run of one input's elements (a Slice or Split along the outermost axis that is not
    1, or a whole-tensor Reshape at offset 0); else None."""
    plan = step.plan
    if plan is None or plan.fill is not None or len(plan.regions) != 1:
        return None
    region = plan.regions[0]
    if region.src_strides != (1,) or region.dst_strides != (1,) or region.dst_offset \
            or region.size != (step.output_specs[0].size,):
        return None
    return region.src, region.src_offset


def storage_host(name: str, shares: dict[str, tuple[str, int]]) -> tuple[str, int]:
    """The tensor whose storage holds `name` (following hosts of hosts through shares, see
    Session._shared_storage) and the byte offset of `name` in it; (name, 0) for an unhosted one."""
    offset = 0
    while name in shares:
        name, delta = shares[name]
        offset += delta
    return name, offset


def tiling_inputs(ranges, output_bytes: int, alignment: int = 1) -> list[tuple[str, int]] | None:
    """[(input, byte offset)] when the ranges (whole_input_ranges) tile the output, each at an
    offset the backend can place a tensor at; else None."""
    if not ranges or any(offset % alignment for _, offset, _ in ranges):
        return None
    cursor = 0
    for _, offset, nbytes in sorted(ranges, key=lambda r: r[1]):
        if offset != cursor:
            return None
        cursor += nbytes
    return [(name, offset) for name, offset, _ in ranges] if cursor == output_bytes else None


class Backend(ABC):
    name: ClassVar[str] = ""
    # Byte alignment of tensors placed in this backend's memory arena.
    alignment: ClassVar[int] = 64
    # Whether a tensor with storage of its own (a graph output, a tensor crossing between
    # backends) can hold others (views, concatenated inputs): a GPU buffer is fixed for a resize,
    # where a CPU backend hands such a tensor over in a new array on every run.
    dedicated_hosts: ClassVar[bool] = True

    def __init__(self, config=None):
        self.config = config

    def settle_device(self, steps: list[Step]) -> None:
        """At each resize, with every step it lowered: a backend whose device depends on the work
        (wgpu on lavapipe) picks it now, before any step is scheduled."""
        return

    def tensor_bytes(self, name: str, spec: TensorSpec) -> int:
        """Bytes a tensor takes in this backend's memory (its layout may pad it)."""
        return spec.nbytes

    def assign_layouts(self, segments: list, specs: dict[str, TensorSpec]) -> None:
        """Choose each tensor's layout on this backend and insert the conversion steps that
        consumers need (adding their outputs to specs). CPU backends keep everything linear."""
        return

    def plan_memory(self, specs: dict[str, TensorSpec], lifetimes: list, dedicated: list[str],
                    constants: dict[str, np.ndarray], *, shares: dict[str, tuple[str, int]] | None = None):
        """Allocate for a resize: lifetimes (engine.memory.Lifetime) of the intermediate tensors
        to pool; dedicated tensors cross between backends (or are graph outputs); constants are
        read by this backend's steps; shares (tensor -> (host tensor, byte offset), see
        Session._shared_storage) live inside their host's storage and have no lifetime of their
        own. Returns an engine.memory.MemoryPlan."""
        from ..engine.memory import plan_memory

        return plan_memory(lifetimes, self.alignment)

    def finish_prepare(self, executions=()) -> None:
        """Called after every step's prepare(), with this backend's executions: wait for work the
        prepares started in the background (the GPU backend's pipeline compiles) and raise its
        errors."""
        return

    def wait_background(self, executions=()) -> int:
        """Wait for work a prepare left to run in the background (the GPU backend's deferred
        compiles and code generation), for these executions' sake; returns how many tasks there
        were."""
        return 0

    @abstractmethod
    def execute(self, segment, values: dict[str, np.ndarray], observer=None) -> None:
        """Run a segment: read its imports from values, put its exports into values. With an
        observer (engine.callbacks.Observer), call observer.before/after(step, self, values)
        around every step, the step's inputs and outputs then being readable."""

    @abstractmethod
    def unsupported_reason(self, step: Step) -> str | None:
        """None when the backend can run this step, else a short reason for the report."""

    @abstractmethod
    def create_execution(self, step: Step) -> Execution:
        """The step bound to this backend (prepared later, after memory planning)."""


BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    BACKENDS[cls.name] = cls
    return cls
