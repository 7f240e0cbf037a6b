"""The embedded simulator: a cluster from YAML, scheduled with the same rules and cycle."""
