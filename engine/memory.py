"""Memory planning: tensor lifetimes -> offsets in one arena per backend, reusing memory of tensors
whose lifetimes do not overlap (greedy by size, best fit), with the peak known before running."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Lifetime:
    name: str
    nbytes: int
    first: int  # index of the step that writes it
    last: int  # index of the last step that reads it


@dataclass
class MemoryPlan:
    offsets: dict[str, int] = field(default_factory=dict)
    peak_bytes: int = 0
    naive_bytes: int = 0  # every tensor in its own allocation
    dedicated_bytes: int = 0  # storage outside the pool: transfers, graph outputs, constants

    @property
    def saving(self) -> float:
        return 1.0 - self.peak_bytes / self.naive_bytes if self.naive_bytes else 0.0


def align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def plan_memory(lifetimes: list[Lifetime], alignment: int = 64) -> MemoryPlan:
    """Place each tensor at the lowest offset where it overlaps no tensor alive at the same time.

    A tensor read by step k and one written by step k are alive together (an op reads its inputs
    while it writes its outputs), so their ranges never alias.
    """
    plan = MemoryPlan()
    placed: list[tuple[int, int, Lifetime]] = []  # (offset, size, lifetime)
    for item in sorted(lifetimes, key=lambda t: (-t.nbytes, t.first, t.name)):
        size = align(max(item.nbytes, 1), alignment)
        plan.naive_bytes += size
        busy = sorted((off, off + sz) for off, sz, other in placed
                      if other.first <= item.last and item.first <= other.last)
        best, best_gap, cursor = None, None, 0
        for start, end in busy:
            gap = start - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, end)
        offset = best if best is not None else cursor
        placed.append((offset, size, item))
        plan.offsets[item.name] = offset
        plan.peak_bytes = max(plan.peak_bytes, offset + size)
    return plan
