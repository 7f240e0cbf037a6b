"""The engine: the rules evaluated over many nodes at once, between the language and the scheduler.

The language (:mod:`rulesched.lang`) compiles rules and binds them to a pod, node by node; the
engine evaluates such a binding over many nodes as numpy columns and keeps what makes that fast:

* ``columns`` (the nodes as columns, rows, groups of alike nodes), ``arrays`` (typed columns and
  their operators), ``vectorise`` (the column evaluator; ``vectorisable``: which rules it can
  take; ``column_calls``: built-ins over columns), ``domain_columns`` (aggregates over
  topology domains, once per label value), ``encoded`` (values as codes per row);
* ``batch``: a binding over rows (``filter_mask``, ``score_matrix``...), its ``ColumnPlan`` per
  rule set and ``ColumnBodies`` per binding; ``fallback``: a column evaluation that raised (a
  bug) is counted, logged and redone node by node;
* ``sharing`` (which rules' answers classes of pods can share) and ``shared`` (those answers,
  one column per share key, kept in step with the cluster); ``dryrun`` (preemption's dry runs
  over many nodes at once) and ``nominated`` (nodes checked with their nominated pods added, many
  at once); ``failures`` (why rows fail, as
  kube-scheduler's FitError counts them); ``table`` (a class of equivalent pods' answers per
  node, recomputed for the rows binds changed) and ``score_rows`` (its score vectors, shared by
  classes whose scores are all shared rules agreeing on their keys);
* ``settings``: :class:`EngineSettings`, every budget and threshold of the above; ``collector``:
  the cyclic garbage collector's settings while pods are scheduled.

The scheduler and the faces use the names exported here. The engine imports the language, the
cluster's snapshot and the model; nothing below it imports it (import-linter contracts).
Next stage: the scheduler (:mod:`rulesched.scheduler`): the cycle walks a class's table.
"""

from rulesched.engine.arrays import Array, Unsupported, unique_codes
from rulesched.engine.batch import (
    ColumnBodies,
    ColumnPlan,
    Filters,
    SharedColumns,
    columns_of,
    dynamic_grouped,
    filter_column,
    filter_mask,
    filter_rows,
    plan_of,
    score_column,
    score_matrix,
    volatile_grouped,
)
from rulesched.engine.collector import (
    RUN_GC_THRESHOLDS,
    collecting_seldom,
    freeze_loaded,
    keep_loaded,
    let_go,
    run_thresholds,
)
from rulesched.engine.columns import Groups, NodeColumns, Path, Rows, node_fields
from rulesched.engine.dryrun import Together, dry_runs_together, node_local
from rulesched.engine.encoded import encode
from rulesched.engine.failures import (
    FailedRows,
    GroupReasons,
    KnownFailures,
    as_reasons,
    first_failures,
    group_reasons,
    reason_counts,
    unresolvable_rows,
)
from rulesched.engine.fallback import Fallback, observe
from rulesched.engine.locality import only_its_node
from rulesched.engine.nominated import LEFT as HELD_LEFT
from rulesched.engine.nominated import NOT_ASKED as HELD_NOT_ASKED
from rulesched.engine.nominated import HeldFailure, held_failures, held_reasons
from rulesched.engine.settings import EngineSettings
from rulesched.engine.sharing import RuleShare, Shared, rule_share
from rulesched.engine.table import ColumnStore, NodeTable, TableOverflow
from rulesched.engine.vectorisable import vectorisable
from rulesched.engine.vectorise import ColumnEvaluator

__all__ = [
    "RUN_GC_THRESHOLDS",
    "collecting_seldom",
    "freeze_loaded",
    "keep_loaded",
    "let_go",
    "run_thresholds",
    "unique_codes",
    "Array",
    "ColumnBodies",
    "ColumnEvaluator",
    "ColumnPlan",
    "ColumnStore",
    "EngineSettings",
    "FailedRows",
    "Fallback",
    "Filters",
    "Groups",
    "NodeColumns",
    "NodeTable",
    "Path",
    "RuleShare",
    "Rows",
    "Shared",
    "SharedColumns",
    "TableOverflow",
    "Together",
    "Unsupported",
    "as_reasons",
    "columns_of",
    "dry_runs_together",
    "held_failures",
    "held_reasons",
    "HELD_NOT_ASKED",
    "HELD_LEFT",
    "HeldFailure",
    "dynamic_grouped",
    "encode",
    "filter_column",
    "filter_mask",
    "filter_rows",
    "first_failures",
    "group_reasons",
    "GroupReasons",
    "KnownFailures",
    "node_fields",
    "node_local",
    "only_its_node",
    "observe",
    "plan_of",
    "reason_counts",
    "rule_share",
    "score_column",
    "score_matrix",
    "unresolvable_rows",
    "vectorisable",
    "volatile_grouped",
]
