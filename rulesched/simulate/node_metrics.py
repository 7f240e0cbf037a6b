"""``--node-metrics FILE`` (``simulate``, ``diff``): node load read from files, so that load-aware
rules decide the same way on every run.

A file is JSON or YAML holding one document: what ``kubectl get --raw
/apis/metrics.k8s.io/v1beta1/nodes`` prints (a NodeMetricsList), or the simple format of
:mod:`rulesched.model.decode_load` (``usage``, ``metrics`` name -> node -> value,
``age_seconds``, ``pod_estimates``). Several files combine; a value two of them give is an error
naming both. Problems are one line naming the file (and line and column for bad YAML).
Next stage: :meth:`rulesched.cluster.store.ClusterStore.set_load` puts the values on the nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rulesched.errors import InputError
from rulesched.model.decode_load import combine, decode_load_document
from rulesched.model.load import LoadSnapshot
from rulesched.yamlreader import read_yaml_file

MAX_BYTES = 64 * 2**20  # a NodeMetricsList of 5 000 nodes is about 2 MB


def read_node_metrics(paths: Sequence[str]) -> LoadSnapshot | None:
    """The node load the files give together; None without files."""
    if not paths:
        return None
    return combine([(path, decode_load_document(read_document(path), path)) for path in paths])


def read_document(path: str) -> Any:
    """One JSON or YAML document (YAML is a superset of JSON: one reader for both)."""
    try:
        return read_yaml_file(path, limit=MAX_BYTES, what="YAML or JSON")
    except ValueError as err:
        raise InputError(str(err)) from None
