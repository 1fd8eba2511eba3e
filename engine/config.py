"""Session configuration."""
from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = ("fp32", "fp16")
STORAGES = ("auto", "texture", "buffer")


@dataclass
class Config:
    """How a session runs.

    Arguments:
        providers: backends in order of preference, e.g. ("wgpu", "numpy"); each op runs on the
            first that supports it.
        adapter: GPU adapter choice (index, name substring, backend type or power preference).
        precision: "fp32" or "fp16".
        storage: NC4HW4 storage on the GPU: "texture", "buffer" or "auto".
    """

    providers: tuple[str, ...] = ("numpy",)
    adapter: str | int | None = None
    precision: str = "fp32"
    storage: str = "auto"

    def __post_init__(self):
        from .errors import WgnnError
        if isinstance(self.providers, str):
            self.providers = (self.providers,)
        self.providers = tuple(self.providers)
        if self.precision not in PRECISIONS:
            raise WgnnError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.storage not in STORAGES:
            raise WgnnError(f"storage must be one of {STORAGES}, got {self.storage!r}")
