"""softfloat16.testing: strategies checked with exact rationals, assertion messages, the plugin."""
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings, strategies as st

import softfloat16 as sf
from softfloat16.testing import (
    KINDS, assert_bits_equal, assert_within_ulp, bits, near_midpoint, near_overflow,
    near_underflow, testfloat_bits,
)

FORMATS = [sf.fp16, sf.bf16, sf.fp32]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def kind(b: int, fmt) -> str:
    """The class of a pattern, straight from the field definitions."""
    e = (b >> fmt.fraction_bits) & ((1 << fmt.exponent_bits) - 1)
    f = b & ((1 << fmt.fraction_bits) - 1)
    if e == 0:
        return "zero" if f == 0 else "subnormal"
    if e < (1 << fmt.exponent_bits) - 1:
        return "max_finite" if b & (fmt.sign_mask - 1) == fmt.max_finite else "normal"
    if f == 0:
        return "inf"
    return "qnan" if f >> (fmt.fraction_bits - 1) else "snan"


def value(b: int, fmt) -> Fraction:
    """Exact value of a finite pattern (IEEE 754 definition)."""
    e = (b >> fmt.fraction_bits) & ((1 << fmt.exponent_bits) - 1)
    f = b & ((1 << fmt.fraction_bits) - 1)
    bias = (1 << (fmt.exponent_bits - 1)) - 1
    assert e != (1 << fmt.exponent_bits) - 1, "not finite"
    significand = Fraction(f, 1 << fmt.fraction_bits) + (1 if e else 0)
    v = significand * Fraction(2) ** (max(e, 1) - bias)
    return -v if b & fmt.sign_mask else v


def ulp_at(x: Fraction, fmt) -> Fraction:
    """Spacing of the format's values around |x| (subnormal spacing below 2^emin)."""
    bias = (1 << (fmt.exponent_bits - 1)) - 1
    p = fmt.fraction_bits + 1
    x = abs(x)
    e = 1 - bias
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return Fraction(2) ** (e - p + 1)


def midpoint_offset(x: Fraction, fmt) -> Fraction:
    """Signed distance, in ulps, from |x| to the nearest midpoint between two neighbours."""
    scaled = abs(x) / ulp_at(x, fmt)
    return scaled - (scaled.numerator // scaled.denominator) - Fraction(1, 2)


def exact(op: str, operands, fmt) -> Fraction:
    v = [value(b, fmt) for b in operands]
    return {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1], "mul": lambda: v[0] * v[1],
            "div": lambda: v[0] / v[1]}[op]()


# --- bits and testfloat_bits ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_bits_generates_every_class_of_both_signs(fmt):
    seen = set()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(bits(fmt))
    def collect(b):
        seen.add((kind(b, fmt), b >> (fmt.width - 1)))
    collect()
    assert seen == {(k, s) for k in KINDS for s in (0, 1)}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_bits_draws_only_the_requested_class(fmt):
    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def check(data):
        k = data.draw(st.sampled_from(KINDS))
        b = data.draw(bits(fmt, kinds=(k,), sign=0))
        assert 0 <= b < fmt.sign_mask and kind(b, fmt) == k
    check()


def test_bits_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="denormal"):
        bits(sf.fp16, kinds=("denormal",))


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
def test_testfloat_bits_patterns(fmt):
    f = fmt.fraction_bits
    ones, top = (1 << f) - 1, (1 << fmt.exponent_bits) - 1
    seen = set()

    @settings(max_examples=400, deadline=None, derandomize=True, database=None)
    @given(testfloat_bits(fmt))
    def collect(b):
        assert 0 <= b < 1 << fmt.width
        e, m = b >> f & top, b & ones
        seen.add({0: "exponent 0", top: "exponent max", fmt.bias: "exponent bias"}.get(e))
        seen.add("significand 0" if m == 0 else "significand all ones" if m == ones else None)
        if m and m & (m - 1) == 0:
            seen.add("single one")
        if m >> (f - 2) == 3 and m & 1 == 0:
            seen.add("leading run")
        if m & 3 == 3 and m >> (f - 1) == 0:
            seen.add("trailing run")
    collect()
    assert seen >= {"exponent 0", "exponent max", "exponent bias", "significand 0",
                    "significand all ones", "single one", "leading run", "trailing run"}


