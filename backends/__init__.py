"""Backends: the numpy reference/fallback and the wgpu GPU backend."""
from __future__ import annotations

import importlib
import pkgutil


def load_backends() -> None:
    """Import every backend package and its kernel modules (registration by decorators)."""
    from ..engine.ops import load_ops

    load_ops()
    for package in ("numpy", "wgpu"):
        pkg = importlib.import_module(f"{__name__}.{package}")
        on_demand = getattr(pkg, "LOADED_ON_DEMAND", frozenset())
        for module in pkgutil.iter_modules(pkg.__path__):
            if module.name not in on_demand:
                importlib.import_module(f"{pkg.__name__}.{module.name}")
