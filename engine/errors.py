"""Typed errors. Each names the thing at fault (file, node, tensor, shape) so users can act on it."""
from __future__ import annotations


class WgnnError(Exception):
    """Base class of every error wgnn raises on purpose."""


class ModelError(WgnnError):
    """The model file or graph is missing, malformed, corrupted or inconsistent."""


class FormatVersionError(ModelError):
    """The model file was written by a newer wgnn format than this one reads."""


class ModelVerificationError(ModelError):
    """A model failed verification at load (models/verify.py): its bytes are malformed (offsets,
    lengths, vtables) or its graph is inconsistent (undefined tensors, cycles, absurd dims, ...).

    Attributes:
        where: the object at fault, e.g. 'graph.nodes[3].attributes[0]' or 'Conv node "conv1"'.
        offset: byte offset in the file of the bad structure, or None for graph-level problems.
    """

    def __init__(self, message: str, *, where: str = "", offset: int | None = None):
        super().__init__(message)
        self.where = where
        self.offset = offset

    def __reduce__(self):  # keyword-only fields survive pickling (multiprocessing, subprocess reports)
        return _rebuild_verification_error, (str(self), self.where, self.offset)


def _rebuild_verification_error(message: str, where: str, offset: int | None) -> ModelVerificationError:
    return ModelVerificationError(message, where=where, offset=offset)


class UnsupportedOpError(WgnnError):
    """One or more ops have no implementation (or no converter mapping)."""

    def __init__(self, message: str, op_counts: dict[str, int] | None = None):
        super().__init__(message)
        self.op_counts = dict(op_counts or {})


class ShapeError(WgnnError):
    """Shapes do not fit together: names the node, the tensors and their shapes."""


class InputError(WgnnError):
    """A feed is wrong: unknown or missing name, wrong dtype, rank or shape."""


class ConversionError(WgnnError):
    """The converter could not translate a node of the source model."""


class AdapterError(WgnnError):
    """No usable GPU adapter, or the adapter/device failed."""


class HostMemoryError(WgnnError):
    """A plan or a CPU kernel needs more memory than the machine gives: says what and how much."""


class DeviceMemoryError(AdapterError):
    """A plan does not fit the GPU: says how many bytes it needs and what the adapter allows."""


class DeviceError(AdapterError):
    """The GPU rejected or failed work while running: names the op. When the device is lost, the
    message says so and a new session gets a new device."""


def node_label(node) -> str:
    """'Conv node "conv1"' style label used in error messages."""
    name = getattr(node, "name", "") or "<unnamed>"
    return f'{node.op_type} node "{name}"'
