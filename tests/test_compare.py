"""softfloat16.compare against oracles written here: a plain decoder and a sorted table of values."""
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.compare import (
    NAN_DISTANCE, classify, describe, diff_report, exact_decimal, mismatch_mask, ulp_distance,
)


def decode(bits: int, ebits: int, fbits: int):
    """(sign, value) of one pattern: value a Fraction, 'inf' or 'nan'. Written from the IEEE
    754 definition, independently of the package."""
    sign = bits >> (ebits + fbits)
    e = (bits >> fbits) & ((1 << ebits) - 1)
    f = bits & ((1 << fbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if e == (1 << ebits) - 1:
        return sign, ("inf" if f == 0 else "nan")
    if e == 0:
        value = Fraction(f, 1 << fbits) * Fraction(2) ** (1 - bias)
    else:
        value = (1 + Fraction(f, 1 << fbits)) * Fraction(2) ** (e - bias)
    return sign, -value if sign else value


def ranks(fmt) -> tuple[np.ndarray, np.ndarray]:
    """Rank of every pattern's value among the distinct non-NaN values (+0 == -0, inf last)."""
    n = 1 << fmt.width
    keyed = {}
    for b in range(n):
        sign, v = decode(b, fmt.exponent_bits, fmt.fraction_bits)
        if v == "nan":
            continue
        keyed[b] = Fraction(10**60) * (-1 if sign else 1) if v == "inf" else v
    order = sorted(set(keyed.values()))
    position = {v: i for i, v in enumerate(order)}
    rank = np.full(n, -1, dtype=np.int64)
    for b, v in keyed.items():
        rank[b] = position[v]
    return rank, rank < 0


@pytest.mark.parametrize("fmt", [sf.fp8_e5m2, sf.fp16], ids=lambda f: f.name)
def test_ulp_distance_counts_values_between(fmt):
    rank, is_nan = ranks(fmt)
    rng = np.random.default_rng(0)
    n = 1 << fmt.width
    a = rng.integers(0, n, 20000)
    b = np.where(rng.random(20000) < 0.5, (a + rng.integers(-3, 4, 20000)) % n, rng.integers(0, n, 20000))
    expected = np.where(is_nan[a] | is_nan[b], NAN_DISTANCE, np.abs(rank[a] - rank[b]))
    assert np.array_equal(ulp_distance(a, b, fmt), expected)


def test_ulp_distance_edges_and_broadcasting():
    f = sf.fp16
    assert ulp_distance(0x0000, 0x8000, f) == 0
    assert ulp_distance(0x0001, 0x8001, f) == 2
    assert ulp_distance(0x7BFF, 0x7C00, f) == 1
    assert ulp_distance(0xFC00, 0x7C00, f) == 2 * 0x7C00
    assert ulp_distance(0x7E00, 0x7E00, f) == NAN_DISTANCE
    out = ulp_distance(np.array([[0x3C00], [0x3C02]]), np.array([0x3C00, 0x3C01]), f)
    assert out.shape == (2, 2) and out.tolist() == [[0, 1], [2, 1]]
    assert isinstance(ulp_distance(1, 2, f), np.integer)
    assert ulp_distance(np.float16([1.0]), np.float16([-1.0]), f).tolist() == [2 * 0x3C00]
    with pytest.raises(ValueError, match="0x10000"):
        ulp_distance(0x10000, 0, f)
    with pytest.raises(TypeError, match="float32"):
        ulp_distance(np.float32([1.0]), 0, f)


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32], ids=lambda f: f.name)
def test_describe_matches_an_independent_decoder(fmt):
    rng = np.random.default_rng(1)
    specials = [0, fmt.sign_mask, 1, fmt.min_normal - 1, fmt.min_normal, fmt.max_finite, fmt.inf,
                fmt.inf | 1, fmt.inf | (1 << (fmt.fraction_bits - 1)), fmt.sign_mask | fmt.inf]
    for b in specials + [int(x) for x in rng.integers(0, 1 << fmt.width, 300)]:
        d = describe(b, fmt)
        sign, value = decode(b, fmt.exponent_bits, fmt.fraction_bits)
        assert d.sign == sign and d.bits == b
        assert (d.exponent << fmt.fraction_bits | d.fraction | sign << (fmt.width - 1)) == b
        if value == "nan":
            assert d.kind in ("qnan", "snan")
            assert (d.kind == "qnan") == bool(b >> (fmt.fraction_bits - 1) & 1)
        elif value == "inf":
            assert d.kind == "inf" and d.value == (-np.inf if sign else np.inf)
        else:
            assert d.value == value
            expected_kind = "zero" if value == 0 else ("normal" if d.exponent else "subnormal")
            assert d.kind == expected_kind == classify(b, fmt)


def test_describe_text():
    d = describe(0xC000, sf.fp16)
    assert d.hex == "0xc000" and d.fields == "1 10000 0000000000"
    assert str(d) == "0xc000 = -2.0 [1 10000 0000000000] normal"
    assert str(describe(0x8000, sf.fp16)).startswith("0x8000 = -0.0 ")
    assert "snan" in str(describe(0x7C01, sf.fp16))
    assert str(describe(0x7F800000, sf.fp32)).startswith("0x7f800000 = inf")


@pytest.mark.parametrize("bits", [0x0001, 0x3555, 0x7BFF, 0x8001, 0x0000, 0x03FF])
def test_exact_decimal_is_exact(bits):
    value = describe(bits, sf.fp16).value
    assert Decimal(exact_decimal(value)) == Decimal(float(value))  # Decimal(float) is exact
    assert exact_decimal(Fraction(3, 8)) == "0.375"
    with pytest.raises(ValueError):
        exact_decimal(Fraction(1, 3))


def test_mismatch_mask_nan_modes():
    f = sf.fp16
    actual = [0x7E00, 0x7E01, 0xFE00, 0x7C01, 0x7E00, 0x0000, 0x0000]
    expected = [0x7E00, 0x7E00, 0x7E00, 0x7E00, 0x3C00, 0x8000, 0x0000]
    assert mismatch_mask(actual, expected, f, nan="strict").tolist() == [0, 1, 1, 1, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, nan="class").tolist() == [0, 0, 0, 1, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, nan="any").tolist() == [0, 0, 0, 0, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, ulp=0).tolist() == [0, 0, 0, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="nan"):
        mismatch_mask(actual, expected, f, nan="payload")


def test_diff_report_lists_first_rows():
    f = sf.fp16
    actual = np.full((3, 4), 0x3C00, dtype=np.uint16)
    expected = actual.copy()
    assert diff_report(actual, expected, f) == ""
    actual[1, 2] = 0x3C03
    actual[2, 0] = 0x7E00
    actual[2, 3] = 0x8000
    expected[2, 3] = 0x0000
    text = diff_report(actual, expected, f, max_rows=2)
    assert "Mismatched elements: 3 / 12" in text
    assert "index (1, 2): actual   0x3c03 = 1.0029296875 [0 01111 0000000011] normal" in text
    assert "expected 0x3c00 = 1.0 [0 01111 0000000000] normal" in text
    assert "ulp distance 3" in text and "Max ulp distance: 3" in text
    assert "index (2, 0)" in text and "ulp distance n/a (NaN)" in text
    assert "index (2, 3)" not in text and "... and 1 more" in text