# --- near_midpoint ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_near_midpoint_results_sit_on_or_next_to_a_midpoint(fmt, op):
    p = fmt.fraction_bits + 1
    seen = set()

    @SETTINGS
    @given(near_midpoint(fmt, op))
    def check(operands):
        assert all(kind(b, fmt) not in ("inf", "qnan", "snan") for b in operands)
        x = exact(op, operands, fmt)
        offset = midpoint_offset(x, fmt)
        assert abs(offset) <= Fraction(1, 2 ** (p - 2)), (operands, offset)
        assert abs(offset) != Fraction(1, 2)  # never exactly representable
        seen.add("on" if offset == 0 else "near")
    check()
    assert seen == {"on", "near"}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("where", ["on", "near"])
def test_near_midpoint_where(fmt, where):
    @SETTINGS
    @given(near_midpoint(fmt, "mul", where=(where,)))
    def check(operands):
        assert (midpoint_offset(exact("mul", operands, fmt), fmt) == 0) == (where == "on")
    check()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_near_midpoint_sqrt_is_next_to_a_midpoint(fmt):
    p = fmt.fraction_bits + 1

    @SETTINGS
    @given(near_midpoint(fmt, "sqrt"))
    def check(operands):
        (a,) = operands
        v = value(a, fmt)
        assert v > 0
        # the midpoint m nearest sqrt(v): compare squares, never take an inexact root
        root = Fraction(math.isqrt(int(v * 4**200)), 2**200)
        u = ulp_at(root, fmt)
        m = (int(root / u) + Fraction(1, 2)) * u
        m = min((m - u, m, m + u), key=lambda t: abs(t * t - v))
        epsilon = u / 2 ** (p - 2)
        assert (m - epsilon) ** 2 < v < (m + epsilon) ** 2 and v != m * m
    check()


def test_near_overflow_reaches_the_rne_threshold():
    # max finite + half an ulp, 65504 + 16 = 65520 for fp16, is where RNE starts to return inf
    found = find(near_overflow(sf.fp16, "add"), lambda ab: abs(exact("add", ab, sf.fp16)) == 65520,
                 settings=settings(database=None, max_examples=2000))
    assert abs(exact("add", found, sf.fp16)) == 65520


def test_near_midpoint_argument_errors():
    with pytest.raises(ValueError, match="fma"):
        near_midpoint(sf.fp16, "fma")
    with pytest.raises(ValueError, match="never exactly"):
        near_midpoint(sf.fp16, "sqrt", where=("on",))
    with pytest.raises(ValueError, match="where"):
        near_midpoint(sf.fp16, "add", where=("above",))


# --- near_overflow / near_underflow -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_near_overflow_pairs(fmt, op):
    max_value = value(fmt.max_finite, fmt)
    u = ulp_at(max_value, fmt)

    @SETTINGS
    @given(near_overflow(fmt, op))
    def check(operands):
        x = abs(exact(op, operands, fmt))
        assert max_value - 2 * u <= x <= max_value + 2 * u
    check()


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_near_underflow_pairs(fmt, op):
    min_normal = value(fmt.min_normal, fmt)

    @SETTINGS
    @given(near_underflow(fmt, op))
    def check(operands):
        x = abs(exact(op, operands, fmt))
        assert x <= min_normal * Fraction(9, 8)
    check()


def test_near_overflow_and_underflow_single_patterns():
    @SETTINGS
    @given(near_overflow(sf.fp16), near_underflow(sf.fp16))
    def check(big, small):
        assert 0x7BF0 <= big & 0x7FFF <= 0x7BFF
        small &= 0x7FFF
        assert small <= 0x10 or 0x03F0 <= small < 0x0410
    check()


# --- assertion helpers ---------------------------------------------------------------------------

