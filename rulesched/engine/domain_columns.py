"""Aggregates over topology domains evaluated as columns: once per group of nodes alike in the
domain's label, not once per node.

An indexed domain aggregate (rulesched.lang.frontend.domain_check) over ``domain(node, KEY)``
depends on the node only through its value of label KEY; one over ``cluster`` or the minimum
over the domains (``OverDomains``) not at all. So :class:`rulesched.engine.vectorise.ColumnEvaluator`
asks the compiled aggregate (the same closures and indexes the node-by-node path uses, made once
per pod and kept in the context's scratch) for one representative node per label value and
spreads the answers over the rows. Next stage: the column's consumer, as for any column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rulesched.engine.arrays import Col, Unsupported, Value, column_of
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.lang import schema
from rulesched.lang.evaluation.domain_stages import MANY
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.stages import Factory
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.frontend.domain_check import DomainAggregate

DomainCodes = Mapping[int, Factory]  # the compiled aggregates, by id of the aggregate


def groupable(expr: ast.Expr, notes: Annotations, reads_node: Any) -> bool | None:
    """For an indexed domain aggregate: whether it can be a column (its domain is the cluster,
    or ``domain(node, KEY)`` with KEY known for the pod); None for any other expression."""
    info = notes.domain_aggregates.get(id(expr))
    if info is None:
        return None
    if not isinstance(info, DomainAggregate):
        return True  # over the domains: the same on every node
    source = info.source
    if isinstance(source, ast.Name):
        return True  # the cluster
    if isinstance(source, ast.Call) and len(source.args) == 2:
        subject, key = source.args
        ref = notes.names.get(id(subject)) if isinstance(subject, ast.Name) else None
        return ref is not None and ref.kind == "var" and ref.name == schema.NODE_VARIABLE and not reads_node(key)
    return False


def domain_column(
    expr: ast.Expr, codes: DomainCodes, notes: Annotations, interp: Interpreter, ctx: Any, cols: NodeColumns, rows: Rows
) -> Value:
    """The aggregate's value on the rows: a scalar when the same everywhere, else a column."""
    scratch = ctx.scratch
    fn = scratch.get(("domain column", id(expr)))
    if fn is None:
        fn = scratch["domain column", id(expr)] = codes[id(expr)](ctx)
    info = notes.domain_aggregates[id(expr)]
    if not isinstance(info, DomainAggregate) or isinstance(info.source, ast.Name):
        return fn(None)
    assert isinstance(info.source, ast.Call)
    key = interp.evaluate(info.source.args[1], ctx, None, {})
    groups = cols.label_groups((key,))
    nodes = cols.nodes
    if groups is None:  # more label values than columns group: one answer per value, looked up per row
        known: dict[Any, Any] = scratch.setdefault(("domain values", id(expr)), {})
        values = []
        for r in rows.tolist():
            label = nodes[r].labels.get(key)
            hit = known.get(label, known)
            if hit is known:
                hit = known[label] = fn(nodes[r])
            values.append(hit)
        return column_of(values, notes.types[id(expr)])
    answers = scratch.get(("domain answers", id(expr), id(groups)))
    if answers is None:
        many = scratch.get((MANY, id(fn)))
        reps = [nodes[r] for r in groups.representatives]
        # (the bulk form is given the label values too: the groups' own keys)
        labels = [k[0] for k in groups.keys()]
        found = column_of(many(reps, labels) if many is not None else [fn(n) for n in reps], notes.types[id(expr)])
        if not isinstance(found, Col):
            raise Unsupported("not a column")
        answers = scratch["domain answers", id(expr), id(groups)] = found.array
    return Col(answers[groups.codes[rows]])
