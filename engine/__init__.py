"""wgnn's engine: graph IR, op definitions, shape inference, geometry, scheduling, memory, sessions."""
