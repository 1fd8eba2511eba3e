"""CLI commands living in their own modules: each module here has register(subparsers), which adds
its subcommand (with set_defaults(handler=fn)); tools/cli.py imports them all."""
from __future__ import annotations

import importlib
import pkgutil


def register_all(subparsers) -> None:
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{module.name}").register(subparsers)
