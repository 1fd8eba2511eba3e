"""Run one WGSL kernel without the engine, for notebooks and tests (the API of `wgnn shader`).

    import numpy as np, wgnn.shader
    x = np.random.rand(1000).astype(np.float32)
    r = wgnn.shader.run("relu.wgsl", inputs={"x": x}, outputs={"y": ((1000,), "float32")},
                        params=["y.size"], reference=lambda x: np.maximum(x, 0), time=True)
    r.outputs["y"], r.ok, r.errors[0].max_abs_error, r.timing.median_us
"""
from __future__ import annotations

from .tools.shader_harness import Comparison, ShaderCompileError, ShaderResult, Timing, run

__all__ = ["Comparison", "ShaderCompileError", "ShaderResult", "Timing", "run"]
