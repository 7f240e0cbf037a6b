"""Hypothesis strategies for the rules language.

* :func:`rules_files`: well-formed ASTs (any shape the grammar can express, types ignored) for
  the print/parse round trip;
* :func:`typed_rule_sets`: rules *text* that checks cleanly, over a fixed vocabulary of pod, node,
  victim and bound-variable reads, for comparing the compiler with the reference interpreter;
* :func:`pods` and :func:`nodes`: objects to evaluate them on, drawn from small alphabets so that
  labels, tolerations and selectors actually match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from hypothesis import strategies as st

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.ast_builder import RESERVED
from rulesched.lang.frontend.source import Source, Span
from rulesched.model import Node, Pod, Taint, Toleration

GI = 2**30 * 1000

# --- ASTs for the round trip ------------------------------------------------------------------

# Every word the grammar gives a meaning to (grammar/rules.lark): never generated as a name.
KEYWORDS = RESERVED  # names a generated rule may not use
SPAN = Span(Source("<generated>", ""), 0, 0)  # spans are not part of AST equality
K = ast.LiteralKind

names = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True).filter(lambda s: s not in KEYWORDS),
    # names that start like keywords, numbers' suffixes or differ from a keyword only in case
    st.sampled_from(
        [
            "iff",
            "notin",
            "count_",
            "anyone",
            "true_",
            "override2",
            "whenever",
            "form",
            "node",
            "pod",
            "e",
            "m",
            "Gi",
            "s",
            "min_",
            "TRUE",
            "If",
            "inx",
            "_",
        ]
    ),
)
non_negative_floats = st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(abs)


def _lit(kind: ast.LiteralKind, value: object) -> ast.Literal:
    return ast.Literal(kind, value, span=SPAN)  # no text: the printer spells the value


literals = st.one_of(
    st.builds(_lit, st.just(K.NUMBER), st.integers(0, 10**18) | non_negative_floats),
    st.builds(_lit, st.just(K.QUANTITY), st.integers(0, 10**15)),
    st.builds(_lit, st.just(K.DURATION), non_negative_floats),
    st.builds(_lit, st.just(K.STRING), st.text(max_size=8)),
    st.builds(_lit, st.just(K.BOOL), st.booleans()),
)
weights = st.one_of(
    st.builds(_lit, st.just(K.NUMBER), st.integers(0, 1000) | non_negative_floats),
    st.builds(_lit, st.just(K.QUANTITY), st.integers(0, 10**6)),
    st.builds(_lit, st.just(K.DURATION), non_negative_floats),
)
OPERATORS = ["+", "-", "*", "/", "//", "%", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or"]


def _extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    def node(cls: type, *args: st.SearchStrategy[object]) -> st.SearchStrategy[ast.Expr]:
        return st.builds(cls, *args, span=st.just(SPAN))

    few = st.lists(children, max_size=3).map(tuple)
    where = st.none() | children
    return st.one_of(
        _operators(children),
        node(ast.ListExpr, few),
        node(ast.Attr, children, names),
        node(ast.Index, children, children),
        node(ast.Call, names, few),
        node(
            ast.Call,
            st.sampled_from(["sum", "min", "max", "collect"]),
            st.lists(children, min_size=2, max_size=3).map(tuple),
        ),
        node(ast.Quantifier, st.sampled_from(["count", "any", "all"]), names, children, where),
        node(ast.Aggregate, st.sampled_from(["sum", "min", "max", "collect"]), children, names, children, where),
    )


def _operators(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.Binary, st.sampled_from(OPERATORS), children, children, span=st.just(SPAN)),
        st.builds(ast.Unary, st.sampled_from(["-", "not"]), children, span=st.just(SPAN)),
        st.builds(ast.If, children, children, children, span=st.just(SPAN)),
    )


atoms = literals | st.builds(ast.Name, names, span=st.just(SPAN))


@st.composite
def _operator_tree(draw: st.DrawFn, depth: int) -> ast.Expr:
    """Operators nested directly in operators, mostly binary: precedence is where printing goes wrong."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        return draw(atoms)
    shape = draw(st.integers(0, 5))
    sub = _operator_tree(depth - 1)
    if shape <= 3:
        return ast.Binary(draw(st.sampled_from(OPERATORS)), draw(sub), draw(sub), span=SPAN)
    if shape == 4:
        return ast.Unary(draw(st.sampled_from(["-", "not"])), draw(sub), span=SPAN)
    return ast.If(draw(sub), draw(sub), draw(sub), span=SPAN)


