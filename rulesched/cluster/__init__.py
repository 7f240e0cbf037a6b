"""The cluster as the scheduler sees it: per-node aggregates, the store and its snapshot.

Previous stage: objects decoded by :mod:`rulesched.model.decode` (from YAML or the API).
Next stage: :mod:`rulesched.scheduler`, which binds rules against a snapshot each cycle.
"""
