"""The benchmark cases, one module per group; each times seglog and its baselines doing the same work."""