operator_trees = _operator_tree(4)
expressions: st.SearchStrategy[ast.Expr] = st.recursive(atoms | operator_trees, _extend, max_leaves=14)


@st.composite
def rules(draw: st.DrawFn) -> ast.Rule:
    kind = draw(st.sampled_from(list(ast.RuleKind)))
    maybe = st.none() | expressions
    return ast.Rule(
        kind,
        draw(names),
        draw(expressions),
        guard=draw(maybe),
        override=draw(st.booleans()),
        reason=draw(maybe) if kind is ast.RuleKind.FILTER else None,
        weight=draw(st.none() | weights) if kind is ast.RuleKind.SCORE else None,
        normalize=draw(st.none() | names | st.sampled_from(["max", "min"])) if kind is ast.RuleKind.SCORE else None,
        order=draw(maybe) if kind is ast.RuleKind.PREEMPT else None,
        unresolvable=draw(maybe) if kind is ast.RuleKind.FILTER else None,
        audit=draw(st.booleans()) if kind is ast.RuleKind.FILTER else False,
        span=SPAN,
        name_span=SPAN,
    )


@st.composite
def partial_filter_overrides(draw: st.DrawFn) -> ast.PartialOverride:
    """``override filter NAME [when GUARD] unresolvable [when COND]`` (one stating nothing does not parse)."""
    return ast.PartialOverride(
        ast.RuleKind.FILTER,
        draw(names),
        guard=draw(st.none() | expressions),
        unresolvable=draw(expressions),
        audit=draw(st.booleans()),
        span=SPAN,
        name_span=SPAN,
    )


items = st.one_of(
    st.builds(ast.Let, names, expressions, span=st.just(SPAN), name_span=st.just(SPAN)),
    rules(),
    partial_filter_overrides(),
    st.builds(ast.Disable, names, st.none() | st.sampled_from(list(ast.RuleKind)), span=st.just(SPAN)),
    st.builds(ast.Extends, st.text(max_size=12), span=st.just(SPAN)),
)
rules_files = st.builds(ast.RulesFile, st.just(SPAN.source), st.lists(items, max_size=5).map(tuple))

# --- well-typed rules text --------------------------------------------------------------------

LETS = (
    "let heavy = pod.requests.cpu > 1 or pod.priority > 2\n"
    "let crowded = count(x in node.pods where x.priority >= pod.priority) > 1\n"
    "let load = sum(x.requests.cpu for x in node.pods)\n"
    "let busy = crowded or load > 2\n"
    "let junior = victim.priority < pod.priority\n"
    # a table (data a policy ships) and lets computed once per (pod, node) that loop over it
    'let mix = table(w, cpu, name, tags) [[2, 500m, "web", ["x"]], [1, 0, "", []], [-3, 1.5, "db", ["x", "y"]]]\n'
    "let fitting = sum(m.w for m in mix where node.free.cpu >= m.cpu + pod.requests.cpu)\n"
    "let spread = sum(m.w * count(x in node.pods where x.requests.cpu >= m.cpu) for m in mix)\n"
    # lets that loop and read the pod and the node only through other lets: their answers are kept
    # by those lets' values (rulesched.lang.evaluation.let_memo), ints as keys, floats not
    "let left = node.free.cpu - pod.requests.cpu\n"
    "let loads = collect(x.requests.cpu for x in node.pods)\n"
    "let room = sum(m.w for m in mix where left >= m.cpu) + count(q in loads where q <= left)\n"
    "let third = number(node.free.cpu - pod.requests.cpu) / 3\n"
    # ... and lets with room's body up to its inputs (node-only ones: kept per node too) share its
    # table; one differing in an operator does not
    "let left_now = node.free.cpu\n"
    "let room_now = sum(m.w for m in mix where left_now >= m.cpu) + count(q in loads where q <= left_now)\n"
    "let room_less = sum(m.w for m in mix where left_now >= m.cpu) + count(q in loads where q < left_now)\n"
    "let thirds = sum(m.w for m in mix where third >= number(m.cpu))\n"
    # ... a let reading left only against the table's cpus: kept by where left falls among them
    "let sizes = table(w, cpu) [[2, 500m], [1, 0m], [5, 2000m]]\n"
    # ... a loop in a loop's body reading the pod and the node, not the row: once per (pod, node)
    "let hoisted = sum(m.w * count(x in node.pods where x.requests.cpu >= pod.requests.cpu) for m in mix)\n"
    "let ranked = sum(m.w for m in sizes where left > m.cpu) + count(m in sizes where m.cpu >= left or left < 1000m)\n"
)


