"""Node load for load-aware rules, live: `rulesched run`'s load sources (``--config`` ``load_sources``).

``settings`` (the list, checked) -> ``poller`` (a thread per source, reading ``metrics.k8s.io``
through :mod:`rulesched.kube.node_metrics` or a Prometheus query through ``prometheus``) -> the
loop's inbox -> :meth:`rulesched.cluster.store.ClusterStore.set_load`.
"""
