"""Per-op callbacks (MNN's runSessionWithCallBack): Session.run(..., callback=fn) calls
fn(info) before and after every op; fn returning False stops the run there."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .errors import WgnnError


class StopRun(Exception):
    """Raised inside a run when the callback returned False; the session catches it."""


class OpInfo:
    """What a callback sees of one op: its name, type, backend, tensor names, the phase ("before"
    or "after"), and its tensors, fetched (from the GPU too) only when asked for."""

    def __init__(self, step, backend, values: dict, phase: str):
        self.name = step.node.name
        self.op_type = step.attrs.get("source_op", step.op.op_type) if step.op.op_type == "Raster" \
            else step.op.op_type
        self.backend = backend.name
        self.input_names = [n for n in step.inputs if n]
        self.output_names = [n for n in step.outputs if n]
        self.phase = phase
        self._backend = backend
        self._values = values

    def tensor(self, name: str) -> np.ndarray:
        """A copy of tensor `name` as it is now (inputs always; outputs once the op has run)."""
        if name in self._values:
            return np.array(self._values[name])
        if self.phase == "before" and name in self.output_names:
            raise WgnnError(f'{self.op_type} "{self.name}": its output "{name}" exists after the op runs')
        download = getattr(self._backend, "download", None)
        if download is None:
            raise WgnnError(f'tensor "{name}" is not available at this point of the run')
        return download(name)

    def inputs(self) -> list[np.ndarray]:
        return [self.tensor(n) for n in self.input_names]

    def outputs(self) -> list[np.ndarray]:
        return [self.tensor(n) for n in self.output_names]

    def __repr__(self) -> str:
        return f'OpInfo({self.phase} {self.op_type} "{self.name}" on {self.backend})'


class Observer:
    """Calls the user's callback around each step; backends call before() and after()."""

    def __init__(self, callback: Callable[[OpInfo], bool | None]):
        self.callback = callback

    def before(self, step, backend, values: dict) -> None:
        self._call(OpInfo(step, backend, values, "before"))

    def after(self, step, backend, values: dict) -> None:
        self._call(OpInfo(step, backend, values, "after"))

    def _call(self, info: OpInfo) -> None:
        if self.callback(info) is False:
            raise StopRun(info)
