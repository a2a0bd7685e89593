"""The float64 SIMD-lane matmul kernels (softfloat16._kernels.matmul_lanes) give the scalar kernels' bits.

- Against the scalar kernels (matmul.MATMUL, the definition of the orders), bit for bit, in every
  order, rounding mode and input format, on matrices built to meet every path: ties, exact
  cancellations to +-0, zero rows (ReLU), products beyond the accumulation format's range both
  ways (subnormal sums, overflow), subnormal inputs, inf, NaN and 0 * inf. The kernels report how
  many elements their scalar fallback recomputed: the tests check that the lanes did the rest.
- Against independent oracles written here from the definitions with fractions.Fraction (the
  sequential and pairwise orders for FP32 inputs in four modes, and the tensor-core model).
"""
from __future__ import annotations

import contextlib
import math
from fractions import Fraction

import numba
import numpy as np
import pytest
from numba import njit, prange

import softfloat16 as sf
from softfloat16 import linalg
from softfloat16._kernels import matmul as kernels
from softfloat16._kernels import environment, matmul_lanes
from softfloat16._kernels.environment import PROBE

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")
ORDERS = ("sequential", "pairwise")


def unpacked(a, b, fmt, b_format):
    """The scalar kernels' operands: A and B transposed, unpacked."""
    ua = kernels.unpack_matrix(np.ascontiguousarray(a, dtype=np.uint32), fmt.exponent_bits, fmt.fraction_bits,
                               fmt.encoding_code)
    ub = kernels.unpack_matrix(np.ascontiguousarray(b.T, dtype=np.uint32), b_format.exponent_bits,
                               b_format.fraction_bits, b_format.encoding_code)
    return ua, ub


def scalar_matmul(a, b, fmt, order, rounding="rne", b_format=None, accumulate=sf.fp32, out=sf.fp32):
    """The reference: the scalar kernel of the order, called directly."""
    ua, ub = unpacked(a, b, fmt, b_format or fmt)
    result = np.empty((a.shape[0], b.shape[1]), np.uint32)
    params = (accumulate.exponent_bits, accumulate.fraction_bits, out.exponent_bits, out.fraction_bits,
              int(sf.Rounding[rounding.upper()]))
    kernels.MATMUL[order][0](ua, ub, result, *params)
    return result


def lane_matmul(a, b, fmt, order, rounding="rne", b_format=None, accumulate=sf.fp32, out=sf.fp32):
    """The lane kernel linalg.matmul uses, called directly -> (bits, elements the scalar path redid)."""
    ua, ub = unpacked(a, b, fmt, b_format or fmt)
    result = np.empty((a.shape[0], b.shape[1]), np.uint32)
    mode = int(sf.Rounding[rounding.upper()])
    acc = (accumulate.exponent_bits, accumulate.fraction_bits)
    compiled = mode if rounding == "rne" else matmul_lanes.ANY_ROUNDING
    kernel = linalg._float64_lanes_kernel(order, *acc, compiled, False)
    redone, default_environment = kernel(ua, ub, result, out.exponent_bits, out.fraction_bits, mode, PROBE)
    assert default_environment
    return result, redone


def assert_same_bits(got, want, label):
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{label}: {len(bad)} elements differ, first at {bad[:4].tolist()}: " + ", ".join(
        f"{int(got[i, j]):#x} != {int(want[i, j]):#x}" for i, j in bad[:4])


def grid_values(rng, fmt, shape, low=-6, high=6):
    """Values with few significant bits in a narrow exponent range: their sums are often exact
    (cancellations to zero) or exact ties of the accumulation format. For FP32 inputs a low bit is
    set too, so that products such as (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 are FP32 ties."""
    fraction = rng.integers(0, 8, shape) << (fmt.fraction_bits - 3)
    if fmt.fraction_bits > 12:
        fraction |= rng.integers(0, 2, shape) << (fmt.fraction_bits - 12)
    exponent = rng.integers(low, high + 1, shape) + fmt.bias
    sign = rng.integers(0, 2, shape)
    bits = (sign << (fmt.exponent_bits + fmt.fraction_bits)) | (exponent << fmt.fraction_bits) | fraction
    return bits.astype(fmt.dtype)


