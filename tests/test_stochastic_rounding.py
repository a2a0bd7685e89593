"""Stochastic rounding through the public API: the pinned rule (round up iff d + r >= 2**R) checked
with exact integers and Fractions, the seeded stream's independence from how an array is split,
its statistics, and the argument errors. The oracle here is plain integer arithmetic on the exact
value, independent of the kernels; tests/test_small_formats.py holds the exhaustive comparisons."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.stochastic import random_words


def sr_expected(value: Fraction, fmt: sf.Format, r: int, sr_bits: int) -> Fraction:
    """The stochastically rounded magnitude of a positive ``value`` inside fmt's normal range:
    truncate to the format's precision, round up iff d + r >= 2**R (d: first R discarded bits)."""
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exponent > value:
        exponent -= 1
    ulp = Fraction(2) ** (exponent - fmt.fraction_bits)
    units = value / ulp
    q = units.numerator // units.denominator
    d = int((units - q) * 2**sr_bits)  # floor: the first R discarded bits
    return (q + (d + r >= 2**sr_bits)) * ulp


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp8_e4m3fn, sf.fp6_e2m3, sf.fp32])
@pytest.mark.parametrize("sr_bits", [1, 3, 8, 32])
def test_every_result_follows_the_pinned_rule(fmt, sr_bits):
    rng = np.random.default_rng(sr_bits)
    top = float(fmt.value(fmt.max_finite)) / 2
    low = 2.0 ** fmt.emin
    x = np.exp(rng.uniform(np.log(low), np.log(top), 3000))
    words = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
    got = fmt.to_float(fmt.from_float(x, rounding="sr", sr_bits=sr_bits, random_bits=words))
    for value, word, result in zip(x, words, got):
        expected = sr_expected(Fraction(float(value)), fmt, int(word) >> (32 - sr_bits), sr_bits)
        assert Fraction(float(result)) == expected, (fmt.name, value, hex(word))


def test_round_up_probability_is_d_over_two_to_the_r_exactly():
    """For R = 4, every r of 0..15: the number of r that round up is d."""
    fmt, sr_bits = sf.fp16, 4
    for d in range(16):
        x = 1 + d * 2.0**-14  # d sixteenths of an fp16 ulp above 1 (ulp 2**-10)
        words = (np.arange(16, dtype=np.uint32) << 28)
        up = sf.fp16.from_float(np.full(16, x), rounding="sr", sr_bits=sr_bits, random_bits=words) == fmt.one + 1
        assert up.sum() == d


def test_negative_values_round_their_magnitude():
    words = np.array([0, 2**31, 2**32 - 1], dtype=np.uint32)
    x = np.full(3, 1 + 2**-11)  # half an ulp
    positive = sf.fp16.from_float(x, rounding="sr", random_bits=words)
    negative = sf.fp16.from_float(-x, rounding="sr", random_bits=words)
    assert np.array_equal(negative, positive | sf.fp16.sign_mask)
    assert positive.tolist() == [sf.fp16.one, sf.fp16.one + 1, sf.fp16.one + 1]


def test_a_seed_gives_each_element_its_philox_word_whatever_the_split():
    rng = np.random.default_rng(3)
    a = sf.fp32.from_float(rng.standard_normal(10_000))
    b = sf.fp32.from_float(rng.standard_normal(10_000))
    whole = sf.fp32.mul(a, b, rounding="sr", seed=2**40 + 5)
    by_words = sf.fp32.mul(a, b, rounding="sr", random_bits=random_words(2**40 + 5, a.shape))
    assert np.array_equal(whole, by_words)
    # The same operands as a 2-D array: the flat index is what counts.
    shaped = sf.fp32.mul(a.reshape(100, 100), b.reshape(100, 100), rounding="sr", seed=2**40 + 5)
    assert np.array_equal(shaped.reshape(-1), whole)
    # Chunks see other indices, hence other words: prove the stream is indexed, not consumed.
    pieces = [sf.fp32.mul(a[i:i + 777], b[i:i + 777], rounding="sr",
                          random_bits=random_words(2**40 + 5, min(777, a.size - i), start=i))
              for i in range(0, a.size, 777)]
    assert np.array_equal(np.concatenate(pieces), whole)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt", "fma"])