@dataclass(frozen=True)
class Env:
    """What an expression may read: node, victim, and bound variables as (name, kind)."""

    node: bool
    victim: bool = False
    bound: tuple[tuple[str, str], ...] = ()

    def bind(self, kind: str) -> tuple[str, Env]:
        name = f"v{len(self.bound)}"
        return name, replace(self, bound=(*self.bound, (name, kind)))

    def of(self, kind: str) -> list[str]:
        return [n for n, k in self.bound if k == kind]

    def pods(self) -> list[str]:
        return ["pod", *(["victim"] if self.victim else []), *self.of("pod")]


def _pick(draw: st.DrawFn, options: list[str]) -> str:
    return draw(st.sampled_from(options))


Thunk = Callable[[], str]


def _choose(draw: st.DrawFn, leaves: list[str], compound: list[Thunk]) -> str:
    """A compound expression four times in five (a leaf when there is none); only the chosen
    option is built, so drawing stays linear in the expression's size."""
    if not compound or draw(st.integers(0, 4)) == 4:
        return _pick(draw, leaves)
    return compound[draw(st.integers(0, len(compound) - 1))]()


def _loop(draw: st.DrawFn, env: Env) -> tuple[str, str, Env]:
    """An iterable, its bound variable and the environment inside the loop."""
    sources = [("pod.tolerations", "toleration"), ("[0, 1, 2]", "num"), ('["", "web"]', "str"), ("pod.labels", "str")]
    sources += [("mix", "row")]
    if env.node:
        sources += [("node.pods", "pod"), ("node.taints", "taint")]
    iterable, kind = draw(st.sampled_from(sources))
    var, inner = env.bind(kind)
    return iterable, var, inner


def gen(draw: st.DrawFn, t: str, env: Env, depth: int) -> str:
    return {"bool": _bool, "num": _num, "qty": _qty, "str": _str}[t](draw, env, depth)


def _quantified(draw: st.DrawFn, env: Env, depth: int, make: Callable[[str, str, str], str]) -> str:
    iterable, var, inner = _loop(draw, env)
    return make(iterable, var, gen(draw, "bool", inner, depth - 1))


def _element_loop(draw: st.DrawFn, env: Env, depth: int, kinds: list[str]) -> str:
    """A loop whose condition compares the element itself with a value not reading it (the
    compiler's element loops: rulesched.lang.evaluation.element_loops), either side, any
    comparison, over constant or node-read lists of numbers."""
    var, inner = env.bind("num")
    other = gen(draw, "num", env.bind("element")[1], depth - 1)  # (a name taken, never read)
    op = _pick(draw, ["==", "!=", "<", "<=", ">", ">="])
    cond = _pick(draw, [f"{var} {op} ({other})", f"({other}) {op} {var}"])
    lists = ["[0, 1, 2]", "[2, 0.5, 1, 2]", "[]", *(["collect(x.priority for x in node.pods)"] if env.node else [])]
    items = _pick(draw, lists)
    kind = _pick(draw, kinds)
    if kind in ("count", "any", "all"):
        return f"{kind}({var} in {items} where {cond})"
    value = _pick(draw, [var, var, f"{var} * ({gen(draw, 'num', inner, depth - 1)})"])
    return f"{kind}({value} for {var} in {items} where {cond})"


