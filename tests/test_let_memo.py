"""Lets kept by the values they read (rulesched.lang.evaluation.let_memo): which values may be
keys. Whether kept answers equal the interpreter's is tests/test_lang_properties.py's property
(tests/strategies.py's lets ``room`` and ``thirds``); it fails when a key leaves an input out."""

from __future__ import annotations

from rulesched.lang.evaluation.let_memo import key_check
from rulesched.lang.types import BOOL, NUMBER, QUANTITY, STRING, ListOf, MapOf


def test_only_values_equal_in_meaning_when_equal_are_keys() -> None:
    number, quantity, text, flag = key_check(NUMBER), key_check(QUANTITY), key_check(STRING), key_check(BOOL)
    assert number is not None and quantity is not None and text is not None and flag is not None
    assert number(3) and quantity(3000) and text("T4") and flag(True)
    assert not number(3.0) and not number(-0.0)  # (1.0 == 1 and -0.0 == 0.0 as keys)
    assert not number(True) and not flag(1)  # (True == 1 as keys)
    numbers = key_check(ListOf(NUMBER))
    assert numbers is not None
    assert numbers((1000, 190, 0)) and numbers(())
    assert not numbers((1000, 0.5)) and not numbers([1000])
    assert key_check(MapOf(NUMBER)) is None and key_check(ListOf(ListOf(NUMBER))) is None
