"""The cluster as the scheduler sees it: per-node aggregates, the store (a coordinator over its
parts: nodes, placements, pod journal, assumptions, storage cache, copy on write) and its snapshot.

Previous stages: objects decoded by :mod:`rulesched.model.decode` (from YAML or the API) and
Kubernetes' own rules (:mod:`rulesched.semantics`); never the rules language.
Next stage: :mod:`rulesched.scheduler`, which binds rules against a snapshot each cycle.
"""