def edge_matrices(rng, fmt, m, k, n, b_format=None):
    """A (m, k) and B (k, n), m >= 8, k >= 8, n >= 21, that meet every path (see the module docstring).
    Rows 0-1 and columns 0-1 hold the rare events; the rest is mostly grid values."""
    b_format = b_format or fmt
    a, b = grid_values(rng, fmt, (m, k)), grid_values(rng, b_format, (k, n))
    # Full-precision values over a wider range: rounding in every step.
    wide_a, wide_b = rng.random((m, k)) < 0.3, rng.random((k, n)) < 0.3
    a[wide_a] = fmt.from_float(rng.standard_normal(np.count_nonzero(wide_a)) * 2.0 ** rng.integers(-9, 9))
    b[wide_b] = b_format.from_float(rng.standard_normal(np.count_nonzero(wide_b)) * 2.0 ** rng.integers(-9, 9))
    a[rng.random((m, k)) < 0.1] = 0  # ReLU's zeros
    sign_a, sign_b = fmt.sign_mask, b_format.sign_mask
    # Row 2 cancels exactly against itself: a[2, t + h] = a[2, t], b[t + h, 3] = -b[t, 3].
    h = k // 2
    a[2, h:2 * h] = a[2, :h]
    b[h:2 * h, 3] = b[:h, 3] ^ sign_b
    a[2, 2 * h:] = 0
    a[3] = sign_a  # -0 everywhere: -0 products (a -0 sum in pairwise order, +0 in sequential)
    b[:, 4] = sign_b  # and a -0 column
    b[0, 5] = b_format.inf  # 0 * inf (a has zeros) or inf
    # 0 * inf late in a sum, in the second block of lanes (no zero columns there): the lanes skip
    # a zero term of A only if no b of the step is inf or NaN.
    b[k - 1, 20] = b_format.inf
    a[7, k - 1] = 0
    b[1, 6] = b_format.from_float(np.nan) if b_format.encoding != "finite" else b[1, 6]
    a[0, 0] = fmt.inf if fmt.encoding == "ieee" else a[0, 0]
    b[:, 7] = b_format.max_finite  # big products: overflow for fp32/bf16, not for fp16 into fp32
    a[1, :] = fmt.max_finite
    a[4, :] = np.asarray(a[4, :]) & np.array(fmt.fraction_mask, fmt.dtype)  # subnormals of the format
    b[:, 8] = b_format.min_subnormal
    a[5, 1::2] = np.asarray(a[5, ::2])[: len(a[5, 1::2])] ^ sign_a  # neighbours cancelling in pairs
    # Row 6 and column 9: a big first term, then tiny ones of either sign, so that the float64 sum
    # of C[6, 9] is the accumulator itself and only the sign of its error says how to round.
    for x, f, count in ((a[6, :], fmt, k), (b[:, 9], b_format, k)):
        tiny = (1 + rng.integers(0, 8, count) / 8) * rng.choice([-1.0, 1.0], count)
        x[:] = f.from_float(tiny * 2.0 ** max(-40, f.min_subnormal_exponent + 3))
        x[0] = f.from_float(1.5 * 2.0 ** min(40, f.emax - 1))
    return a, b


CASES = [  # (A format, B format): every input width; E4M3 x E5M2 as FP8 training multiplies them
    ("fp32", "fp32"), ("bf16", "bf16"), ("fp16", "fp16"), ("fp8_e4m3fn", "fp8_e5m2"), ("fp16", "fp32"),
]


@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(c))
def test_lanes_give_the_scalar_kernels_bits(case, order, rounding):
    fmt, b_format = (sf.format(name) for name in case)
    rng = np.random.default_rng([len(case[0]), len(case[1]), ORDERS.index(order), MODES.index(rounding)])
    m, k, n = 9, 40, 37  # n: two full blocks of lanes and a partial one; k: two and a half tensor-core blocks
    a, b = edge_matrices(rng, fmt, m, k, n, b_format)
    for out in (sf.fp32, fmt if fmt.encoding == "ieee" else sf.fp8_e5m2):  # IEEE outputs only
        want = scalar_matmul(a, b, fmt, order, rounding, b_format, out=out)
        got, redone = lane_matmul(a, b, fmt, order, rounding, b_format, out=out)
        assert_same_bits(got, want, f"{order} {case} {rounding} -> {out.name}")
        # The lanes did most of the work; the rare events sent some elements to the scalar path.
        assert 0 < redone < m * n // 2, redone


