"""rulesched: Kubernetes scheduling policy written as rules.

Two journeys of data run through the package:

* rules text -> :mod:`rulesched.lang` (source, parse, check, compile) -> compiled closures;
* cluster objects (YAML or the API) -> :mod:`rulesched.model` -> :mod:`rulesched.cluster`
  (store, snapshot) -> :mod:`rulesched.scheduler` (queue, cycle, preemption) -> bind.
"""

__version__ = "0.1.0"