def test_the_mean_of_many_rounded_copies_is_the_exact_value(op):
    """10**6 stochastically rounded copies average to the exact result within 5 standard errors."""
    n = 10**6
    a, b, c = (np.full(n, sf.fp16.from_float(v)) for v in (1.0 / 3, 0.7 * 2**-6, 2.0**-9))
    exact = {"add": Fraction(float(sf.fp16.to_float(a[0]))) + Fraction(float(sf.fp16.to_float(b[0]))),
             "sub": Fraction(float(sf.fp16.to_float(a[0]))) - Fraction(float(sf.fp16.to_float(b[0]))),
             "mul": Fraction(float(sf.fp16.to_float(a[0]))) * Fraction(float(sf.fp16.to_float(b[0]))),
             "div": Fraction(float(sf.fp16.to_float(a[0]))) / Fraction(float(sf.fp16.to_float(b[0]))),
             "fma": Fraction(float(sf.fp16.to_float(a[0]))) * Fraction(float(sf.fp16.to_float(b[0])))
             + Fraction(float(sf.fp16.to_float(c[0])))}
    if op == "sqrt":
        result = sf.fp16.sqrt(b, rounding="sr", seed=11)
        target = float(sf.fp16.to_float(b[0])) ** 0.5
    else:
        operands = (a, b, c) if op == "fma" else (a, b)
        result = getattr(sf.fp16, op)(*operands, rounding="sr", seed=11)
        target = float(exact[op])
    values = sf.fp16.to_float(result)
    assert len(np.unique(values)) == 2  # the two neighbours of an inexact result
    standard_error = values.std() / np.sqrt(n)
    assert abs(values.mean() - target) < 5 * standard_error + 1e-15


def test_sr_keeps_overflow_underflow_and_flags():
    words = np.array([0, 2**32 - 1], dtype=np.uint32)
    # 450 is between 448 and the NaN-coded 480 in E4M3FN: truncation keeps 448, rounding up overflows.
    bits, flags = sf.fp8_e4m3fn.from_float(np.full(2, 450.0), rounding="sr", random_bits=words, flags=True)
    assert bits.tolist() == [0x7E, 0x7F] and flags.tolist() == [sf.Flag.INEXACT, sf.Flag.OVERFLOW | sf.Flag.INEXACT]
    bits = sf.fp8_e4m3fn.from_float(np.full(2, 450.0), rounding="sr", random_bits=words, saturate=True)
    assert bits.tolist() == [0x7E, 0x7E]
    # Below the smallest subnormal of fp16 (2**-24): zero or the smallest subnormal, UNDERFLOW either way.
    bits, flags = sf.fp16.from_float(np.full(2, 2.0**-26), rounding="sr", random_bits=words, flags=True)
    assert bits.tolist() == [0, 1] and all(f == sf.Flag.UNDERFLOW | sf.Flag.INEXACT for f in flags)
    # Exact results are exact, and raise nothing.
    bits, flags = sf.fp16.add(0x3C00, 0x3C00, rounding="sr", seed=1, flags=True)
    assert bits == 0x4000 and flags == 0


def test_bad_stochastic_arguments_are_named():
    with pytest.raises(ValueError, match="seed= .* or random_bits="):
        sf.fp16.add(1, 2, rounding="sr")
    with pytest.raises(ValueError, match="exactly one"):
        sf.fp16.add(1, 2, rounding="sr", seed=1, random_bits=np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="seed: only stochastic"):
        sf.fp16.add(1, 2, seed=1)
    with pytest.raises(ValueError, match="random_bits: only stochastic"):
        sf.convert(1, sf.fp32, sf.fp16, random_bits=np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="random_bits: shape"):
        sf.fp16.add(np.ones(3, np.uint16), 1, rounding="sr", random_bits=np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match=r"random_bits: values"):
        sf.fp16.add(1, 2, rounding="sr", random_bits=np.array(2**32))
    with pytest.raises(TypeError, match="random_bits"):
        sf.fp16.add(1, 2, rounding="sr", random_bits=np.array(0.5))
    for bad in (0, 33, True, 2.0):
        with pytest.raises(ValueError, match="sr_bits"):
            sf.fp16.add(1, 2, rounding="sr", seed=1, sr_bits=bad)
    for bad in (-1, 2**64):
        with pytest.raises(ValueError, match="seed"):
            sf.fp16.add(1, 2, rounding="sr", seed=bad)
    with pytest.raises(TypeError, match="unknown keyword"):
        sf.fp16.eq(1, 2, rounding="sr", seed=1)
    with pytest.raises(ValueError, match="rounding: matmul has no stochastic"):
        sf.linalg.matmul(np.zeros((1, 1), np.uint16), np.zeros((1, 1), np.uint16), sf.fp16, rounding="sr")
