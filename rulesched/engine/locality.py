"""Which rules judge a node by that node alone: the queueing hints' question
(:mod:`rulesched.scheduler.hints`).

A filter reads only its node when its body (and the lets it uses) names nothing but the pod, the
node it judges (any field, its pods too), bound variables and constants: not ``cluster``, not
``domain(node, KEY)``, no other context built-in (pod affinity, spreading, volumes, devices read
other nodes or other objects) but those whose answer, for this pod, no running pod's going can
change (:data:`rulesched.engine.dryrun.UNAFFECTED`: affinity built-ins of a pod that asks for
none). For such filters a pod's going changes the answers on its own node only. This is wider
than :func:`rulesched.engine.node_local` in what it allows of the node (any of its fields, not
only the numbers a dry run's columns adjust) and stricter in what it allows beyond it
(node_local lets ``cluster`` through: its dry runs refuse such reads themselves).
Next stage: :func:`rulesched.scheduler.hints.deletion_may_help`.
"""

from __future__ import annotations

from rulesched.engine.dryrun import UNAFFECTED
from rulesched.lang import BoundRules, RuleSet


def only_its_node(bound: BoundRules) -> bool:
    """Whether every filter of ``bound`` reads only the node it judges (see the module
    docstring), for this pod now. Read from what compiling found of each filter: the context
    built-ins its body calls, lets included, ``cluster`` counted as ``domain``
    (:attr:`rulesched.lang.evaluation.compile.CompiledRule.context`)."""
    filters = bound.compiled[0]
    if not isinstance(bound.rule_set, RuleSet) or bound.prechecked or len(filters) != len(bound.filters):
        return False  # (a binding made by hand, or prechecks the compiled rules do not show)
    return all(name in UNAFFECTED and UNAFFECTED[name](bound.ctx) for r in filters for name in r.context)
