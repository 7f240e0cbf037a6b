"""Evaluation: checked rules -> compile (closures, staged per pod and per node) -> evaluate.

``compile`` (with ``stages`` and ``inline``) turns each rule into closures; ``ruleset`` binds
them to one pod (guards, pod-only parts) and evaluates per node; ``vectorise`` (with ``columns``
and ``arrays``) evaluates a rule over many nodes at once as numpy columns; ``interp`` is the
reference interpreter every fast path is tested against.
Next stage: the scheduler (:mod:`rulesched.scheduler`) filters and scores with the bound rules.
"""