# Each (order, accumulation format, rne or not) is a compiled build (~6 s on CI): every order,
# the two formats and the two kinds of build each at least once.
@pytest.mark.parametrize(("order", "accumulate", "rounding"), [
    ("sequential", "fp16", "rne"), ("pairwise", "bf16", "rtz"), ("pairwise", "fp16", "rdn")])
def test_narrow_accumulation_formats(order, accumulate, rounding):
    """FP16 and BF16 accumulators: subnormal and overflowing sums come much sooner. (One mode
    each: every build of a lane kernel costs seconds of compilation.)"""
    accumulate = sf.format(accumulate)
    rng = np.random.default_rng([ORDERS.index(order), accumulate.exponent_bits])
    for fmt in (sf.fp16, sf.bf16):
        edges = edge_matrices(rng, fmt, 8, 24, 21)
        # Moderate values, which the lanes take whole: all of it in range of the accumulator.
        moderate = grid_values(rng, fmt, (8, 24), -3, 3), grid_values(rng, fmt, (24, 21), -3, 3)
        for (a, b), most in ((edges, 8 * 21), (moderate, 0)):
            want = scalar_matmul(a, b, fmt, order, rounding, accumulate=accumulate, out=accumulate)
            got, redone = lane_matmul(a, b, fmt, order, rounding, accumulate=accumulate, out=accumulate)
            assert_same_bits(got, want, f"{order} {fmt.name} into {accumulate.name} {rounding}")
            assert redone <= most


def test_uniform_random_bit_patterns():
    """Every bit pattern equally likely: for FP32 and BF16 a third of the products overflow or
    underflow (mostly the scalar path, which must then agree element by element); the small
    formats bring their own encodings (FNUZ's NaN at -0, no inf, no NaN)."""
    rng = np.random.default_rng(3)
    for fmt, b_format in ((sf.fp32, sf.fp32), (sf.bf16, sf.bf16), (sf.fp8_e4m3fnuz, sf.fp6_e3m2),
                          (sf.fp4_e2m1, sf.fp8_e5m2fnuz)):
        a = rng.integers(0, 1 << fmt.width, (6, 10), dtype=np.uint64).astype(fmt.dtype)
        b = rng.integers(0, 1 << b_format.width, (10, 19), dtype=np.uint64).astype(b_format.dtype)
        for order in ORDERS:
            for rounding in ("rne", "rup"):
                got, _ = lane_matmul(a, b, fmt, order, rounding, b_format)
                want = scalar_matmul(a, b, fmt, order, rounding, b_format)
                assert_same_bits(got, want, f"{order} {fmt.name} x {b_format.name} {rounding}")


@pytest.mark.parametrize("shape", [(3, 0, 5), (3, 1, 5), (1, 7, 33), (33, 7, 1), (1, 1, 1), (17, 5, 16), (0, 4, 3),
                                   (4, 3, 0)])
def test_odd_shapes_through_linalg_matmul(shape):
    """linalg.matmul's dispatch: empty sums (+0), k = 1 (the rounded product), a single row or
    column (run transposed), n a multiple of the lane count and not."""
    m, k, n = shape
    rng = np.random.default_rng(shape)
    for fmt, order in ((sf.fp32, "sequential"), (sf.fp16, "pairwise"), (sf.bf16, "sequential"), (sf.fp32, "pairwise")):
        a = fmt.from_float(rng.standard_normal((m, k)) * 3.0 ** rng.integers(-40, 40, (m, k)))
        b = fmt.from_float(rng.standard_normal((k, n)) * 3.0 ** rng.integers(-40, 40, (k, n)))
        for rounding in ("rne", "rdn"):
            got = linalg.matmul(a, b, fmt, out_format=sf.fp32, order=order, rounding=rounding)
            assert got.shape == (m, n) and got.dtype == np.uint32
            assert_same_bits(got, scalar_matmul(a, b, fmt, order, rounding), f"{shape} {order} {rounding}")