def test_assert_bits_equal_passes_and_nan_modes():
    assert_bits_equal(np.float16([1.0, -0.0]), [0x3C00, 0x8000], sf.fp16)
    assert_bits_equal([0x7E00], [0xFE01], sf.fp16, nan="class")
    with pytest.raises(AssertionError, match="0x7c01"):
        assert_bits_equal([0x7C01], [0x7E00], sf.fp16, nan="class")  # signaling vs quiet
    with pytest.raises(AssertionError, match="0xfe01"):
        assert_bits_equal([0x7E00], [0xFE01], sf.fp16, nan="strict")
    assert_bits_equal([0x7C01], [0x7E00], sf.fp16, nan="any")
    with pytest.raises(AssertionError, match="shapes"):
        assert_bits_equal([1, 2], [1, 2, 3], sf.fp16)


def test_assert_bits_equal_message():
    actual = np.array([0x3C00, 0x3C01, 0x4000, 0x0000], dtype=np.uint16)
    expected = np.array([0x3C00, 0x3C00, 0x4000, 0x8000], dtype=np.uint16)
    with pytest.raises(AssertionError) as info:
        assert_bits_equal(actual, expected, sf.fp16, err_msg="my kernel")
    message = str(info.value)
    assert message.startswith("Bit patterns not equal (fp16): my kernel")
    assert "Mismatched elements: 2 / 4" in message
    assert "index (1,): actual   0x3c01 = 1.0009765625 [0 01111 0000000001] normal" in message
    assert "expected 0x3c00 = 1.0 [0 01111 0000000000] normal" in message
    assert "ulp distance 1" in message
    assert "index (3,): actual   0x0000 = 0.0" in message and "expected 0x8000 = -0.0" in message
    assert "ulp distance 0" in message


def test_assert_bits_equal_truncates_long_reports():
    with pytest.raises(AssertionError) as info:
        assert_bits_equal(np.arange(100), np.arange(100) + 1, sf.bf16, max_rows=3)
    text = str(info.value)
    assert text.count("ulp distance 1") == 3 and "... and 97 more" in text


def test_assert_within_ulp():
    f = sf.fp16
    assert_within_ulp([0x3C02, 0x7C00, 0x8000, 0x7E00], [0x3C00, 0x7BFF, 0x0000, 0x7E00], f, ulp=2)
    assert_within_ulp([0x8000], [0x0000], f, ulp=0)
    with pytest.raises(AssertionError) as info:
        assert_within_ulp([0x3C00, 0x3C05], [0x3C00, 0x3C01], f, ulp=3)
    message = str(info.value)
    assert message.startswith("Not within 3 ulp (fp16)")
    assert "0x3c05" in message and "0x3c01" in message and "ulp distance 4" in message
    with pytest.raises(AssertionError, match="n/a"):
        assert_within_ulp([0x7E00], [0x7BFF], f, ulp=5)
    with pytest.raises(ValueError):
        assert_within_ulp([0], [0], f, ulp=-1)


# --- import hygiene and the pytest plugin --------------------------------------------------------

def _python(code: str) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_importing_softfloat16_needs_neither_pytest_nor_hypothesis():
    run = _python("import sys, softfloat16, softfloat16.compare;"
                  "print('pytest' in sys.modules, 'hypothesis' in sys.modules);"
                  "import softfloat16.testing; print('pytest' in sys.modules)")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "False", "False"]


def test_pytest_plugin_fixtures(tmp_path):
    test_file = tmp_path / "test_user.py"
    test_file.write_text(textwrap.dedent("""
        import softfloat16 as sf

        def test_fixtures(sf_format, sf_rounding):
            assert sf_format in (sf.fp16, sf.bf16, sf.fp32) and sf_rounding in sf.ROUNDING_NAMES
    """))
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "softfloat16.testing", "-q",
                          "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "18 passed" in run.stdout


@given(st.data())
@settings(max_examples=30, deadline=None)
def test_strategies_compose_with_the_core(data):
    # the documented use: draw hard operands, compare the core with itself under a symmetry
    a, b = data.draw(near_midpoint(sf.fp16, "add"))
    assert_bits_equal(sf.fp16.add(a, b), sf.fp16.add(b, a), sf.fp16)
