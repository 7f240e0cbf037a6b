"""The Kubernetes side: the API adapter (``api``, the only module that imports the client
library), informers that list and watch into the store (``informer``).

Previous stage: nothing (the API server). Next stage: :mod:`rulesched.cluster` (the store the
informers feed).
"""
