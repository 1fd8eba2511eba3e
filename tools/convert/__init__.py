"""Converters from other formats into wgnn models, and the graph passes they share."""
