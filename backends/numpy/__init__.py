"""The numpy backend: every op, vectorised; wgnn's reference and CPU fallback."""

# Modules that load_backends leaves to their first use: the compiled loops import numba (about
# 0.2 s) and are imported by compiled.loops() only where a step runs one.
LOADED_ON_DEMAND = frozenset({"compiled_loops"})
