"""softfloat16.linalg.matmul against independent oracles.

- FP16 inputs: every product of two FP16 values is exact in float32, so a numpy float32 loop
  ``acc = acc + a*b`` over k is exactly "exact products, sequential FP32 accumulation" (RNE),
  and numpy's float32 -> float16 conversion gives the final rounding.
- Other inputs, orders and modes: exact rationals (fractions.Fraction), rounded by
  ``softfloat16.exact`` (written from the definition of the formats, apart from the kernels).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
import softfloat16.linalg as linalg
from softfloat16 import exact

FORMATS = {"fp16": (5, 10), "bf16": (8, 7), "fp32": (8, 23)}


def round_to(x: Fraction, ebits: int, fbits: int, mode: str = "rne") -> Fraction | float:
    """x rounded to the binary format of these widths by softfloat16.exact (gradual underflow;
    overflow to inf, or max under rtz): a Fraction, or +-inf as a float."""
    fmt = sf.Format(f"e{ebits}m{fbits}", ebits, fbits, np.uint32)
    bits, _ = exact.round_fraction(x, fmt, mode)
    return fmt.value(bits)


def values(bits: np.ndarray, fmt: sf.Format) -> list[list[Fraction]]:
    return [[Fraction(float(v)) for v in row] for row in np.asarray(fmt.to_float(bits))]


def sequential_oracle(a, b, fmt, acc=(8, 23), out=None, mode="rne"):
    out = out or FORMATS[fmt.name]
    av, bv = values(a, fmt), values(b, fmt)
    result = np.empty((len(av), len(bv[0]) if bv else b.shape[1]))
    for i in range(result.shape[0]):
        for j in range(result.shape[1]):
            total = Fraction(0)
            for t in range(len(bv)):
                if isinstance(total, float):  # +-inf absorbs every finite product
                    break
                total = round_to(total + av[i][t] * bv[t][j], *acc, mode)
            result[i, j] = total if isinstance(total, float) else float(round_to(total, *out, mode))
    return result


def balanced(terms: list, acc) -> Fraction:
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return round_to(balanced(terms[:half], acc) + balanced(terms[half:], acc), *acc)


def pairwise_oracle(a, b, fmt, acc=(8, 23)):
    """The documented tree: k = 2**a + 2**b + ... (a > b > ...), balanced trees over those blocks,
    then S_a + (S_b + (... + S_z))."""
    av, bv = values(a, fmt), values(b, fmt)
    k = len(bv)
    result = np.empty((len(av), b.shape[1]))
    for i in range(result.shape[0]):
        for j in range(result.shape[1]):
            products = [av[i][t] * bv[t][j] for t in range(k)]
            blocks, start = [], 0
            for power in reversed(range(k.bit_length())):
                if k >> power & 1:
                    blocks.append(balanced(products[start:start + (1 << power)], acc))
                    start += 1 << power
            total = round_to(blocks[-1], *acc) if len(blocks) == 1 else blocks[-1]
            for block in reversed(blocks[:-1]):
                total = round_to(block + total, *acc)
            result[i, j] = float(round_to(total, *FORMATS[fmt.name]))
    return result


def random_bits(rng, fmt: sf.Format, shape, spread: int = 12) -> np.ndarray:
    """Values over a wide exponent range, with zeros and subnormals mixed in."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))
    x[rng.random(shape) < 0.1] = 0.0
    bits = np.asarray(fmt.from_float(x))
    tiny = rng.random(shape) < 0.1  # subnormals of the format
    bits[tiny] = rng.integers(1, 1 << fmt.fraction_bits, np.count_nonzero(tiny)).astype(fmt.dtype)
    return bits


def float32_sequential(a16: np.ndarray, b16: np.ndarray) -> np.ndarray:
    a, b = a16.view(np.float16).astype(np.float32), b16.view(np.float16).astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for t in range(a.shape[1]):
        acc = acc + a[:, t:t + 1] * b[t:t + 1, :]  # exact product, one float32 rounding per add
    return acc


@pytest.mark.parametrize("seed", range(6))
def test_fp16_matches_float32_hardware_loop(seed):
    rng = np.random.default_rng(seed)
    m, k, n = rng.integers(1, 9), rng.integers(1, 70), rng.integers(1, 9)
    a, b = random_bits(rng, sf.fp16, (m, k)), random_bits(rng, sf.fp16, (k, n))
    expected = float32_sequential(a, b)
    got32 = linalg.matmul(a, b, sf.fp16, out_format=sf.fp32)
    np.testing.assert_array_equal(got32, expected.view(np.uint32))
    got16 = linalg.matmul(a, b, sf.fp16)
    with np.errstate(over="ignore"):  # large sums overflow FP16: inf, as they should
        rounded = expected.astype(np.float16)
    np.testing.assert_array_equal(got16, rounded.view(np.uint16))


