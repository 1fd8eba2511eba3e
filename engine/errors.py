"""Typed errors. Each names the thing at fault (file, node, tensor, shape) so users can act on it."""
from __future__ import annotations


class WgnnError(Exception):
    """Base class of every error wgnn raises on purpose."""


class ModelError(WgnnError):
    """The model file or graph is missing, malformed, corrupted or inconsistent."""


class FormatVersionError(ModelError):
    """The model file was written by a newer wgnn format than this one reads."""


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


def node_label(node) -> str:
    """'Conv node "conv1"' style label used in error messages."""
    name = getattr(node, "name", "") or "<unnamed>"
    return f'{node.op_type} node "{name}"'
