"""The numpy backend: every op, vectorised; wgnn's reference and CPU fallback."""
