"""A small progress bar on stderr, shown only when stderr is a terminal."""
from __future__ import annotations

import sys
import time


def progress(items, label: str, *, enabled: bool = True, total: int | None = None):
    """Yield items, drawing a bar when enabled and stderr is a terminal; silent otherwise."""
    total = total if total is not None else (len(items) if hasattr(items, "__len__") else None)
    if not enabled or not sys.stderr.isatty() or not total:
        yield from items
        return
    start = last = time.monotonic()
    for index, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - last > 0.1 or index == total:
            last = now
            filled = int(30 * index / total)
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {index}/{total} "
                             f"{now - start:5.1f}s")
            sys.stderr.flush()
    sys.stderr.write("\r" + " " * (len(label) + 60) + "\r")
    sys.stderr.flush()
