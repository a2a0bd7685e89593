"""softfloat16.testing: strategies checked with exact rationals, assertion messages, the plugin."""
import functools
import math
import os
import re
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings, strategies as st

import softfloat16 as sf
from softfloat16.testing import (
    assert_bits_equal, assert_within_ulp, bits, kinds_of, near_midpoint, near_overflow,
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
    every_kind = ("zero", "subnormal", "normal", "max_finite", "inf", "qnan", "snan")
    assert seen == {(k, s) for k in every_kind for s in (0, 1)}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_bits_draws_only_the_requested_class(fmt):
    @settings(max_examples=300, deadline=None)
    @given(st.data())
    def check(data):
        k = data.draw(st.sampled_from(kinds_of(fmt) + ("nan",)))
        b = data.draw(bits(fmt, kinds=(k,), sign=0))
        assert 0 <= b < fmt.sign_mask and kind(b, fmt) in ({"qnan", "snan"} if k == "nan" else {k})
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


# --- FP8, FP6, FP4, E8M0, TF32: every strategy and helper, judged by ml_dtypes and Fractions -----
# Oracle: ml_dtypes decodes every pattern (float32 for TF32 in FP32 layout); widths and fraction
# bits are written out here, not read from the package's Format.

ML_FORMATS = {  # name: (ml_dtypes dtype, pattern width, fraction bits)
    "fp8_e5m2": ("float8_e5m2", 8, 2), "fp8_e4m3fn": ("float8_e4m3fn", 8, 3),
    "fp8_e4m3fnuz": ("float8_e4m3fnuz", 8, 3), "fp8_e5m2fnuz": ("float8_e5m2fnuz", 8, 2),
    "fp6_e2m3": ("float6_e2m3fn", 6, 3), "fp6_e3m2": ("float6_e3m2fn", 6, 2),
    "fp4_e2m1": ("float4_e2m1fn", 4, 1), "e8m0": ("float8_e8m0fnu", 8, 0),
    "tf32_fp32": ("float32", 32, 10),
}
NEW = [sf.format(name) for name in ML_FORMATS]
ARITHMETIC = [f for f in NEW if f.name != "e8m0"]  # E8M0 has no arithmetic, so no operands to build


def ml_dtype(name: str):
    import ml_dtypes
    return np.dtype(np.float32) if name == "tf32_fp32" else np.dtype(getattr(ml_dtypes, ML_FORMATS[name][0]))


def ml_value(b: int, name: str) -> float:
    dtype_name, width, _ = ML_FORMATS[name]
    assert 0 <= b < 1 << width, f"{b:#x} is not a {width}-bit pattern"
    if name == "tf32_fp32":
        assert b & 0x1FFF == 0, f"{b:#x}: TF32 in FP32 layout has its low 13 bits zero"
        with np.errstate(invalid="ignore"):
            return float(np.array([b], np.uint32).view(np.float32)[0])
    return float(np.array([b], np.uint8).view(ml_dtype(name))[0])


class _Tf32Info:  # TF32: float32's exponent range, 10 fraction bits
    max, smallest_normal, smallest_subnormal = (2 - 2.0**-10) * 2.0**127, 2.0**-126, 2.0**-136


def ml_info(name: str):
    import ml_dtypes
    return _Tf32Info if name == "tf32_fp32" else ml_dtypes.finfo(ml_dtype(name))


def ml_kind(b: int, name: str) -> str:
    """The kind of a pattern as ``bits`` names them, from ml_dtypes' value."""
    v, info = ml_value(b, name), ml_info(name)
    if math.isnan(v):
        if name in ("fp8_e5m2", "tf32_fp32"):  # IEEE: the top fraction bit says quiet
            return "qnan" if b & {"fp8_e5m2": 1 << 1, "tf32_fp32": 1 << 22}[name] else "snan"
        return "nan"
    if math.isinf(v):
        return "inf"
    if v == 0:
        return "zero"
    if abs(v) == float(info.max):
        return "max_finite"
    return "subnormal" if abs(v) < float(info.smallest_normal) else "normal"


def collect(strategy, n: int = 200) -> list:
    drawn = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(x):
        drawn.append(x)
    run()
    return drawn


def sign_of(b: int, name: str) -> int:
    return 0 if name == "e8m0" else b >> (ML_FORMATS[name][1] - 1)


@pytest.mark.parametrize("fmt", NEW, ids=lambda f: f.name)
def test_bits_draws_each_kind_of_the_new_formats_and_only_that(fmt):
    info = ml_info(fmt.name)
    extras = ("min_normal",) if fmt.name == "e8m0" else ("min_subnormal", "min_normal")
    for k in kinds_of(fmt) + extras:
        for b in collect(bits(fmt, kinds=(k,)), 60):
            got = ml_kind(b, fmt.name)  # also checks the pattern is one of the format's
            if k == "min_subnormal":
                assert abs(ml_value(b, fmt.name)) == float(info.smallest_subnormal), hex(b)
            elif k == "min_normal":
                assert abs(ml_value(b, fmt.name)) == float(info.smallest_normal), hex(b)
            else:
                assert got == k, (k, hex(b), got)


@pytest.mark.parametrize("fmt", NEW, ids=lambda f: f.name)
def test_bits_default_draws_every_kind_and_sign_the_format_has(fmt):
    drawn = collect(bits(fmt), 600)
    seen = {(ml_kind(b, fmt.name), sign_of(b, fmt.name)) for b in drawn}
    # every (kind, sign) the format has, from ml_dtypes' own values
    _, width, _ = ML_FORMATS[fmt.name]
    every = range(1 << width) if width <= 8 else [int(x) << 13 for x in range(1 << 19)]
    possible = {(ml_kind(b, fmt.name), sign_of(b, fmt.name)) for b in every}
    assert seen == possible
    if fmt.name in ("fp8_e4m3fnuz", "fp8_e5m2fnuz"):
        assert ("zero", 1) not in seen and all(b != 0x80 or ml_kind(b, fmt.name) == "nan" for b in drawn)


@pytest.mark.parametrize("fmt, kinds, sign, message", [
    (sf.fp8_e4m3fn, ("inf",), None, "fp8_e4m3fn (fn encoding) has no infinity"),
    (sf.fp8_e4m3fn, ("snan",), None, "no quiet/signaling NaNs, only kind 'nan'"),
    (sf.fp8_e4m3fnuz, ("qnan",), None, "no quiet/signaling NaNs"),
    (sf.fp8_e4m3fnuz, ("zero",), 1, "has no -0"),
    (sf.fp6_e2m3, ("nan",), None, "fp6_e2m3 (finite encoding) has no NaN"),
    (sf.fp4_e2m1, ("inf", "normal"), None, "has no infinity"),
    (sf.e8m0, ("zero",), None, "no zero and no subnormals"),
    (sf.e8m0, ("subnormal",), None, "no zero and no subnormals"),
    (sf.e8m0, ("normal",), 1, "unsigned"),
    (sf.fp16, ("normal",), 2, "sign"),
])
def test_bits_refuses_kinds_the_format_lacks(fmt, kinds, sign, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bits(fmt, kinds=kinds, sign=sign)


@pytest.mark.parametrize("fmt", NEW, ids=lambda f: f.name)
def test_testfloat_bits_are_patterns_of_the_format(fmt):
    _, width, fbits = ML_FORMATS[fmt.name]
    shift = 13 if fmt.name == "tf32_fp32" else 0
    drawn = collect(testfloat_bits(fmt), 300)
    for b in drawn:
        ml_kind(b, fmt.name)  # asserts the width (and TF32's zero low bits)
    exponents = {(b >> (shift + fbits)) & ((1 << (width - shift - fbits - (fmt.name != "e8m0"))) - 1) for b in drawn}
    assert 0 in exponents and max(exponents) == (1 << (width - shift - fbits - (fmt.name != "e8m0"))) - 1
    assert {sign_of(b, fmt.name) for b in drawn} == ({0} if fmt.name == "e8m0" else {0, 1})


# Exact values and the spacing of values, from the sorted table of ml_dtypes' values.

def ml_positive_values(name: str) -> list[Fraction]:
    _, width, _ = ML_FORMATS[name]
    if name == "tf32_fp32":
        raise AssertionError("not tabulated")
    values = {Fraction(v) for v in (ml_value(b, name) for b in range(1 << width)) if math.isfinite(v) and v > 0}
    ordered = sorted(values)
    # the grid of rounding with an unbounded exponent continues at the top spacing to the end of
    # max finite's binade (E4M3FN: 448, then 480 and 512, where no pattern exists)
    spacing, binade_end = ordered[-1] - ordered[-2], Fraction(2) ** (math.floor(math.log2(ordered[-1])) + 1)
    while ordered[-1] < binade_end:
        ordered.append(ordered[-1] + spacing)
    return ordered


def ml_exact(name: str, b: int) -> Fraction:
    v = ml_value(b, name)
    assert math.isfinite(v), f"{b:#x} is not finite"
    return Fraction(v)


def bracket(x: Fraction, name: str) -> tuple[Fraction, Fraction]:
    """Consecutive values lo <= |x| < hi of the format (0 below the smallest subnormal)."""
    if name == "tf32_fp32":  # an IEEE binary format with p = 11, emin = -126
        e = max(math.floor(math.log2(abs(x))) if x else -126, -126)
        while Fraction(2) ** e > abs(x) and e > -126:
            e -= 1
        while Fraction(2) ** (e + 1) <= abs(x):
            e += 1
        u = Fraction(2) ** (e - 10)
        lo = (abs(x) // u) * u
        return lo, lo + u
    table = [Fraction(0)] + ml_positive_values(name)
    import bisect
    i = bisect.bisect_right(table, abs(x)) - 1
    return table[i], table[i + 1]


def offset_from_midpoint(x: Fraction, name: str) -> Fraction:
    lo, hi = bracket(x, name)
    return (abs(x) - lo) / (hi - lo) - Fraction(1, 2)


def exact_result(op: str, operands, name: str) -> Fraction:
    v = [ml_exact(name, b) for b in operands]
    return {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1], "mul": lambda: v[0] * v[1],
            "div": lambda: v[0] / v[1]}[op]()


@pytest.mark.parametrize("fmt", ARITHMETIC, ids=lambda f: f.name)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_near_midpoint_in_the_new_formats(fmt, op):
    p = ML_FORMATS[fmt.name][2] + 1
    for where in ("on", "near"):
        for operands in collect(near_midpoint(fmt, op, where=(where,)), 40):
            x = exact_result(op, operands, fmt.name)
            offset = offset_from_midpoint(x, fmt.name)
            assert abs(offset) <= Fraction(1, 2 ** (p - 2)) and abs(offset) != Fraction(1, 2), (operands, offset)
            assert (offset == 0) == (where == "on"), (where, [hex(b) for b in operands], offset)


@pytest.mark.parametrize("fmt", ARITHMETIC, ids=lambda f: f.name)
def test_near_midpoint_sqrt_in_the_new_formats(fmt):
    p = ML_FORMATS[fmt.name][2] + 1
    for (a,) in collect(near_midpoint(fmt, "sqrt", where=("near",)), 40):
        v = ml_exact(fmt.name, a)
        assert v > 0
        root = Fraction(math.isqrt(int(v * 4**200)), 2**200)  # within 2^-200 below sqrt(v)
        lo, hi = bracket(root, fmt.name)
        m = (lo + hi) / 2
        epsilon = (hi - lo) / 2 ** (p - 2)
        assert (m - epsilon) ** 2 < v < (m + epsilon) ** 2 and v != m * m, hex(a)


@pytest.mark.parametrize("fmt", ARITHMETIC, ids=lambda f: f.name)
def test_near_overflow_and_underflow_in_the_new_formats(fmt):
    name = fmt.name
    info = ml_info(name)
    biggest, smallest_normal = Fraction(float(info.max)), Fraction(float(info.smallest_normal))
    lo, hi = bracket(biggest, name)
    top_spacing = hi - lo
    for b in collect(near_overflow(fmt), 40):
        assert ml_kind(b, name) in ("normal", "max_finite")
        assert abs(ml_exact(name, b)) >= biggest - 16 * top_spacing
    for b in collect(near_underflow(fmt), 40):
        assert ml_kind(b, name) in ("zero", "subnormal", "normal")
        assert abs(ml_exact(name, b)) <= 2 * smallest_normal
    for op in ("add", "sub", "mul", "div"):
        for operands in collect(near_overflow(fmt, op), 20):
            assert biggest - 2 * top_spacing <= abs(exact_result(op, operands, name)) <= biggest + 2 * top_spacing
        for operands in collect(near_underflow(fmt, op), 20):
            assert abs(exact_result(op, operands, name)) <= smallest_normal * Fraction(9, 8)


def test_the_constructing_strategies_refuse_e8m0():
    for make in (lambda: near_midpoint(sf.e8m0, "mul"), lambda: near_overflow(sf.e8m0, "add"),
                 lambda: near_underflow(sf.e8m0, "div")):
        with pytest.raises(ValueError, match="e8m0 is a scale format without arithmetic"):
            make()
    assert {ml_kind(b, "e8m0") for b in collect(near_underflow(sf.e8m0), 50)} == {"normal"}


def test_assertion_helpers_in_the_new_formats():
    import ml_dtypes
    # float arrays of the format's ml_dtypes type are read as their bits
    assert_bits_equal(np.array([448.0, -0.0], ml_dtypes.float8_e4m3fn), [0x7E, 0x80], sf.fp8_e4m3fn)
    assert_bits_equal([0x7F], [0xFF], sf.fp8_e4m3fn)  # the two NaNs: one class
    with pytest.raises(AssertionError, match="0xff = nan"):
        assert_bits_equal([0x7F], [0xFF], sf.fp8_e4m3fn, nan="strict")
    with pytest.raises(AssertionError) as info:  # FNUZ: 0x80 is the NaN, not -0
        assert_bits_equal([0x80], [0x00], sf.fp8_e4m3fnuz)
    assert "actual   0x80 = nan [1 0000 000] nan" in str(info.value)
    with pytest.raises(AssertionError, match="ulp distance 0"):  # FP4 has -0: 0 ulp, but other bits
        assert_bits_equal([0x8], [0x0], sf.fp4_e2m1)
    assert_within_ulp([0x8, 0x7], [0x0, 0x6], sf.fp4_e2m1, ulp=1)
    assert_within_ulp([0x3F802000], [0x3F800000], sf.tf32_fp32, ulp=1)
    with pytest.raises(AssertionError, match="ulp distance 2"):
        assert_within_ulp([0x3F804000], [0x3F800000], sf.tf32_fp32, ulp=1)
    with pytest.raises(AssertionError, match=r"\[11111110\]"):
        assert_within_ulp([0x80, 0xFE], [0x81, 0xFF], sf.e8m0, ulp=1)
    with pytest.raises(ValueError, match="6-bit"):
        assert_bits_equal([0x40], [0x00], sf.fp6_e3m2)


# --- near_midpoint(fmt, "convert"): FP32 inputs on or next to the midpoints of the destination -----
# Oracle: the sorted values of the destination, decoded by numpy / ml_dtypes (TF32: float32 patterns
# with 13 zero low bits), continued past max finite by one ulp of its binade (p written out below);
# the FP32 inputs decoded by numpy. The strategy's own Format arithmetic is not used.

CONVERT_DESTINATIONS = {  # name: (numpy dtype name, or "tf32"; pattern width; fraction bits)
    "fp16": ("float16", 16, 10), "bf16": ("bfloat16", 16, 7), "tf32_fp32": ("tf32", 32, 10),
    **{name: (dtype, width, fraction) for name, (dtype, width, fraction) in ML_FORMATS.items() if name != "tf32_fp32"},
}


@functools.cache
def destination_grid(name: str) -> np.ndarray:
    """Every finite value >= 0 of the format, sorted, then the next value of an unbounded exponent."""
    _, width, fraction = CONVERT_DESTINATIONS[name]
    count = 1 << 19 if name == "tf32_fp32" else 1 << width
    values = destination_values(name, np.arange(count) << (13 if name == "tf32_fp32" else 0))
    values = np.unique(np.abs(values[np.isfinite(values)]))
    top = float(values[-1])
    return np.append(values, top + 2.0 ** (math.floor(math.log2(top)) - fraction))


def destination_values(name: str, patterns) -> np.ndarray:
    """The values (float64) of patterns of the destination format."""
    import ml_dtypes
    dtype_name, width, _ = CONVERT_DESTINATIONS[name]
    if dtype_name == "tf32":
        stored, dtype = np.asarray(patterns, np.uint32), np.dtype(np.float32)
    else:
        dtype = np.dtype(np.float16) if dtype_name == "float16" else np.dtype(getattr(ml_dtypes, dtype_name))
        stored = np.asarray(patterns, np.uint16 if width == 16 else np.uint8)
    with np.errstate(invalid="ignore"):  # signaling NaNs
        return stored.view(dtype).astype(np.float64)


def fp32_value(b: int) -> Fraction:
    assert 0 <= b < 1 << 32, f"{b:#x} is not an FP32 pattern"
    v = float(np.array([b], np.uint32).view(np.float32)[0])
    assert math.isfinite(v), f"{b:#x} is not finite"
    return Fraction(v)


@pytest.mark.parametrize("name", list(CONVERT_DESTINATIONS))
def test_near_midpoint_convert_gives_fp32_values_at_the_midpoints(name):
    fmt = sf.format(name)
    grid = destination_grid(name)
    p = CONVERT_DESTINATIONS[name][2] + 1
    seen = set()
    for where in ("on", "near"):
        drawn = [a for (a,) in collect(near_midpoint(fmt, "convert", where=(where,)), 80)]
        converted = destination_values(name, sf.convert(np.array(drawn, np.uint32), src=sf.fp32, dst=fmt))
        for a, result in zip(drawn, converted):
            x = fp32_value(a)
            i = int(np.searchsorted(grid, float(abs(x)), side="right")) - 1
            lo, hi = Fraction(grid[i]), Fraction(grid[i + 1])
            midpoint = (lo + hi) / 2
            offset = (abs(x) - lo) / (hi - lo) - Fraction(1, 2)  # in ulps of the destination
            if where == "on":
                assert offset == 0, (hex(a), offset)
            else:
                assert 0 < abs(offset) < Fraction(2) ** (2 - p), (hex(a), offset)
                # at most 3 ulps of FP32 from the midpoint, itself an FP32 value
                assert Fraction(float(np.float32(midpoint))) == midpoint
                assert abs(abs(x) - midpoint) <= 3 * Fraction(float(np.spacing(np.float32(midpoint)))), hex(a)
            seen.add(("negative" if a >> 31 else "positive", where, "subnormal" if hi <= grid[1] * 2 ** (p - 1)
                      else "normal"))
            if hi > grid[-2]:  # above max finite: the overflow value, not a neighbour
                seen.add("overflow threshold")
                continue
            assert math.isfinite(result), (hex(a), result)
            value = abs(Fraction(result))
            assert value in (lo, hi), (hex(a), result)
            direction = "up" if value == hi else "down"
            if offset:  # round to nearest: the side of the midpoint the input lies on
                assert direction == ("up" if offset > 0 else "down"), (hex(a), offset, direction)
            seen.add(direction)
    assert {"up", "down"} <= seen  # conversions of the draws round both ways
    signs = {"positive", "negative"} if name != "e8m0" else {"positive"}
    assert {s[0] for s in seen if isinstance(s, tuple)} == signs
    assert {s[1] for s in seen if isinstance(s, tuple)} == {"on", "near"}
    if name != "e8m0":  # E8M0 has no subnormals
        assert {s[2] for s in seen if isinstance(s, tuple)} == {"subnormal", "normal"}


def test_near_midpoint_convert_reaches_the_extremes():
    # the midpoint between 0 and the smallest subnormal, and max finite + half an ulp
    on = near_midpoint(sf.fp16, "convert", where=("on",))
    for target in (Fraction(2) ** -25, Fraction(65520)):
        found = find(on, lambda t, target=target: abs(fp32_value(t[0])) == target,
                     settings=settings(database=None, max_examples=5000))
        assert abs(fp32_value(found[0])) == target


def test_near_midpoint_convert_from_another_source():
    for (a,) in collect(near_midpoint(sf.fp8_e4m3fn, "convert", src=sf.fp16), 60):
        x = Fraction(float(np.array([a], np.uint16).view(np.float16)[0]))  # an FP16 pattern
        grid = destination_grid("fp8_e4m3fn")
        i = int(np.searchsorted(grid, float(abs(x)), side="right")) - 1
        lo, hi = Fraction(grid[i]), Fraction(grid[i + 1])
        assert abs((abs(x) - lo) / (hi - lo) - Fraction(1, 2)) < Fraction(1, 4), hex(a)


@pytest.mark.parametrize("args, message", [
    ((sf.fp32, "convert"), "at least 48 bits of precision .no format of softfloat16 is that wide"),
    ((sf.fp16, "convert", ("on",), sf.bf16), "at least 22 bits of precision; bf16 has 8"),
    ((sf.e8m0, "convert", ("on",), sf.fp16), "max finite \\+ half an ulp, beyond fp16's"),
    ((sf.fp16, "add", ("on",), sf.fp32), "only a conversion has a source format"),
    ((sf.e8m0, "mul"), "e8m0 is a scale format without arithmetic"),
])
def test_near_midpoint_convert_refuses_what_cannot_be_built(args, message):
    with pytest.raises(ValueError, match=message):
        near_midpoint(*args)


# --- a failing example shows the pattern it drew ------------------------------------------------------

@pytest.mark.parametrize("make", [testfloat_bits, bits, near_overflow, near_underflow],
                         ids=lambda f: f.__name__)
def test_a_failing_example_prints_the_pattern(make):
    @settings(database=None, derandomize=True, max_examples=300, suppress_health_check=list(HealthCheck))
    @given(make(sf.bf16))
    def check(b):
        assert b < 0x8000  # fails for every negative pattern

    with pytest.raises(AssertionError) as info:
        check()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert re.search(r"\bb=\d+,", notes), notes  # the integer itself, not the call that built it
    assert "lambda" not in notes, notes


# --- IEEE P3109: every strategy, judged by gfloat's decoder ---------------------------------------------
# Oracle: gfloat decodes every code of a P3109 format and names its class; the format is handed to it as
# (K, P, signedness, domain) read from the name here. Exact values and the value grid come from gfloat's
# floats, continued past max finite at the top binade's spacing (the rounding grid of an unbounded exponent).

P3109_SAMPLE = [
    *(f"p3109_k8p{p}s{d}" for p in range(1, 8) for d in "ef"),
    *(f"p3109_k8p{p}u{d}" for p in range(1, 9) for d in "ef"),
    "p3109_k3p1se", "p3109_k3p2se", "p3109_k3p1uf", "p3109_k3p3ue", "p3109_k4p1sf", "p3109_k4p2se", "p3109_k4p4uf",
    "p3109_k5p1ue", "p3109_k5p2uf", "p3109_k6p1se", "p3109_k6p3sf", "p3109_k7p4ue", "p3109_k7p6se",
]
# formats for the constructing strategies: precision 1 to 6, signed and unsigned, both domains, K = 4 to 8
P3109_ARITHMETIC = ["p3109_k8p1se", "p3109_k8p1uf", "p3109_k8p2ue", "p3109_k8p3se", "p3109_k8p4sf", "p3109_k8p5ue",
                    "p3109_k8p6se", "p3109_k6p1sf", "p3109_k6p3ue", "p3109_k5p2se", "p3109_k4p2se", "p3109_k4p1uf"]


@functools.cache
def gfloat_codes(name: str) -> tuple:
    """(width, [(class, value float) of every code]) from gfloat."""
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, FloatClass, Signedness
    k, p, s, d = re.fullmatch(r"p3109_k(\d)p(\d)([su])([ef])", name).groups()
    info = format_info_p3109(int(k), int(p), Signedness.Signed if s == "s" else Signedness.Unsigned,
                             Domain.Extended if d == "e" else Domain.Finite)
    names = {FloatClass.ZERO: "zero", FloatClass.SUBNORMAL: "subnormal", FloatClass.NORMAL: "normal",
             FloatClass.INFINITE: "inf", FloatClass.NAN: "nan"}
    decoded = [gfloat.decode_float(info, code) for code in range(1 << int(k))]
    return int(k), [(names[x.fclass], float(x.fval)) for x in decoded]


def p3109_kind(b: int, name: str) -> str:
    """The kind of a pattern as ``bits`` names them, from gfloat (which also checks the width)."""
    width, codes = gfloat_codes(name)
    assert 0 <= b < 1 << width, f"{b:#x} is not a {width}-bit pattern"
    kind, v = codes[b]
    biggest = max(abs(x) for _, x in codes if math.isfinite(x))
    return "max_finite" if kind in ("normal", "subnormal") and abs(v) == biggest else kind


def p3109_value(b: int, name: str) -> Fraction:
    v = gfloat_codes(name)[1][b][1]
    assert math.isfinite(v), f"{b:#x} is not finite"
    return Fraction(v)


@functools.cache
def p3109_grid(name: str) -> list:
    """0 and the positive values, continued to the end of max finite's binade at its spacing."""
    p = int(re.search(r"p(\d)[su]", name).group(1))
    grid = sorted({Fraction(v) for _, v in gfloat_codes(name)[1] if math.isfinite(v) and v >= 0})
    e = math.floor(math.log2(grid[-1]))
    while grid[-1] < Fraction(2) ** (e + 1):
        grid.append(grid[-1] + Fraction(2) ** (e - p + 1))
    return grid


def p3109_offset(x: Fraction, name: str) -> Fraction:
    """Signed distance of |x| from the midpoint of its two neighbours, in their ulps."""
    import bisect
    grid = p3109_grid(name)
    i = bisect.bisect_right(grid, abs(x)) - 1
    return (abs(x) - grid[i]) / (grid[i + 1] - grid[i]) - Fraction(1, 2)


@pytest.mark.parametrize("name", P3109_SAMPLE)
def test_bits_draws_each_kind_of_p3109_formats_and_only_that(name):
    fmt = sf.format(name)
    codes = gfloat_codes(name)[1]
    positive = [abs(v) for kind, v in codes if kind in ("normal", "subnormal")]
    normal = [abs(v) for kind, v in codes if kind == "normal"]
    wanted = {"inf": fmt.infinities, "nan": True, "subnormal": fmt.precision > 1}
    assert {k for k in wanted if k in kinds_of(fmt)} == {k for k, present in wanted.items() if present}
    extras = ("min_normal", "min_subnormal") if fmt.precision > 1 else ("min_normal",)
    for k in kinds_of(fmt) + extras:
        for b in collect(bits(fmt, kinds=(k,)), 20):
            got = p3109_kind(b, name)
            if k == "min_subnormal":
                assert abs(codes[b][1]) == min(positive), hex(b)
            elif k == "min_normal":
                assert abs(codes[b][1]) == min(normal), hex(b)
            else:
                assert got == k, (k, hex(b), got)
    with pytest.raises(ValueError, match="no -0|unsigned"):
        bits(fmt, kinds=("zero",), sign=1)
    for k, message in (("qnan", "only kind 'nan'"), ("inf", "no infinity"), ("subnormal", "precision 1")):
        if k not in kinds_of(fmt):
            with pytest.raises(ValueError, match=message):
                bits(fmt, kinds=(k,))


@pytest.mark.parametrize("name", ["p3109_k8p3se", "p3109_k8p1sf", "p3109_k8p4ue", "p3109_k8p8uf", "p3109_k3p1se",
                                  "p3109_k6p5sf"])
def test_bits_default_draws_every_kind_and_sign_of_p3109_formats(name):
    fmt = sf.format(name)
    width = gfloat_codes(name)[0]

    def key(b):
        return p3109_kind(b, name), b >> (width - 1) if fmt.signed and p3109_kind(b, name) != "nan" else 0
    drawn = collect(bits(fmt), 400)
    assert {key(b) for b in drawn} == {key(b) for b in range(1 << width)}  # no -0: its code is the NaN


@pytest.mark.parametrize("name", P3109_SAMPLE)
def test_testfloat_and_range_patterns_of_p3109_formats(name):
    fmt = sf.format(name)
    width = gfloat_codes(name)[0]
    drawn = collect(testfloat_bits(fmt), 100)
    fields = {b >> fmt.fraction_bits & ((1 << fmt.exponent_bits) - 1) for b in drawn}
    assert 0 in fields and (1 << fmt.exponent_bits) - 1 in fields
    assert all(0 <= b < 1 << width for b in drawn)
    if fmt.signed:
        assert {b >> (width - 1) for b in drawn} == {0, 1}
    biggest = max(abs(v) for _, v in gfloat_codes(name)[1] if math.isfinite(v))
    for b in collect(near_overflow(fmt), 30):
        assert p3109_kind(b, name) in ("normal", "max_finite") and abs(p3109_value(b, name)) <= biggest
    smallest_normal = min(abs(v) for kind, v in gfloat_codes(name)[1] if kind == "normal")
    for b in collect(near_underflow(fmt), 30):
        assert p3109_kind(b, name) in ("zero", "subnormal", "normal", "max_finite")
        assert abs(p3109_value(b, name)) <= 2 * smallest_normal


def p3109_exact(op: str, operands, name: str) -> Fraction:
    v = [p3109_value(b, name) for b in operands]
    return {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1], "mul": lambda: v[0] * v[1],
            "div": lambda: v[0] / v[1]}[op]()


@pytest.mark.parametrize("name", P3109_ARITHMETIC)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_near_midpoint_in_p3109_formats(name, op):
    fmt = sf.format(name)
    p = fmt.precision
    for where in ("on", "near"):
        if p == 1 and op in ("mul", "div") and where == "near":  # products of powers of two: exact or on one
            with pytest.raises(ValueError, match="precision 1"):
                near_midpoint(fmt, op, where=(where,))
            continue
        try:
            strategy = near_midpoint(fmt, op, where=(where,))
        except ValueError as error:  # only where the format has too few exponents (or codes) for any case
            assert (name, op, where) in (("p3109_k8p6se", "add", "near"), ("p3109_k8p6se", "sub", "near")), error
            assert "too few exponents" in str(error) and "\n" not in str(error)
            continue
        for operands in collect(strategy, 25):
            assert all(p3109_kind(b, name) not in ("inf", "nan") for b in operands)
            offset = p3109_offset(p3109_exact(op, operands, name), name)
            assert abs(offset) <= Fraction(2) ** (2 - p) and abs(offset) != Fraction(1, 2), (operands, offset)
            assert (offset == 0) == (where == "on"), (where, [hex(b) for b in operands], offset)


@pytest.mark.parametrize("name", P3109_ARITHMETIC)
def test_near_midpoint_sqrt_and_convert_in_p3109_formats(name):
    fmt = sf.format(name)
    p = fmt.precision
    for (a,) in collect(near_midpoint(fmt, "sqrt", where=("near",)), 25):
        v = p3109_value(a, name)
        root = Fraction(math.isqrt(int(v * 4**200)), 2**200)
        import bisect
        grid = p3109_grid(name)
        i = bisect.bisect_right(grid, root) - 1
        lo, hi = grid[i], grid[i + 1]
        m, epsilon = (lo + hi) / 2, (hi - lo) * Fraction(2) ** (2 - p)
        assert v > 0 and (m - epsilon) ** 2 < v < (m + epsilon) ** 2 and v != m * m, hex(a)
    for where in ("on", "near"):
        for (a,) in collect(near_midpoint(fmt, "convert", where=(where,)), 25):
            offset = p3109_offset(fp32_value(a), name)
            assert (offset == 0) if where == "on" else 0 < abs(offset) < Fraction(2) ** (2 - p), (hex(a), offset)
            assert fmt.signed or a >> 31 == 0


@pytest.mark.parametrize("name", P3109_ARITHMETIC)
def test_near_overflow_and_underflow_pairs_in_p3109_formats(name):
    fmt = sf.format(name)
    codes = gfloat_codes(name)[1]
    biggest = max(abs(Fraction(v)) for _, v in codes if math.isfinite(v))
    top_spacing = Fraction(2) ** (math.floor(math.log2(biggest)) - fmt.precision + 1)
    smallest_normal = min(abs(Fraction(v)) for kind, v in codes if kind == "normal")
    for op in ("add", "sub", "mul", "div"):
        for operands in collect(near_overflow(fmt, op), 20):
            x = p3109_exact(op, operands, name)
            assert biggest - 2 * top_spacing <= abs(x) <= biggest + 2 * top_spacing, ([hex(b) for b in operands], x)
            assert fmt.signed or x >= 0
        for operands in collect(near_underflow(fmt, op), 20):
            x = p3109_exact(op, operands, name)
            assert abs(x) <= smallest_normal * (Fraction(9, 8) if fmt.precision > 1 else 2), (operands, x)
            assert fmt.signed or x >= 0


def test_assertion_helpers_in_p3109_formats():
    f, u = sf.format("p3109_k8p3se"), sf.format("p3109_k8p1ue")
    assert_bits_equal([0x80, 0x7F], [0x80, 0x7F], f)
    with pytest.raises(AssertionError, match=r"actual   0x80 = nan \[1 00000 00\] nan"):  # the NaN is not -0
        assert_bits_equal([0x80], [0x00], f)
    assert_within_ulp([0x7F, 0xFE], [0x7E, 0xFD], f, ulp=1)  # inf is one past max finite
    assert_within_ulp([0xFE, 0x01], [0xFD, 0x00], u, ulp=1)
    with pytest.raises(AssertionError, match="ulp distance n/a"):
        assert_within_ulp([0xFF], [0xFE], u, ulp=5)
