"""Evaluation: checked rules -> compile (closures, staged per pod and per node) -> evaluate.

``compile`` (with ``stages`` and ``inline``) turns each rule into closures; ``ruleset`` binds
them to one pod (guards, pod-only parts) and evaluates per node (``bound``); evaluating a rule over
many nodes at once as numpy columns is the engine's (:mod:`rulesched.engine`); ``interp`` is the
reference interpreter every fast path is tested against.
Next stage: the engine (:mod:`rulesched.engine`) and the scheduler (:mod:`rulesched.scheduler`)
filter and score with the bound rules.
"""
