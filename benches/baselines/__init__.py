"""The baselines: the same work done by other code, for the ratios in every table."""
