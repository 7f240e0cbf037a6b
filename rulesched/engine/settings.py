"""Every budget and threshold of batch evaluation, in one frozen value passed down to what uses it.

Each field says what it bounds, its unit and why its default; the defaults are the values the
modules had as constants before they were gathered here, so placements and speed are those of
before. Results never depend on any of them (a budget only decides what is kept or whether rows
go as columns or node by node, which give the same answers); memory and speed do.

Who passes it: each evaluating thread's framework (rulesched.scheduler.runtime.Framework) holds
one: the cycle's is ``SchedulerSettings.engine`` (``run`` gives walk steps of 448), the
extender's its own (``columns_from`` 64, steps of 448); the framework hands it to its
``ColumnStore`` (node columns, shared columns, the row log), its ``NodeTable``s and
``tables_for``. The column
evaluator is one per rule set, whichever face evaluates it (rulesched.engine.batch.ColumnPlan):
it is made with the default ``column_unroll``.

Left as a module constant, with its reason: preemption's ``BATCH_FROM`` (16 nodes tried from
which dry runs go together; rulesched.scheduler.preemption): preemption does not take the
framework's settings yet, and tests lower it to batch every preemption; it belongs here once it
does. (The dry runs together go on to the last node: rulesched.engine.dryrun.)
``FEW_GROUPS`` (rulesched.engine.batch: up to 8 groups of nodes alike in the labels
a filter reads, it is evaluated node by node on one node of each rather than as columns) is a
crossover of two costs measured on this machine's interpreter, not a budget: results do not
depend on it either.

Thresholds that stay with the language, because the language uses them node by node and never
imports the engine: ``CHECK_EVERY`` (rulesched.lang.evaluation.watch: nodes evaluated between two
checks whether an evaluation must stop; the engine's walks use the same count so a deadline is
noticed as promptly in both), ``CLASS_CACHE_SIZE`` (rulesched.lang.evaluation.ruleset: classes of
pods a session keeps bound; ``max_tables`` matches it, a table per bound class at most), and the
compiler's bind-time unroll of 16 elements (rulesched.lang.evaluation.compile_aggregates: a quantifier over a
bind-time list becomes one closure per element, a cost per pod and per node; the columns'
``column_unroll`` below is one numpy operation per element over all rows, so it affords more).
Next stage: the cycle (rulesched.scheduler.cycle) and the extender build one and pass it down.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineSettings:
    """The engine's budgets (see the module docstring); defaults are the live scheduler's."""

    # --- class tables (rulesched.engine.table): a class of pods' answers per node, kept ----------
    # Node-table rows kept over all classes, in rows (one row per node per class, ~19 bytes
    # each: three flags and eight int16 scores, wider where a rule's scores outgrow int16; ~380
    # MB at most). A class whose table was evicted recomputes its walk's window afresh at its
    # next pod: at 100 000 nodes that is 5000+ nodes per pod (upstream's 5%), so mixed's 200
    # interleaved Deployments must all keep theirs (200 tables there, 512 at 5000 nodes).
    table_rows: int = 20_000_000
    # Tables kept at most, whatever the cluster's size, in tables: a session keeps as many
    # classes bound (rulesched.lang's CLASS_CACHE_SIZE), and a table without its class is dead.
    max_tables: int = 512
    # Tables kept at least, in tables, however large the cluster: the few classes a cycle
    # interleaves (a gang, a Deployment's retries) keep theirs.
    min_tables: int = 16

    # --- shared rule columns (rulesched.engine.shared): answers classes share, per key ----------
    # Rule-column rows kept over all share keys, in rows (9 bytes each: ~54 MB at most).
    column_rows: int = 6_000_000
    # Share keys kept at least, in keys, whatever column_rows allows at this cluster size: mixed
    # uses ~200 (request sizes x three resource rules, selectors, preferences), and an evicted
    # key is refilled whole on its next uses, which at 100 000 nodes is most of a cycle (64 keys
    # there cost 5x per pod). At most ~9 MB per 1000 nodes.
    min_column_keys: int = 256
    # Journal positions the row log keeps, in entries (8 bytes each: 8 MB); a table older than
    # that recomputes every row, as after a relist.
    log_limit: int = 1 << 20

    # --- when rows go as columns -------------------------------------------------------------
    # A table walk that meets at least this many stale nodes evaluates the rules over them as
    # columns rather than node by node, in nodes (0: never). Below it, a column's set-up (a few
    # dozen numpy calls per rule) costs more than per-node closures. The extender passes 64: its
    # requests bring a node list per pod, and it was tuned against that (kept as it was: its p99
    # is measured apart).
    columns_from: int = 32
    # The most nodes one step of a table walk takes, in nodes (0: as many as the walk wants).
    # numpy lets go of the interpreter lock for operations on more than 500 elements; where
    # other threads are busy (the live scheduler's informers and binding workers) the walk then
    # waits to get it back, so the live faces pass 448. Results do not depend on it.
    walk_chunk: int = 0
    # Rows an update of the node columns writes one by one, in rows (more: one numpy
    # assignment). A bind changes one node; numpy's per-call cost would be most of the work.
    few_rows: int = 4

    # --- node columns (rulesched.engine.columns) ---------------------------------------------
    # Columns kept at most, in columns, and cells in all, in cells (8 bytes each, mostly): pods
    # each asking for a resource of their own make a column each, read once; kept without a
    # bound they grow without end and every one is brought up to date at every bind.
    max_columns: int = 256
    max_cells: int = 8_000_000
    # Columns kept at least, in columns, however large the cluster (a cycle's rules read a dozen).
    min_columns: int = 16
    # Groups of alike nodes a rule evaluated once per group may have, in groups (or an eighth of
    # the nodes, if more): above it the nodes are too unlike for one call per group to pay.
    max_groups: int = 64

    # --- the column evaluator (rulesched.engine.vectorise, encoded) ---------------------------
    # Elements of a pod-side list a quantifier (or a collect) is unrolled over when evaluated as
    # columns, in elements: one numpy operation per element over all rows. Longer lists raise
    # Unsupported and go node by node. (The two modules had the same 64 apart; now one value.)
    column_unroll: int = 64
