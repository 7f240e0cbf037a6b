"""Scheduling: queue -> cycle (filter, score) -> preemption -> assume and bind.

Previous stage: :mod:`rulesched.cluster` (the state every cycle reads). The rules come from
:mod:`rulesched.lang` already compiled; a cycle binds them to one pod and evaluates per node.
"""
