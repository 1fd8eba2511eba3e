"""Every op is complete: a shape function, a numpy implementation, a converter mapping and a test.
Prints which ops have GPU kernels (pytest -s shows the table)."""
import re
from pathlib import Path

from wgnn.backends import load_backends
from wgnn.backends.numpy.kernel import KERNELS
from wgnn.backends.wgpu.backend import EXECUTIONS
from wgnn.engine.ops.base import OPS, OpDef
from wgnn.tools.convert.onnx import _load_table
from wgnn.tools.convert.onnx.table import CONVERTERS

TESTS = Path(__file__).parent


def setup_module():
    load_backends()
    _load_table()


def test_every_op_has_shape_function_and_numpy_implementation():
    incomplete = []
    for op_type, op in OPS.items():
        if type(op).infer is OpDef.infer and op_type != "Raster":
            incomplete.append(f"{op_type}: no shape function")
        lowered = op.is_geometry and type(op).geometry is not OpDef.geometry
        if op_type not in KERNELS and not lowered:
            incomplete.append(f"{op_type}: no numpy kernel and no geometry lowering")
    assert not incomplete, incomplete


def test_every_converted_onnx_op_has_a_test():
    sources = "\n".join(p.read_text() for p in TESTS.rglob("test_*.py"))
    untested = [name for name in CONVERTERS if not re.search(rf'["\']{name}["\']', sources)]
    assert not untested, f"ONNX ops with a converter but no test naming them: {untested}"


def test_gpu_coverage_report(capsys):
    gpu = sorted(op for op in OPS if op in EXECUTIONS or (OPS[op].is_geometry and "Raster" in EXECUTIONS))
    cpu_only = sorted(op for op in OPS if op not in gpu and not OPS[op].shape_only)
    with capsys.disabled():
        print(f"\nGPU kernels for {len(gpu)} op types: {', '.join(gpu)}")
        print(f"numpy only ({len(cpu_only)}): {', '.join(cpu_only)}")
    assert "Unary" in gpu and "Raster" in gpu