def _bool(draw: st.DrawFn, env: Env, depth: int) -> str:
    def g(t: str) -> str:
        return gen(draw, t, env, depth - 1)

    def cmp() -> str:
        return _pick(draw, ["==", "!=", "<", "<=", ">", ">="])

    p, q = _pick(draw, env.pods()), _pick(draw, env.pods()[::-1])
    leaves = ["true", "false", f'has({p}.labels, "app")', f"{p}.priority > {draw(st.integers(0, 4))}", "heavy"]
    leaves += [f"{p}.priority < {q}.priority", f'{p}.labels["app"] == {q}.labels["app"]'] * 2  # mix objects
    leaves += [f"tolerated({t}, pod.tolerations)" for t in env.of("taint")]
    leaves += [f'{t}.effect == "NoSchedule"' for t in env.of("taint")]
    leaves += [f'{u}.operator == "Exists"' for u in env.of("toleration")]
    leaves += [f"tolerates({u}, {t})" for u in env.of("toleration") for t in env.of("taint")]
    leaves += [f"{x} >= 2" for x in env.of("num")]
    leaves += [f'"x" in {m}.tags' for m in env.of("row")] + [f'{m}.name == {p}.labels["app"]' for m in env.of("row")]
    if env.node:
        leaves += ["node.unschedulable", '"zone" in node.labels', "crowded", "busy", "fitting > 0"]
        leaves += [f"node.free.cpu >= {m}.cpu" for m in env.of("row")]
    if env.victim:
        leaves += ["junior"]

    def relative() -> str:  # a node loop that reads an outer variable: must not be cached per node
        outer = _pick(draw, [*(["victim"] if env.victim else []), *env.of("pod")])
        var, inner = env.bind("pod")
        cond = _pick(
            draw,
            [
                f"{var}.priority {cmp()} {outer}.priority",
                f'{var}.labels["app"] == {outer}.labels["app"]',
                f"({gen(draw, 'bool', inner, depth - 1)}) and {var}.name != {outer}.name",
            ],
        )
        return f"count({var} in node.pods where {cond}) {cmp()} {draw(st.integers(0, 2))}"

    def bare() -> str:  # no where: every element counts, falsy ones too
        var, _ = env.bind("num")
        lists = ["[0, 1, 2]", "[false]", '[""]', "[]", "pod.tolerations", *(["node.taints"] if env.node else [])]
        return f"{_pick(draw, ['any', 'all'])}({var} in {_pick(draw, lists)})"

    compound: list[Thunk] = (
        []
        if depth <= 0
        else [
            *([relative] * 2 if env.node and (env.victim or env.of("pod")) else []),
            lambda: f"not ({g('bool')})",
            lambda: f"({g('bool')}) and ({g('bool')})",
            lambda: f"({g('bool')}) or ({g('bool')})",
            lambda: f"(if {g('bool')} then {g('bool')} else {g('bool')})",
            lambda: f"({g('num')}) {cmp()} ({g('num')})",
            lambda: f"({g('qty')}) {cmp()} ({g('qty')})",
            lambda: f"({g('qty')}) {cmp()} ({g('num')})",
            lambda: f"({g('str')}) {cmp()} ({g('str')})",
            lambda: f"({g('str')}) in [{g('str')}, {g('str')}]",
            lambda: f"({g('str')}) not in {p}.labels",
            lambda: f"({g('str')}) in ({g('str')})",
            lambda: f"({g('qty')}) in [{g('qty')}, {g('num')}]",
            lambda: _quantified(draw, env, depth, lambda it, v, c: f"any({v} in {it} where {c})"),
            lambda: _quantified(draw, env, depth, lambda it, v, c: f"all({v} in {it} where {c})"),
            lambda: _element_loop(draw, env, depth, ["any", "all"]),
            bare,
        ]
    )
    return _choose(draw, leaves, compound)