def test_fp16_output_overflows_to_inf():
    a = sf.fp16.from_float(np.full((1, 4), 60000.0))
    b = sf.fp16.from_float(np.ones((4, 1)))
    assert linalg.matmul(a, b, sf.fp16)[0, 0] == sf.fp16.inf
    assert sf.fp32.to_float(linalg.matmul(a, b, sf.fp16, out_format=sf.fp32))[0, 0] == 240000.0


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_wide_products_match_fraction_oracle(name):
    """FP32 products (48 bits) and BF16 products at FP32's range limits are rounded when added."""
    fmt = sf.format(name)
    rng = np.random.default_rng(7)
    for _ in range(4):
        m, k, n = rng.integers(1, 5), rng.integers(1, 12), rng.integers(1, 4)
        spread = 70 if name == "bf16" else 20  # bf16: products beyond FP32's range both ways
        a, b = random_bits(rng, fmt, (m, k), spread), random_bits(rng, fmt, (k, n), spread)
        if name == "bf16":
            got = sf.fp32.to_float(linalg.matmul(a, b, fmt, out_format=sf.fp32))
            expected = sequential_oracle(a, b, fmt, out=(8, 23))
        else:
            got = fmt.to_float(linalg.matmul(a, b, fmt))
            expected = sequential_oracle(a, b, fmt)
        np.testing.assert_array_equal(got, expected)


def test_directed_rounding_rtz():
    rng = np.random.default_rng(3)
    a, b = random_bits(rng, sf.fp32, (3, 9)), random_bits(rng, sf.fp32, (9, 2))
    got = sf.fp32.to_float(linalg.matmul(a, b, sf.fp32, rounding="rtz"))
    np.testing.assert_array_equal(got, sequential_oracle(a, b, sf.fp32, mode="rtz"))


def test_fp16_accumulation_policy():
    """accumulate=fp16 rounds every partial sum to FP16: 2048 + 1 + 1 stays 2048."""
    a = sf.fp16.from_float(np.array([[2048.0, 1.0, 1.0]]))
    b = sf.fp16.from_float(np.ones((3, 1)))
    assert sf.fp16.to_float(linalg.matmul(a, b, sf.fp16, accumulate=sf.fp16))[0, 0] == 2048.0
    assert sf.fp16.to_float(linalg.matmul(a, b, sf.fp16))[0, 0] == 2050.0


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 13, 16, 17])
def test_pairwise_matches_tree_oracle(k):
    rng = np.random.default_rng(k)
    a, b = random_bits(rng, sf.fp32, (2, k)), random_bits(rng, sf.fp32, (k, 3))
    got = sf.fp32.to_float(linalg.matmul(a, b, sf.fp32, order="pairwise"))
    np.testing.assert_array_equal(got, pairwise_oracle(a, b, sf.fp32))


def test_order_matters():
    """1 + 0 + e + e with e = 2**-24: sequentially each e is a tie that rounds back to 1; the
    pairwise tree adds e + e first and keeps it."""
    a = sf.fp32.from_float(np.array([[1.0, 0.0, 2.0**-24, 2.0**-24]]))
    b = sf.fp32.from_float(np.ones((4, 1)))
    sequential = sf.fp32.to_float(linalg.matmul(a, b, sf.fp32))[0, 0]
    pairwise = sf.fp32.to_float(linalg.matmul(a, b, sf.fp32, order="pairwise"))[0, 0]
    assert (sequential, pairwise) == (1.0, 1.0 + 2.0**-23)


def test_special_values():
    fp16 = sf.fp16
    nan, inf, zero, one = fp16.from_float(np.nan), fp16.inf, 0, fp16.from_float(1.0)
    neg_inf, neg_zero = fp16.inf | 0x8000, 0x8000
    cases = {  # (row of a, column of b) -> expected bits
        ((one, nan), (one, one)): 0x7E00,  # NaN operand: the default NaN
        ((inf, one), (zero, one)): 0x7E00,  # inf * 0
        ((inf, neg_inf), (one, one)): 0x7E00,  # inf - inf
        ((inf, one), (one, one)): fp16.inf,
        ((neg_inf, zero), (one, neg_zero)): neg_inf,
        ((one, one), (one, 0xBC00)): 0,  # 1 - 1 = +0 in RNE
    }
    for (row, column), expected in cases.items():
        a = np.array([row], dtype=np.uint16)
        b = np.array(column, dtype=np.uint16).reshape(2, 1)
        for order in linalg.ORDERS:
            # A matrix unit's NaN is one pattern, 0x7fffffff in FP32, whose conversion keeps its payload.
            want = 0x7FFF if order == "tensorcore" and expected == 0x7E00 else expected
            assert linalg.matmul(a, b, fp16, order=order)[0, 0] == want, (row, column, order)
    # -0 + -0: the sequential loop starts from +0 (acc = 0; acc += ...), the tree has no start
    a, b = np.array([[neg_zero, neg_zero]], np.uint16), np.array([[one], [one]], np.uint16)
    assert linalg.matmul(a, b, fp16)[0, 0] == 0
    assert linalg.matmul(a, b, fp16, order="pairwise")[0, 0] == neg_zero
    assert linalg.matmul(np.array([[neg_zero]], np.uint16), np.array([[one]], np.uint16), fp16,
                         rounding="rdn")[0, 0] == neg_zero  # -0 + +0... under rdn stays -0
    empty = linalg.matmul(np.zeros((2, 0), np.uint16), np.zeros((0, 3), np.uint16), fp16)
    assert empty.shape == (2, 3) and not empty.any()


