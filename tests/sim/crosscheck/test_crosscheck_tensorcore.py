"""The tensor-core accumulation policy against an independent exact-rational model of the rule.

The model below implements the rule from its statement (softfloat16.linalg.TensorCore) with
fractions.Fraction and the oracle's one-rounding encoder; it shares no code with the kernel.
"""
from fractions import Fraction
from math import floor

import numpy as np
import oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import softfloat16 as sf
import softfloat16.linalg as linalg


def _floor_log2(x: Fraction) -> int:
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** exponent > x:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= x:
        exponent += 1
    return exponent


def _truncate(x: Fraction, quantum: Fraction) -> Fraction:
    """x rounded toward zero to a multiple of quantum."""
    magnitude = floor(abs(x) / quantum) * quantum
    return magnitude if x >= 0 else -magnitude


def model_dot(row, column, fmt: str, block: int, fraction_bits: int, out: str) -> int:
    """Bits of one output element under the rule, for finite inputs (exact rationals)."""
    products = [oracle.to_fraction(a, fmt) * oracle.to_fraction(b, fmt) for a, b in zip(row, column)]
    accumulator = Fraction(0)
    for start in range(0, len(products), block):
        terms = [accumulator, *products[start:start + block]]
        nonzero = [t for t in terms if t != 0]
        if not nonzero:
            accumulator = Fraction(0)
            continue
        top = max(_floor_log2(abs(t)) for t in nonzero)
        quantum = Fraction(2) ** (top - fraction_bits)
        total = sum(_truncate(t, quantum) for t in terms)
        bits, _ = oracle.encode_round(total, 0, "fp32", "rtz")  # normalised once, toward zero
        accumulator = oracle.to_fraction(bits, "fp32")
    bits, _ = oracle.encode_round(accumulator, 0, out, "rne")
    return bits


def kernel_dot(a, b, fmt, core, out):
    return linalg.matmul(np.asarray(a, fmt.dtype), np.asarray(b, fmt.dtype), fmt, out_format=out,
                         order="tensorcore", tensor_core=core)


def finite_bits(fmt: sf.Format, min_exponent_field: int = 0, max_exponent_field: int | None = None):
    top = (1 << fmt.exponent_bits) - 2 if max_exponent_field is None else max_exponent_field
    return st.builds(
        lambda sign, field, fraction: (sign << (fmt.width - 1)) | (field << fmt.fraction_bits) | fraction,
        st.integers(0, 1), st.integers(min_exponent_field, top), st.integers(0, (1 << fmt.fraction_bits) - 1),
    )


CORES = [linalg.TENSOR_CORES["h100"], linalg.TensorCore(4, 23), linalg.TensorCore(8, 24), linalg.TensorCore(3, 6)]


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
@pytest.mark.parametrize("core", CORES, ids=lambda c: f"B{c.products_per_block}F{c.fraction_bits}")
@settings(max_examples=40)
@given(data=st.data())
def test_kernel_matches_the_fraction_model(fmt, core, data):
    # bf16 exponents kept where products and their sums stay inside FP32's range.
    bounds = (0, None) if fmt is sf.fp16 else (64, 190)
    k = data.draw(st.integers(1, 40), label="k")
    row = data.draw(st.lists(finite_bits(fmt, *bounds), min_size=k, max_size=k), label="row")
    column = data.draw(st.lists(finite_bits(fmt, *bounds), min_size=k, max_size=k), label="column")
    for out in (sf.fp32, fmt):
        got = int(kernel_dot([row], np.array(column).reshape(k, 1), fmt, core, out)[0, 0])
        expected = model_dot(row, column, fmt.name, core.products_per_block, core.fraction_bits, out.name)
        assert got == expected, (hex(got), hex(expected), out.name)


