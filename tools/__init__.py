"""wgnn's tools: the ONNX converter, the CLI, benchmarks and the demo."""
