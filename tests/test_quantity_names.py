"""Quantities and names as the API server reads them: upstream's tables (apimachinery's
resource.TestQuantityParse, util/validation's TestIsDNS1123Label, TestIsDNS1123Subdomain,
TestIsDNS1035Label, content.TestIsLabelKey and TestIsLabelValue), then the bounds added here
(no NaN, nothing above 2^63-1, bounded cost whatever the input)."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.model.names import dns1035_label, dns1123_label, dns1123_subdomain, label_value, qualified_name
from rulesched.model.quantity import MAX_UNITS, QuantityError, format_quantity, parse_quantity
from tests.helpers.profiles import examples

Ki, Mi, Gi, Ti, Pi, Ei = (2 ** (10 * k) for k in range(1, 7))


def dec(mantissa: int, exponent: int) -> int:
    """decQuantity(mantissa, exponent) of upstream's table, in milli-units (rounded up)."""
    return -(-mantissa * 10 ** (exponent + 12) // 10**9)


# (input, milli-units): TestQuantityParse's table; milli-units round up as MilliValue does.
UPSTREAM = [
    ("0", 0), ("0n", 0), ("0u", 0), ("0m", 0), ("0Ki", 0), ("0k", 0), ("0Mi", 0), ("0M", 0),
    ("0Gi", 0), ("0G", 0), ("0Ti", 0), ("0T", 0),
    ("1", 1000),
    ("1Ki", Ki * 1000), ("8Ki", 8 * Ki * 1000), ("7Mi", 7 * Mi * 1000), ("6Gi", 6 * Gi * 1000),
    ("5Ti", 5 * Ti * 1000), ("4Pi", 4 * Pi * 1000), ("3Ei", 3 * Ei * 1000),
    ("10Ti", 10 * Ti * 1000), ("100Ti", 100 * Ti * 1000),
    ("5n", dec(5, -9)), ("4u", dec(4, -6)), ("3m", 3), ("9", 9000), ("8k", dec(8, 3)), ("50k", dec(5, 4)),
    ("7M", dec(7, 6)), ("6G", dec(6, 9)), ("5T", dec(5, 12)), ("40T", dec(4, 13)), ("300T", dec(3, 14)),
    ("2P", dec(2, 15)), ("1E", dec(1, 18)),
    ("1E-3", 1), ("1e3", dec(1, 3)), ("1E6", dec(1, 6)), ("1e9", dec(1, 9)), ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)), ("1E18", dec(1, 18)),
    ("1e14", dec(1, 14)), ("1e13", dec(1, 13)), ("100.035k", dec(100035, 0)),
    ("0.001", 1), ("0.0005k", dec(5, -1)), ("0.005", 5), ("0.05", 50), ("0.5", 500), ("0.00050k", 500),
    ("0.00500", 5), ("0.05000", 50), ("0.50000", 500), ("0.5e0", 500), ("0.5e-1", 50), ("0.5e-2", 5),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)), ("1.3E+6", dec(13, 5)), ("1.40e9", dec(14, 8)), ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)), ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)), ("8.1k", dec(81, 2)), ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)), ("5.444T", dec(5444, 9)), ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)), ("2.5P", dec(25, 14)), ("1.01E", dec(101, 16)),
    ("3.001n", 1), ("1.1E-9", 1), ("0.0000000001", 1), ("0.0000000005", 1), ("0.00000000050", 1),
    ("0.5e-9", 1), ("0.9n", 1), ("0.00000012345", 1), ("0.00000012354", 1),
    ("9Ei", MAX_UNITS * 1000), ("9223372036854775807Ki", MAX_UNITS * 1000),  # upstream caps binary SI
    ("100.035Ki", 102435840), ("0.5Mi", Mi // 2 * 1000), ("0.05Gi", 53687091200), ("0.025Ti", 27487790694400),
    ("0.000000000001Ki", 1), (".001", 1), (".0001k", 100), ("1.", 1000), ("1.G", dec(1, 9)),
]  # fmt: skip