def test_round_sum_declines_only_what_it_cannot_round():
    """round_sum's own cases: ties, the binade below a power of two, zeros' signs, and what it
    leaves to the scalar path (subnormal and overflowing results, inf, NaN)."""
    from numba import njit

    @njit
    def round32(x, y, mode):
        return matmul_lanes.round_sum(x, y, 8, 23, mode)

    rne, rtz, rup, rdn = (int(sf.Rounding[m.upper()]) for m in ("rne", "rtz", "rup", "rdn"))
    assert round32(1.0, 2.0 ** -24, rne) == (1.0, True)  # a tie, to even
    assert round32(1.0 + 2.0 ** -23, 2.0 ** -24, rne) == (1.0 + 2.0 ** -22, True)  # a tie, to even: up
    assert round32(1.0, 2.0 ** -24 + 2.0 ** -60, rne) == (1.0 + 2.0 ** -23, True)  # the sticky bit decides
    assert round32(1.0, -2.0 ** -60, rtz) == (1.0 - 2.0 ** -24, True)  # s = 1.0, the sum just below it
    assert round32(1.0, -2.0 ** -60, rup) == (1.0, True)
    assert round32(-1.0, 2.0 ** -60, rdn) == (-1.0, True)
    assert round32(-1.0, 2.0 ** -60, rtz) == (-(1.0 - 2.0 ** -24), True)
    for mode, sign in ((rne, 1.0), (rtz, 1.0), (rup, 1.0), (rdn, -1.0)):
        value, ok = round32(3.0, -3.0, mode)
        assert ok and value == 0.0 and math.copysign(1.0, value) == sign
        value, ok = round32(0.0, -0.0, mode)
        assert ok and value == 0.0 and math.copysign(1.0, value) == sign
        value, ok = round32(-0.0, -0.0, mode)
        assert ok and math.copysign(1.0, value) == -1.0
    assert not round32(2.0 ** -127, 0.0, rne)[1]  # subnormal in FP32
    assert round32(2.0 ** -126, 0.0, rne) == (2.0 ** -126, True)
    assert not round32(2.0 ** 128 - 2.0 ** 103, 0.0, rne)[1]  # rounds up to 2**128: overflow
    assert round32(2.0 ** 128 - 2.0 ** 103, 0.0, rtz) == (2.0 ** 128 - 2.0 ** 104, True)
    assert not round32(math.inf, 1.0, rne)[1] and not round32(math.nan, 1.0, rne)[1]
    assert not round32(math.inf, -math.inf, rne)[1]


# --- independent oracles (fractions.Fraction) ------------------------------------------------------

FP32_MAX = Fraction(2 ** 24 - 1, 2 ** 23) * 2 ** 127


def round_fp32(x: Fraction, mode: str) -> Fraction | float:
    """x rounded to FP32 in the mode (rne, rtz, rup, rdn): a Fraction, or +-inf as a float."""
    if x == 0:
        return x
    sign = -1 if x < 0 else 1
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()  # 2**e <= mag < 2**(e+2)
    if Fraction(2) ** (e + 1) <= mag:
        e += 1
    quantum = Fraction(2) ** (max(e, -126) - 23)  # the FP32 spacing there (subnormals: 2**-149)
    low = math.floor(mag / quantum)
    rest = mag / quantum - low
    if mode == "rne":
        up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and low % 2 == 1)
    elif mode == "rtz":
        up = False
    else:
        up = rest > 0 and (mode == "rup") == (sign > 0)
    rounded = (low + up) * quantum
    if rounded > FP32_MAX:
        away = mode == "rne" or (mode == "rup" and sign > 0) or (mode == "rdn" and sign < 0)
        return sign * math.inf if away else sign * FP32_MAX
    return sign * rounded


def fp32_bits(x) -> int:
    """The FP32 encoding of a Fraction exact in FP32 (or of +-inf)."""
    return int(np.float32(float(x)).view(np.uint32))


def pairwise_sum(products: list[Fraction], mode: str):
    """The documented tree (matmul.pairwise_row): k = 2**a + 2**b + ... (a > b > ...), balanced
    trees over those blocks, then S_a + (S_b + (... + S_z)), each + rounded."""
    def balanced(terms):
        if len(terms) == 1:
            return terms[0]
        half = len(terms) // 2
        return round_fp32(balanced(terms[:half]) + balanced(terms[half:]), mode)
    k, blocks, start = len(products), [], 0
    for power in reversed(range(k.bit_length())):
        if k >> power & 1:
            blocks.append(balanced(products[start:start + (1 << power)]))
            start += 1 << power
    total = round_fp32(blocks[-1], mode) if len(blocks) == 1 else blocks[-1]
    for block in reversed(blocks[:-1]):
        total = round_fp32(block + total, mode)
    return total


