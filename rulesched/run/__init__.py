"""``rulesched run``: the live scheduler on the Kubernetes API (a thin face over the core).

``loop`` owns the store and the queue on one thread and applies what informers and binding
workers report; ``workers`` make the API calls of the binding cycle, preemption and events;
``cli`` builds :class:`rulesched.run.settings.RunSettings` from flags or a config file.
"""