@pytest.mark.parametrize(("text", "milli"), UPSTREAM)
def test_upstream_parse_table(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli
    assert parse_quantity("+" + text) == milli
    if milli:
        assert parse_quantity("-" + text) == -milli


BAD = [
    "",
    ".",
    "-",
    "+",
    "1e",
    "1ki",
    "1.5.5",
    "1e1.5",
    "1 Gi",
    "1Gib",
    "0x10",
    "1_000",
    "½",
    "١",
    "1e+",
    ".nan",
    ".inf",
    "NaN",
    "Infinity",
    "1e99999999999999999999",
]


@pytest.mark.parametrize("text", BAD)
def test_not_quantities(text: str) -> None:
    with pytest.raises(QuantityError, match="not a quantity|out of range"):
        parse_quantity(text)


@pytest.mark.parametrize(
    "value", ["1e400", "12E", "9223372036854775808", "1" * 5000, 10**30, "99999999999999999999999Ki"]
)
def test_too_large_is_refused_not_wrapped(value: str | int) -> None:
    if value == "99999999999999999999999Ki":
        assert parse_quantity(value) == MAX_UNITS * 1000  # binary: capped, as upstream
        return
    with pytest.raises(QuantityError, match=r"too large \(at most 2\^63-1\)"):
        parse_quantity(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e400])
def test_floats_that_are_not_numbers(value: float) -> None:
    with pytest.raises(QuantityError, match="not a number, or too large"):
        parse_quantity(value)


def test_yaml_and_json_numbers() -> None:
    assert parse_quantity(0.5) == 500
    assert parse_quantity(2) == 2000
    assert parse_quantity(1e3) == 1_000_000
    assert parse_quantity(MAX_UNITS) == MAX_UNITS * 1000


def test_cost_is_bounded_whatever_the_digits() -> None:
    started = time.thread_time()  # (CPU time: the parse's cost, not the machine's load)
    assert parse_quantity("0." + "0" * 200_000 + "1") == 1  # rounds up to 1m
    assert parse_quantity("1." + "0" * 200_000 + "1") == 1001
    assert parse_quantity("1e-999999999999999999") == 1
    with pytest.raises(QuantityError):
        parse_quantity("9" * 200_000)
    assert time.thread_time() - started < 1.0


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, MAX_UNITS * 1000))
def test_format_reads_back(milli: int) -> None:
    assert parse_quantity(format_quantity(milli)) == milli


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="0123456789.eE+-numkMGTPEKi ", max_size=30))
def test_any_short_string_parses_or_is_refused(text: str) -> None:
    try:
        milli = parse_quantity(text)
    except QuantityError as err:
        assert "\n" not in str(err)
    else:
        assert abs(milli) <= MAX_UNITS * 1000


# --- names: util/validation's tables --------------------------------------------------------------

LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63]
LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
    "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64,
    "a\x00", "a\n", "a\nb",
]  # fmt: skip
SUBDOMAIN_GOOD = [
    *LABEL_GOOD[:-1], "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1",
    "a-1.1", "a--1--2--b.1", "0.a", "01.a", "012.a", "1a.a", "1-a.a", "0.1", "01.1", "012.1", "1a.1", "1-a.1",
    "1--a--b--2.1", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55", "a" * 253,
]  # fmt: skip
SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
    "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "A.a",
    "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b", "a:b", "a%b",
    "a?b", "a$b", "a" * 254, "n\x00x", "web\n",
]  # fmt: skip
DNS1035_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_BAD = ["0", "01", "012", "1a", "1-a", "1--a--b--2", *LABEL_BAD]
KEY_GOOD = [
    "simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple", "1-num.2-num/3-num",
    "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123", "requests.storage-foo",
    "a" * 63, "a" * 253 + "/" + "b" * 63, "kubernetes.io/hostname", "nvidia.com/gpu", "hugepages-2Mi",
]  # fmt: skip
KEY_BAD = [
    "nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash", "Example.com/abc",
    "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc", "", "a\x00b", "app\n",
]  # fmt: skip
VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
VALUE_BAD = [
    "nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts-with-dash",
    "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64, "a\x00", "v\n",
]  # fmt: skip

NAME_TABLES = [
    (dns1123_label, LABEL_GOOD, LABEL_BAD),
    (dns1123_subdomain, SUBDOMAIN_GOOD, SUBDOMAIN_BAD),
    (dns1035_label, DNS1035_GOOD, DNS1035_BAD),
    (qualified_name, KEY_GOOD, KEY_BAD),
    (label_value, VALUE_GOOD, VALUE_BAD),
]


@pytest.mark.parametrize(("check", "good", "bad"), NAME_TABLES, ids=[t[0].__name__ for t in NAME_TABLES])
def test_upstream_name_tables(check: object, good: list[str], bad: list[str]) -> None:
    assert callable(check)
    assert [v for v in good if check(v)] == []
    refused = {v: check(v) for v in bad}
    assert [v for v, problem in refused.items() if not problem] == []
    assert all(problem.isprintable() for problem in refused.values())  # one line, NULs escaped