def _num(draw: st.DrawFn, env: Env, depth: int) -> str:
    def g(t: str) -> str:
        return gen(draw, t, env, depth - 1)

    def aggregate() -> str:
        var, inner = env.bind("pod")
        cond = gen(draw, "bool", inner, depth - 1)
        return f"{_pick(draw, ['sum', 'min', 'max'])}({var}.priority for {var} in node.pods where {cond})"

    def weighted() -> str:
        var, inner = env.bind("num")
        value, cond = gen(draw, "num", inner, depth - 1), gen(draw, "bool", inner, depth - 1)
        return f"sum({var} * ({value}) for {var} in [0, 1, 2] where {cond})"

    p = _pick(draw, env.pods())
    leaves = [str(draw(st.integers(0, 5))), _pick(draw, ["0.5", "2.5"]), f"{p}.priority", f"len({p}.labels)"]
    leaves += env.of("num") + [f"{u}.toleration_seconds" for u in env.of("toleration")]
    leaves += [f"{m}.w" for m in env.of("row")] + [f"len({m}.tags)" for m in env.of("row")]
    if env.node:
        leaves += [
            "len(node.pods)",
            "len(node.taints)",
            "spread",
            "fitting",
            "room",
            "thirds",
            "room_now",
            "room_less",
            "ranked",
            "hoisted",
        ]
    op = _pick(draw, ["+", "-", "*", "/", "//", "%"])
    compound: list[Thunk] = (
        []
        if depth <= 0
        else [
            lambda: f"({g('num')}) {op} ({g('num')})",
            lambda: f"-({g('num')})",
            lambda: f"(if {g('bool')} then {g('num')} else {g('num')})",
            lambda: f"max({g('num')}, {g('num')})",
            lambda: f"number({g('qty')})",
            lambda: f"({g('qty')}) / ({g('qty')})",
            lambda: f"abs({g('num')})",
            lambda: f"100 * sigmoid({g('num')})",
            lambda: f"exp({g('num')})",  # beyond 709.78 the largest float; infinity after it
            lambda: f"({g('num')}) / ({g('qty')})",
            weighted,
            lambda: _quantified(draw, env, depth, lambda it, v, c: f"count({v} in {it} where {c})"),
            lambda: _element_loop(draw, env, depth, ["count", "sum", "min", "max"]),
            *([aggregate] if env.node else []),
        ]
    )
    return _choose(draw, leaves, compound)


def _qty(draw: st.DrawFn, env: Env, depth: int) -> str:
    def g(t: str) -> str:
        return gen(draw, t, env, depth - 1)

    def aggregate() -> str:
        var, inner = env.bind("pod")
        cond = gen(draw, "bool", inner, depth - 1)
        return _pick(
            draw,
            [
                f"sum({var}.requests.cpu for {var} in node.pods where {cond})",
                f"min({var}.requests.memory for {var} in node.pods)",
            ],
        )

    p = _pick(draw, env.pods())
    leaves = [
        f"{p}.requests.cpu",
        f"{p}.requests.memory",
        _pick(draw, ["500m", "2Gi", "1k", "0m"]),
        f'quantity({p}.annotations["size"])',
        *(f"{m}.cpu" for m in env.of("row")),
    ]
    if env.node:
        leaves += ["node.free.cpu", "node.free.memory", "node.allocatable.pods", "node.requested.cpu", "load"]
    compound: list[Thunk] = (
        []
        if depth <= 0
        else [
            lambda: f"({g('qty')}) + ({g('qty')})",
            lambda: f"({g('qty')}) - ({g('qty')})",
            lambda: f"({g('qty')}) + ({g('num')})",
            lambda: f"({g('qty')}) * ({g('num')})",
            lambda: f"({g('num')}) * ({g('qty')})",
            lambda: f"({g('qty')}) / ({g('num')})",
            lambda: f"({g('qty')}) // ({g('num')})",
            lambda: f"({g('qty')}) % ({g('qty')})",
            lambda: f"-({g('qty')})",
            lambda: f"(if {g('bool')} then {g('qty')} else {g('qty')})",
            lambda: f"(if {g('bool')} then {g('qty')} else {g('num')})",
            lambda: f"max({g('qty')}, {g('num')})",
            lambda: f"[{g('num')}, {g('qty')}][{draw(st.integers(-1, 2))}]",
            *([aggregate] if env.node else []),
        ]
    )
    return _choose(draw, leaves, compound)


