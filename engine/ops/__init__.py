"""Op definitions, one module per family; importing load_ops() registers them all."""
from __future__ import annotations

import importlib
import pkgutil


def load_ops() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    importlib.import_module("wgnn.engine.geometry")
