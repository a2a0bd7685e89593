"""The FP64 instructions (NVIDIA mma .f64, AMD mfma f64): a chain of binary64 fused multiply-adds,
against MMA-Sim (skipped with its reason where it cannot be imported or built) and against an exact
rational model written here (fractions.Fraction, rounded by CPython's correctly rounded int / int),
independent of softfloat16's kernels."""
import math
import struct
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.mma_presets import PRESETS
from softfloat16.mma_reference import KINDS, compare, mmasim_missing, random_operands

FP64_PRESETS = [name for name, p in PRESETS.items() if p.d == "fp64"]
needs_mmasim = pytest.mark.skipif(mmasim_missing() is not None, reason=str(mmasim_missing()))


def _float(bits) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(bits) % (1 << 64)))[0]


def _bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _fma(a: float, b: float, c: float) -> float:
    """IEEE 754 fusedMultiplyAdd in binary64, round to nearest even, from exact rationals."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    sign_p = math.copysign(1.0, a) * math.copysign(1.0, b)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0 or (math.isinf(c) and math.copysign(1.0, c) != sign_p):
            return math.nan
        return math.copysign(math.inf, sign_p)
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # -0 only when the product and c are both -0 (or a zero sum of -0 terms)
        return -0.0 if (sign_p < 0 and math.copysign(1.0, c) < 0 and (a == 0 or b == 0) and c == 0) else 0.0
    try:
        return float(exact)  # int / int: correctly rounded, subnormals included
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def _chain(a_row, b_col, c):
    acc = _float(c)
    for x, y in zip(a_row, b_col):
        acc = _fma(_float(x), _float(y), acc)
    return acc


def _same(got_bits, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(_float(got_bits))
    return int(got_bits) == _bits(want)


def test_every_fp64_instruction_is_a_preset():
    assert len(FP64_PRESETS) == 12
    assert {PRESETS[n].model.adder for n in FP64_PRESETS} == {"fma"}
    assert "hopper.mma.m16n8k16.f64.f64.f64.f64" in FP64_PRESETS and "cdna3.mfma.f64_4x4x4_4b_f64" in FP64_PRESETS


@pytest.mark.parametrize("kind", KINDS)
def test_chains_equal_the_rational_model(kind):
    name = "hopper.mma.m16n8k4.f64.f64.f64.f64"
    a, b, c, _, _ = random_operands(PRESETS[name], 3, 4, 12, kind, seed=11)
    d = sf.mma.mma(a, b, c, name)
    assert d.dtype == np.uint64
    for i in range(3):
        for j in range(4):
            assert _same(d[i, j], _chain(a[i], b[:, j], c[i, j])), (kind, i, j)


@pytest.mark.parametrize("a, b, c", [
    (1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, -1.0),            # cancellation: the product's low bits
    (2.0 ** -537, 2.0 ** -537 * 1.5, 0.0),                  # a subnormal result
    (2.0 ** -1074, 0.5, 0.0),                               # a tie at the bottom: to even (+0)
    (2.0 ** -1074, 0.75, -0.0),                             # rounds up to the smallest subnormal
    (-(2.0 ** -1074), 0.25, 0.0),                           # underflows to -0
    (1.7976931348623157e308, 1.0 + 2.0 ** -52, 0.0),        # overflow: inf
    (1.7976931348623157e308, 2.0, -math.inf),               # an infinite c
    (3.0, 2.0 ** -80, 1.0),                                 # far below c: c
    (1.0 + 2.0 ** -30, 1.0 + 2.0 ** -30, -(2.0 ** 200)),    # far below a power of two: still c
    (2.0 ** 600, 2.0 ** 300, -(2.0 ** -100)),               # far above c: only its sticky bit
    (3.0, 1.0 + 2.0 ** -52, 0.0),                           # the product a tie: to even
    (3.0, 1.0 + 2.0 ** -52, 2.0 ** -200), (3.0, 1.0 + 2.0 ** -52, -(2.0 ** -200)),  # the tie broken by c
    (1.0 + 2.0 ** -52, 1.0 + 2.0 ** -52, 2.0 ** -105),      # a tie broken by c
    (-0.0, 5.0, -0.0), (0.0, -5.0, 0.0), (-0.0, 5.0, 0.0),  # signed zeros
    (math.inf, 0.0, 1.0), (math.inf, 1.0, -math.inf), (math.nan, 1.0, 1.0),
])
def test_hard_cases_equal_the_rational_model(a, b, c):
    """The case is the last of k = 4 products, after three (-0) * (+0), which leave any c as it is
    (padding with +0 products would turn a -0 into +0)."""
    row = np.array([[_bits(-0.0)] * 3 + [_bits(a)]], np.uint64)
    col = np.array([[0]] * 3 + [[_bits(b)]], np.uint64)
    d = sf.mma.mma(row, col, np.array([[_bits(c)]], np.uint64), "cdna3.mfma.f64_16x16x4_f64")
    want = _chain(row[0], col[:, 0], _bits(c))
    assert _same(d[0, 0], want) and _same(_bits(want), _fma(a, b, c)), (hex(int(d[0, 0])), want)


def test_float64_arrays_padding_and_gemm_partials():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 10)), rng.standard_normal((10, 2))
    name = "ampere.mma.m8n8k4.f64.f64.f64.f64"
    d = sf.mma.mma(a, b, None, name)
    want = [[_chain([_bits(x) for x in a[i]], [_bits(y) for y in b[:, j]], 0) for j in range(2)] for i in range(3)]
    assert all(_same(d[i, j], want[i][j]) for i in range(3) for j in range(2))
    halves = [sf.mma.mma(a[:, :8], b[:8], None, name).view(np.float64),  # 3 instructions: 2 + 1
              sf.mma.mma(a[:, 8:], b[8:], None, name).view(np.float64)]
    split = sf.mma.gemm(a, b, name, split_k=2)
    assert split.dtype == np.uint64 and np.array_equal(split.view(np.float64), halves[0] + halves[1])
    with pytest.raises(ValueError, match="a_format: .* takes fp64 operands"):
        sf.mma.mma(a, b, None, name, a_format="fp32")


@needs_mmasim
@pytest.mark.parametrize("name", FP64_PRESETS[::3] + ["cdna3.mfma.f64_4x4x4_4b_f64"])
def test_fp64_matches_mmasim(name):
    k = PRESETS[name].k
    for number, kind in enumerate(KINDS):
        cases, mismatches, examples = compare(name, 4, 3, k * (1 + number % 3), kind, seed=number)
        assert mismatches == 0, (kind, examples)
    assert compare(name, 2, 2, 4096, "mixed", seed=7)[1] == 0  # K = 4096: the chain as a kernel runs it