def _str(draw: st.DrawFn, env: Env, depth: int) -> str:
    def g(t: str) -> str:
        return gen(draw, t, env, depth - 1)

    p = _pick(draw, env.pods())
    leaves = [
        '"web"',
        '"db"',
        '""',
        '"z1"',
        f'{p}.labels["app"]',
        f'{p}.labels["tier"]',
        f"{p}.name",
        f'{p}.annotations["note"]',
    ]
    leaves += [f"{t}.{field}" for t in env.of("taint") for field in ("key", "value", "effect")]
    leaves += [f"{u}.key" for u in env.of("toleration")] + env.of("str")
    if env.node:
        leaves += ['node.labels["zone"]', "node.name"]
    compound: list[Thunk] = (
        []
        if depth <= 0
        else [
            lambda: f"({g('str')}) + ({g('str')})",
            lambda: f"lower({g('str')})",
            lambda: f"string({g('num')})",
            lambda: f"(if {g('bool')} then {g('str')} else {g('str')})",
        ]
    )
    return _choose(draw, leaves, compound)


@st.composite
def typed_rule_sets(draw: st.DrawFn, max_depth: int = 3) -> str:
    """A rules file with the lets above and a few rules of every kind; it checks cleanly."""
    guard_env, body_env = Env(node=False), Env(node=True)
    out = [LETS]
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["filter", "score", "preempt"]))
        depth = draw(st.integers(1, max_depth))
        guard = f" when {gen(draw, 'bool', guard_env, 2)}" if draw(st.booleans()) else ""
        if kind == "filter":
            reason = ""
            if draw(st.booleans()):
                reason = f"\n    else {_pick(draw, [gen(draw, 'str', body_env, 1), '[' + gen(draw, 'str', body_env, 1) + ']'])}"
            unresolvable = _pick(
                draw, ["", "\n    unresolvable", f"\n    unresolvable when {gen(draw, 'bool', body_env, 1)}"]
            )
            out.append(f"filter r{i}{guard}:\n    {gen(draw, 'bool', body_env, depth)}{reason}{unresolvable}\n")
        elif kind == "score":
            out.append(
                f"score r{i} weight {draw(st.integers(1, 3))}{guard}:\n    {gen(draw, 'num', body_env, depth)}\n"
            )
        else:
            order = f"\n    order {gen(draw, 'num', body_env, 1)}" if draw(st.booleans()) else ""
            body = gen(draw, "bool", Env(node=True, victim=True), depth)
            out.append(f"preempt r{i}{guard}:\n    {body}{order}\n")
    return "\n".join(out)


# --- pods and nodes ---------------------------------------------------------------------------


def _labels(keys: list[str], values: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(keys), st.sampled_from(values), max_size=2)


tolerations = st.builds(
    Toleration,
    key=st.sampled_from(["", "gpu", "dedicated"]),
    operator=st.sampled_from(["Equal", "Exists"]),
    value=st.sampled_from(["", "true"]),
    effect=st.sampled_from(["", "NoSchedule", "NoExecute"]),
    toleration_seconds=st.sampled_from([None, 0, 5]),
)


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    return Pod(
        draw(st.sampled_from(["a", "b", "web", "db"])),
        labels=draw(_labels(["app", "tier"], ["web", "db", ""])),
        annotations=draw(_labels(["note", "size"], ["", "2Gi", "junk", "500m", "web"])),
        priority=draw(st.integers(0, 4)),
        requests={"cpu": draw(st.sampled_from([0, 500, 1000, 2500])), "memory": draw(st.sampled_from([0, GI]))},
        tolerations=tuple(draw(st.lists(tolerations, max_size=2))),
    )


@st.composite
def nodes(draw: st.DrawFn) -> NodeInfo:
    node = Node(
        draw(st.sampled_from(["n1", "n2", "web"])),
        labels=draw(_labels(["zone", "app"], ["z1", "z2", "web"])),
        allocatable={
            "cpu": draw(st.sampled_from([0, 2000, 4000])),
            "memory": draw(st.sampled_from([0, 4 * GI])),
            "pods": draw(st.sampled_from([0, 3000, 110_000])),
        },
        unschedulable=draw(st.booleans()),
        taints=tuple(
            draw(
                st.lists(
                    st.builds(
                        Taint,
                        st.sampled_from(["gpu", "dedicated"]),
                        st.sampled_from(["", "true"]),
                        st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
                    ),
                    max_size=2,
                )
            )
        ),
    )
    return NodeInfo(node, draw(st.lists(pods(), max_size=3)))
