"""wgnn: GPU-first neural-network inference (WGSL kernels through wgpu, numpy reference backend).

    import wgnn
    session = wgnn.InferenceSession("model.onnx", providers=["wgpu", "numpy"])
    outputs = session.run(None, {"input": x})
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import image
from .engine.api import InferenceSession, NodeArg
from .engine.config import Config
from .engine.errors import (
    AdapterError,
    ConversionError,
    DeviceError,
    DeviceMemoryError,
    FormatVersionError,
    HostMemoryError,
    InputError,
    ModelError,
    ModelVerificationError,
    ShapeError,
    UnsupportedOpError,
    WgnnError,
)
from .engine.graph import Graph, Model, Node, TensorInfo
from .engine.interpreter import Interpreter, load_model
from .engine.session import Session
from .models.verify import Limits


def adapters() -> list[dict]:
    """Every GPU adapter wgpu sees: index, name, backend, adapter_type, driver, features, limits.
    Empty when wgpu finds none."""
    from .backends.wgpu.context import adapters as _adapters
    from .backends.wgpu.context import gpu_available

    if gpu_available() is not None:
        return []
    return [a.as_dict() for a in _adapters()]


def set_lavapipe_threads(count: int) -> None:
    """Worker threads of Mesa's CPU GPU drivers (lavapipe, llvmpipe) for this process, as Mesa's
    LP_NUM_THREADS: 0 runs each dispatch on the driver's queue thread (small models on few cores run
    up to 4x faster), the default is one per core (large models run faster). Call it before the
    first GPU use of the process; afterwards it raises InputError."""
    from .backends.wgpu.context import set_lavapipe_threads as _set

    _set(count)


def save_model(model: Model, path) -> None:
    """Write a wgnn Model to a .wgnn file."""
    from .models.format import save_model as _save

    _save(model, path)


def convert(source, output=None, **options) -> Model:
    """Convert an ONNX model (path, bytes or ModelProto) to a wgnn Model; write it when output
    is given."""
    from .tools.convert.onnx import convert_onnx

    model = convert_onnx(source, **options)
    if output is not None:
        save_model(model, output)
    return model


__all__ = [
    "AdapterError",
    "Config",
    "ConversionError",
    "DeviceError",
    "DeviceMemoryError",
    "FormatVersionError",
    "Graph",
    "HostMemoryError",
    "InferenceSession",
    "InputError",
    "Interpreter",
    "Limits",
    "Model",
    "ModelError",
    "ModelVerificationError",
    "Node",
    "NodeArg",
    "Session",
    "ShapeError",
    "TensorInfo",
    "UnsupportedOpError",
    "WgnnError",
    "__version__",
    "adapters",
    "convert",
    "image",
    "load_model",
    "save_model",
    "set_lavapipe_threads",
]


def __getattr__(name: str):
    # wgnn.shader pulls in the shader harness; load it on first use, not on `import wgnn`.
    if name == "shader":
        import importlib

        return importlib.import_module(".shader", __name__)
    raise AttributeError(f"module 'wgnn' has no attribute {name!r}")
