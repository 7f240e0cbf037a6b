"""What the compiler may assume of a binary operator's operands beyond their types."""

from __future__ import annotations

from rulesched.lang.evaluation.stages import Staged
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.types import QUANTITY, TO_MILLI, BinaryInfo


def whole_product(
    notes: Annotations, left: ast.Expr, right: ast.Expr, lcode: Staged, rcode: Staged, info: BinaryInfo
) -> bool:
    """Whether quantity * x is sure to be whole, so that plain * does what _q_mul does: a
    quantity (always int milli-units) times a constant int."""

    def quantity(expr: ast.Expr, coercion: str | None) -> bool:
        return notes.types[id(expr)] == QUANTITY or coercion == TO_MILLI or notes.coercions.get(id(expr)) == TO_MILLI

    def whole(code: Staged) -> bool:
        return code.is_const and isinstance(code.const, int) and not isinstance(code.const, bool)

    return (quantity(left, info.left) and whole(rcode)) or (quantity(right, info.right) and whole(lcode))
