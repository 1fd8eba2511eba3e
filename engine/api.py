"""onnxruntime-compatible API: InferenceSession(path_or_bytes, providers=...)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import Config
from .errors import WgnnError
from .interpreter import Interpreter

_ONNX_TYPE_NAMES = {
    "float32": "tensor(float)", "float16": "tensor(float16)", "float64": "tensor(double)",
    "int8": "tensor(int8)", "uint8": "tensor(uint8)", "int16": "tensor(int16)",
    "uint16": "tensor(uint16)", "int32": "tensor(int32)", "uint32": "tensor(uint32)",
    "int64": "tensor(int64)", "uint64": "tensor(uint64)", "bool": "tensor(bool)",
}


@dataclass(frozen=True)
class NodeArg:
    """An input or output: name, shape (ints and symbolic names) and ONNX-style type string."""

    name: str
    shape: list
    type: str
    dtype: str


class InferenceSession:
    """Run a model like onnxruntime does.

    Arguments:
        path_or_bytes: a .wgnn or .onnx file path, its bytes, or an onnx ModelProto.
        providers: backends in order of preference, e.g. ["wgpu", "numpy"] (onnxruntime names
            such as "CPUExecutionProvider" mean "numpy"); ["auto"] picks by a measurement on the
            adapter (see providers_choice).
        config: a wgnn.Config for finer control (adapter, precision, storage).
    """

    def __init__(self, path_or_bytes, providers=None, *, config: Config | None = None):
        if config is not None and providers is not None:
            raise WgnnError("give providers either in config or as an argument, not both")
        self.interpreter = Interpreter(path_or_bytes)
        if config is None:
            config = Config(providers=_provider_names(providers))
        self.session = self.interpreter.create_session(config)

    def get_inputs(self) -> list[NodeArg]:
        return [_arg(t) for t in self.interpreter.graph.inputs]

    def get_outputs(self) -> list[NodeArg]:
        return [_arg(t) for t in self.interpreter.graph.outputs]

    def get_providers(self) -> list[str]:
        """The providers the model runs on: those named, or what providers=["auto"] chose for it."""
        return [backend.name for backend in self.session.backends]

    @property
    def providers_choice(self) -> dict | None:
        """How providers=["auto"] was resolved: {"providers", "adapter", "adapter_index", "costs" (each
        provider's fitted ms per run, per step and per MFLOP), "source": "cache" | "measured",
        "cache"}, and once the session is sized for its inputs "model_steps", "model_mflop" and
        "predicted_ms" (per provider) that chose its "providers"; or {"providers", "reason"} when no
        GPU could be used; None when the providers were named."""
        return self.session.providers_choice

    def run(self, output_names, input_feed: dict, run_options=None, *, callback=None,
            out: dict | None = None) -> list[np.ndarray]:
        """Run the model. Returns the outputs named in output_names (all when None), in order;
        names of intermediate tensors of the converted graph are allowed too. callback: see
        Session.run; outputs a stopped run did not reach are None. out: output name -> array
        to write that output into and return (Session.run)."""
        names = list(output_names) if output_names else [t.name for t in self.interpreter.graph.outputs]
        results = self.session.run(input_feed, names, callback=callback, out=out)
        return [results.get(name) for name in names]

    def report(self) -> dict:
        return self.session.report()

    def wait_background(self) -> int:
        """Wait for the work the last resize left to run in the background (Session.wait_background):
        before timing runs on a machine's first-ever session."""
        return self.session.wait_background()


def _provider_names(providers) -> tuple[str, ...]:
    if not providers:
        return ("numpy",)
    aliases = {"CPUExecutionProvider": "numpy", "cpu": "numpy", "gpu": "wgpu"}
    return tuple(aliases.get(p if isinstance(p, str) else p[0], p if isinstance(p, str) else p[0])
                 for p in providers)


def _arg(info) -> NodeArg:
    shape = list(info.shape) if info.shape is not None else None
    dtype = info.dtype or "float32"
    return NodeArg(info.name, shape, _ONNX_TYPE_NAMES.get(dtype, f"tensor({dtype})"), dtype)
