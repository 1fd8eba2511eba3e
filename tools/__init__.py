"""wgnn's tools: the ONNX converter, the CLI, conformance and shader harnesses, and the demo."""
