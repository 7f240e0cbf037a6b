"""Batch evaluation: the rules over many nodes at once (filled in by the next commits)."""