def test_cancellation_truncation_and_blocks():
    fp16 = sf.fp16
    one = fp16.from_float(1.0)
    ones = np.full((1, 1), one, np.uint16)
    # Fifteen products 2**-26, then 1: in one block each small term is truncated to 0 (it lies
    # below 25 bits under the leading one), while a sequential FP32 sum adds them up first.
    a = fp16.from_float(np.array([[2.0**-13] * 15 + [1.0]]))
    b = a.reshape(16, 1)
    assert sf.fp32.to_float(kernel_dot(a, b, fp16, "h100", sf.fp32))[0, 0] == 1.0
    assert sf.fp32.to_float(linalg.matmul(a, b, fp16, out_format=sf.fp32))[0, 0] == 1 + 2.0**-22
    # 2**-10 terms survive (within 25 bits); 17 products of 1 span two blocks of 16: 16, then +1.
    a = np.full((1, 17), one, np.uint16)
    assert sf.fp32.to_float(kernel_dot(a, np.full((17, 1), one, np.uint16), fp16, "h100", sf.fp32))[0, 0] == 17
    # Exact cancellation gives +0.
    minus_one = fp16.from_float(-1.0)
    got = kernel_dot(np.array([[one, minus_one]], np.uint16), np.array([[one], [one]], np.uint16), fp16, "h100", fp16)
    assert int(got[0, 0]) == 0
    # A single product: exact, then rounded toward zero into FP32 (here exact anyway).
    assert sf.fp32.to_float(kernel_dot(ones, ones, fp16, "h100", sf.fp32))[0, 0] == 1.0


def test_round_toward_zero_in_the_accumulator_then_nearest_to_the_output():
    # In FP32, 1 + 2**-24 + 2**-25 has no exact form: the block rounds toward zero to 1; with
    # 26 bits kept, the sequential policy would round (twice, to nearest) up instead.
    bf16 = sf.bf16
    a = bf16.from_float(np.array([[1.0, 2.0**-24, 2.0**-25]]))
    b = bf16.from_float(np.ones((3, 1)))
    core = linalg.TensorCore(16, 26)
    assert sf.fp32.to_float(kernel_dot(a, b, bf16, core, sf.fp32))[0, 0] == 1.0
    negative = bf16.from_float(np.array([[-1.0, -(2.0**-24), -(2.0**-25)]]))
    assert sf.fp32.to_float(kernel_dot(negative, b, bf16, core, sf.fp32))[0, 0] == -1.0


def test_special_values():
    fp16 = sf.fp16
    nan, inf, one, zero = 0x7E00, fp16.inf, int(fp16.from_float(1.0)), 0
    neg_zero, neg_inf = 0x8000, fp16.inf | 0x8000
    cases = {
        ((one, nan), (one, one)): 0x7FC00000,  # the default NaN of the output format
        ((inf, one), (zero, one)): 0x7FC00000,  # inf * 0
        ((inf, neg_inf), (one, one)): 0x7FC00000,  # inf - inf within a block
        ((inf, one), (one, one)): 0x7F800000,
        ((neg_zero, neg_zero), (one, one)): 0,  # the accumulator starts at +0
    }
    for (row, column), expected in cases.items():
        got = kernel_dot([row], np.array(column).reshape(2, 1), fp16, "h100", sf.fp32)[0, 0]
        assert int(got) == expected, (row, column, hex(int(got)))
    # An infinity from one block stays through later blocks (17 products: two blocks).
    row = [inf] + [one] * 16
    got = kernel_dot([row], np.full((17, 1), one), fp16, "h100", sf.fp32)[0, 0]
    assert int(got) == 0x7F800000


def test_parallel_kernel_and_bad_parameters(monkeypatch):
    rng = np.random.default_rng(5)
    a = sf.fp16.from_float(rng.standard_normal((64, 96)))
    b = sf.fp16.from_float(rng.standard_normal((96, 200)))
    monkeypatch.setattr(linalg, "PARALLEL_MIN_MACS", 1)
    parallel = linalg.matmul(a, b, sf.fp16, order="tensorcore")
    monkeypatch.setattr(linalg, "PARALLEL_MIN_MACS", 1 << 62)
    np.testing.assert_array_equal(parallel, linalg.matmul(a, b, sf.fp16, order="tensorcore"))
    with pytest.raises(ValueError, match="tensor_core"):
        linalg.matmul(a, b, sf.fp16, order="tensorcore", tensor_core="v100")
    with pytest.raises(ValueError, match="products_per_block"):
        linalg.TensorCore(0, 25)
    with pytest.raises(ValueError, match="fraction_bits"):
        linalg.TensorCore(16, 80)