def scalar_sequential(a, b, fmt, accumulate=sf.fp32, out=None, rounding="rne"):
    """The scalar sequential kernel, called directly (linalg.matmul runs FP16/BF16 inputs with
    FP32 accumulation on the SIMD-lane kernel instead; this is the one the oracles above pin)."""
    from softfloat16._kernels import matmul as kernels
    out = out or fmt
    e, f = fmt.exponent_bits, fmt.fraction_bits
    ua = kernels.unpack_matrix(np.ascontiguousarray(a, dtype=np.uint32), e, f, fmt.encoding_code)
    ub = kernels.unpack_matrix(np.ascontiguousarray(b.T, dtype=np.uint32), e, f, fmt.encoding_code)
    result = np.empty((a.shape[0], b.shape[1]), np.uint32)
    kernels.matmul_sequential(ua, ub, result, accumulate.exponent_bits, accumulate.fraction_bits,
                              out.exponent_bits, out.fraction_bits, int(sf.Rounding[rounding.upper()]))
    return result.astype(out.dtype)


@pytest.mark.parametrize("rounding", ["rne", "rna", "rtz", "rup", "rdn", "rod"])
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_lane_kernel_gives_the_scalar_kernels_bits(name, rounding):
    """Every class of operand, ReLU-like zero rows and columns, sums that cancel to +-0, products
    beyond FP32's range (bf16), sums that overflow, 0 * inf; n = 37 is two full blocks of lanes
    and a partial one."""
    fmt = sf.format(name)
    rng = np.random.default_rng([7, len(name), len(rounding), ord(rounding[-1])])
    m, k, n = 6, 29, 37
    a = random_bits(rng, fmt, (m, k), 70 if name == "bf16" else 14)
    b = random_bits(rng, fmt, (k, n), 70 if name == "bf16" else 14)
    a[1] &= np.array(fmt.sign_mask, fmt.dtype)  # a row of +-0 only
    a[2, ::2] = 0  # ReLU's zeros
    b[:, 3] = b[:, 4] ^ np.array(fmt.sign_mask, fmt.dtype)  # columns 3 and 4 cancel against ...
    a[3] = a[4]  # ... rows 3 and 4 being equal: used below
    specials = rng.random((k, n)) < 0.02
    b[specials] = rng.choice([fmt.inf, fmt.inf | fmt.sign_mask, fmt.from_float(np.nan)], np.count_nonzero(specials))
    a[5, 7] = fmt.inf  # row 5 meets every b[7] (b has zeros: 0 * inf)
    for out in (fmt, sf.fp32):
        got = linalg.matmul(a, b, fmt, out_format=out, rounding=rounding)
        want = scalar_sequential(a, b, fmt, out=out, rounding=rounding)
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{name} {rounding} -> {out.name}: first differences at {bad[:5].tolist()}"
    # Sums of exactly cancelling products (+0, or -0 under rdn) and the lanes' skip of zero terms.
    pair = np.stack([a[4], a[4]])
    twin = np.stack([b[:, 4], b[:, 4] ^ np.array(fmt.sign_mask, fmt.dtype)], axis=1)
    np.testing.assert_array_equal(linalg.matmul(pair, twin, fmt, rounding=rounding),
                                  scalar_sequential(pair, twin, fmt, rounding=rounding))


def test_parallel_kernel_gives_the_same_bits(monkeypatch):
    rng = np.random.default_rng(11)
    a, b = random_bits(rng, sf.fp16, (128, 128)), random_bits(rng, sf.fp16, (128, 80))
    assert 128 * 128 * 80 >= sf.threads.PARALLEL_MIN_MACS
    parallel = linalg.matmul(a, b, sf.fp16)
    monkeypatch.setattr(sf.threads, "PARALLEL_MIN_MACS", 1 << 62)
    np.testing.assert_array_equal(parallel, linalg.matmul(a, b, sf.fp16))


def test_bad_arguments():
    a = np.zeros((2, 3), np.uint16)
    with pytest.raises(ValueError, match="inner dimensions"):
        linalg.matmul(a, np.zeros((2, 2), np.uint16), sf.fp16)
    with pytest.raises(ValueError, match="2-D"):
        linalg.matmul(np.zeros(3, np.uint16), a, sf.fp16)
    with pytest.raises(ValueError, match="order"):
        linalg.matmul(a, a.T, sf.fp16, order="random")
    with pytest.raises(ValueError, match="rounding"):
        linalg.matmul(a, a.T, sf.fp16, rounding="nearest-ish")
    with pytest.raises(ValueError, match="format"):
        linalg.matmul(a, a.T, "fp64")
    with pytest.raises(TypeError):
        linalg.matmul(a.astype(np.float32), a.T, sf.fp16)  # float32 values are not fp16 bits
