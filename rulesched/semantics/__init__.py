"""Kubernetes' own rules, as pure functions of the object model: the floor between
:mod:`rulesched.model` and everything that schedules.

What kube-scheduler's plugins and Kubernetes' controllers decide, with no rules language, store
or cache in it: label and node selector matching, tolerations and host ports (``matching``),
inter-pod affinity terms (``affinity``), topology spread constraints, their node inclusion
policies and skew (``spreading``, with the system defaults of ``spread_defaults``), the volume
plugins' checks and VolumeBinding's planner (``volumes``, ``volume_binding``) and the disruption
controller's arithmetic for PodDisruptionBudgets (``disruption``).

It imports only :mod:`rulesched.model` (import-linter checks it). Next stages: the built-ins
(:mod:`rulesched.lang.builtins`) wrap these functions with types, per-pod plans and speed hints;
the store (:mod:`rulesched.cluster`), the API writes (:mod:`rulesched.kube`), preemption and the
extender call them directly.
"""