@pytest.mark.parametrize("mode", ["rne", "rtz", "rup", "rdn"])
def test_fp32_inputs_match_a_fraction_oracle(mode):
    """FP32 inputs (48-bit products, rounded when added: the case the lanes do in float64), small
    shapes, finite values over a range where sums round in every step but stay normal."""
    rng = np.random.default_rng(MODES.index(mode))
    m, k, n = 3, 21, 18
    a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-20, 20, (m, k))).astype(np.float32)
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-20, 20, (k, n))).astype(np.float32)
    a[0, :4] = np.float32(1.0 + 2.0 ** -12)  # products 1 + 2**-11 + 2**-24: FP32 ties
    b[:4, 0] = np.float32(1.0 + 2.0 ** -12)
    a[1, ::3] = 0.0
    a_bits, b_bits = a.view(np.uint32), b.view(np.uint32)
    products = [[[Fraction(float(a[i, t])) * Fraction(float(b[t, j])) for t in range(k)] for j in range(n)]
                for i in range(m)]
    for order in ("sequential", "pairwise"):
        got = linalg.matmul(a_bits, b_bits, sf.fp32, order=order, rounding=mode)
        for i in range(m):
            for j in range(n):
                if order == "sequential":
                    total = Fraction(0)
                    for p in products[i][j]:
                        total = round_fp32(total + p, mode)
                else:
                    total = pairwise_sum(products[i][j], mode)
                assert got[i, j] == fp32_bits(total), (order, mode, i, j)


def test_row_parallel_lanes_give_the_same_bits(monkeypatch):
    """Rows on several threads (each element still computed whole by one): the same bits."""
    rng = np.random.default_rng(9)
    a, b = edge_matrices(rng, sf.fp32, 12, 40, 37)
    with two_threads(monkeypatch):
        # One order: each parallel build compiles for ~15 s on CI's 2 cores, and the row split is the
        # same code for every order (linalg's dispatch); the serial builds are tested in every order.
        for order in ("pairwise",):
            got = linalg.matmul(a, b, sf.fp32, order=order)
            assert_same_bits(got, scalar_matmul(a, b, sf.fp32, order), f"{order} parallel")


@contextlib.contextmanager
def two_threads(monkeypatch):
    """Two threads, every GEMM split over them (skips where Numba can start only one)."""
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba can start one thread only")
    monkeypatch.setattr(sf.threads, "PARALLEL_MIN_MACS", 1)
    before = sf.get_num_threads()
    sf.set_num_threads(2)
    try:
        yield
    finally:
        sf.set_num_threads(before)


@njit(parallel=True)
def _set_every_thread(control, old):
    """MXCSR = ``control`` on the threads of Numba's that run this loop (each keeps it)."""
    for i in prange(old.shape[0]):
        old[i] = environment.swap_mxcsr(control)


@pytest.mark.skipif(not environment.X86, reason="MXCSR (the rounding control, FTZ/DAZ) is x86's")
def test_row_parallel_lanes_on_threads_in_another_environment(monkeypatch):
    """A thread of Numba's keeps the floating-point environment it started with (its creator's) or
    was left in by other code: the lanes set the default one on each row's thread. Before they did,
    rounding down on the threads gave -0 for +0 where a sum cancels."""
    rng = np.random.default_rng(9)
    a, b = edge_matrices(rng, sf.fp32, 12, 40, 37)
    want = scalar_matmul(a, b, sf.fp32, "pairwise")  # (the integer kernel: no host arithmetic)
    with two_threads(monkeypatch):
        old = np.empty(128, np.uint32)
        caller = environment.swap_mxcsr(environment.NEAREST)
        try:
            for name, control in (("down", 0x2000), ("up", 0x4000), ("ftz+daz", 0x8040)):
                _set_every_thread(environment.NEAREST | control, old)
                assert_same_bits(linalg.matmul(a, b, sf.fp32, order="pairwise"), want, f"threads rounding {name}")
        finally:
            _set_every_thread(environment.NEAREST, old)
            environment.swap_mxcsr(caller)
