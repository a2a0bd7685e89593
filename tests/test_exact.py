"""softfloat16.exact against numpy / ml_dtypes hardware rounding (RNE) on many values, and against
cases worked out by hand from IEEE 754 for the directed modes, underflow, overflow and tininess."""
from __future__ import annotations

import math
import operator
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import exact
from softfloat16._verify_reference import ml_dtypes_rounds_correctly
from softfloat16.flags import Flag

IX, UF, OF = Flag.INEXACT, Flag.UNDERFLOW, Flag.OVERFLOW
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")


def wide_values(rng, n: int, low: int, high: int) -> np.ndarray:
    """float64 values of random significands over 2**low .. 2**high, either sign, plus zeros."""
    x = np.ldexp(rng.random(n) + 0.5, rng.integers(low, high, n)) * rng.choice([-1.0, 1.0], n)
    x[:8] = 0.0
    return x


def hardware_flags(x: float, bits: int, fmt: sf.Format) -> Flag:
    """The flags of rounding x to ``bits`` in RNE, from the values alone (tininess before rounding)."""
    value = fmt.value(bits)
    if isinstance(value, float):  # inf
        return OF | IX
    inexact = value != Fraction(x)
    tiny = x != 0 and abs(Fraction(x)) < Fraction(2) ** fmt.emin
    return (IX if inexact else Flag(0)) | (UF if inexact and tiny else Flag(0))


@pytest.mark.parametrize("fmt, dtype, low, high", [
    (sf.fp16, np.float16, -28, 18), (sf.fp32, np.float32, -152, 130),
    (sf.bf16, ml_dtypes.bfloat16, -136, 128), (sf.fp8_e5m2, ml_dtypes.float8_e5m2, -18, 18),
], ids=lambda p: getattr(p, "name", None))
def test_float64_values_round_like_the_hardware(fmt, dtype, low, high):
    rng = np.random.default_rng(fmt.width + fmt.fraction_bits)
    x = wide_values(rng, 3000, low, high)
    if dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e5m2) and not ml_dtypes_rounds_correctly():
        x = x.astype(np.float32).astype(np.float64)  # before 0.7 ml_dtypes rounds float64 via float32
    with np.errstate(over="ignore"):
        expected = x.astype(dtype).view(fmt.dtype)
    for value, want in zip(x.tolist(), expected.tolist()):
        bits, flags = exact.round_fraction(Fraction(value), fmt, negative_zero=math.copysign(1, value) < 0,
                                           tininess="before")
        assert bits == want, (fmt.name, value, hex(bits), hex(want))
        assert flags == hardware_flags(value, bits, fmt), (fmt.name, value, flags)


@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_fp16_arithmetic_rounds_like_float32_then_float16(op):
    # p' = 24 >= 2 * 11 + 2: a float32 result rounded to float16 is the correctly rounded one
    rng = np.random.default_rng(sum(map(ord, op)))
    every = np.arange(1 << 16, dtype=np.uint16)
    finite = every[np.isfinite(every.view(np.float16))]
    a, b = (rng.choice(finite, 4000).view(np.float16) for _ in range(2))
    if op == "div":
        b = b[b != 0]
        a = a[: b.size]
    with np.errstate(all="ignore"):
        wide = {"add": np.add, "mul": np.multiply, "div": np.divide}[op](a.astype(np.float32), b.astype(np.float32))
        expected = wide.astype(np.float16).view(np.uint16)
    for x, y, want in zip(a.tolist(), b.tolist(), expected.tolist()):
        fx, fy = Fraction(x), Fraction(y)
        value = {"add": operator.add, "mul": operator.mul, "div": operator.truediv}[op](fx, fy)
        x_negative, y_negative = math.copysign(1, x) < 0, math.copysign(1, y) < 0
        zero_negative = x_negative and y_negative if op == "add" else x_negative != y_negative
        assert exact.round_fraction(value, sf.fp16, negative_zero=zero_negative)[0] == want, (op, x, y)


def test_sqrt_rounds_like_the_hardware():
    # float64 sqrt rounded to float32 (53 >= 2 * 24 + 2) and float32 sqrt to float16 are correct
    rng = np.random.default_rng(5)
    x32 = np.abs(wide_values(rng, 2000, -149, 128)).astype(np.float32)
    x32 = x32[np.isfinite(x32)]
    expected = np.sqrt(x32.astype(np.float64)).astype(np.float32).view(np.uint32)
    for x, want in zip(x32.tolist(), expected.tolist()):
        assert exact.round_sqrt(Fraction(x), sf.fp32)[0] == want, x
    x16 = np.arange(0x7C00, dtype=np.uint16).view(np.float16)
    expected = np.sqrt(x16.astype(np.float32)).astype(np.float16).view(np.uint16)
    for x, want in zip(x16.tolist(), expected.tolist()):
        assert exact.round_sqrt(Fraction(x), sf.fp16)[0] == want, x


@pytest.mark.parametrize("fmt", [sf.fp8_e5m2, sf.fp16], ids=lambda f: f.name)
def test_every_finite_value_rounds_to_itself(fmt):
    modes = MODES if fmt.width == 8 else ("rne", "rod")
    for bits in range(1 << fmt.width):
        if not fmt.is_finite(bits):
            continue
        value = fmt.value(bits)
        for mode in modes:
            negative = bool(bits & fmt.sign_mask)
            assert exact.round_fraction(value, fmt, mode, negative_zero=negative) == (bits, 0), (hex(bits), mode)


def test_directed_modes_bracket_the_value():
    rng = np.random.default_rng(9)
    for fmt in (sf.fp16, sf.bf16, sf.tf32):
        for _ in range(400):
            value = Fraction(int(rng.integers(1, 2**40)), 2 ** int(rng.integers(0, 150))) * int(rng.choice([-1, 1]))
            got = {mode: exact.round_fraction(value, fmt, mode) for mode in MODES}
            down, up = fmt.value(got["rdn"][0]), fmt.value(got["rup"][0])
            assert down <= value <= up
            assert (down == up) == (got["rne"][1] == 0)
            toward_zero = down if value > 0 else up
            assert fmt.value(got["rtz"][0]) == toward_zero
            for mode in ("rne", "rna"):
                assert fmt.value(got[mode][0]) in (down, up)
            if down != up:
                assert got["rod"][0] & 1 == 1  # the odd neighbour (max finite is odd too)


# --- hand-checked cases (fp16: 11 bits, 2**-14 smallest normal, 2**-24 smallest subnormal) ----------

TIE_ABOVE_ONE = Fraction(1) + Fraction(1, 2**11)            # halfway between 0x3c00 and 0x3c01
ABOVE_MIDPOINT = Fraction(1) + Fraction(3, 2**12)           # between them, nearer 0x3c01
ODD_TIE = Fraction(1) + Fraction(1, 2**10) + Fraction(1, 2**11)  # halfway between 0x3c01 and 0x3c02
HALF_SUBNORMAL = Fraction(1, 2**25)                          # halfway between 0 and 0x0001
ODD_SUBNORMAL_TIE = Fraction(3, 2**25)                       # halfway between 0x0001 and 0x0002

HAND = {  # value: {mode: (bits, flags)}, modes in MODES order
    TIE_ABOVE_ONE: [(0x3C00, IX), (0x3C01, IX), (0x3C00, IX), (0x3C01, IX), (0x3C00, IX), (0x3C01, IX)],
    -TIE_ABOVE_ONE: [(0xBC00, IX), (0xBC01, IX), (0xBC00, IX), (0xBC00, IX), (0xBC01, IX), (0xBC01, IX)],
    ABOVE_MIDPOINT: [(0x3C01, IX), (0x3C01, IX), (0x3C00, IX), (0x3C01, IX), (0x3C00, IX), (0x3C01, IX)],
    ODD_TIE: [(0x3C02, IX), (0x3C02, IX), (0x3C01, IX), (0x3C02, IX), (0x3C01, IX), (0x3C01, IX)],
    # 65520 = max finite + half an ulp: overflows where it rounds up (rounding to 11 bits gives 2**16)
    Fraction(65520): [(0x7C00, OF | IX), (0x7C00, OF | IX), (0x7BFF, IX), (0x7C00, OF | IX), (0x7BFF, IX),
                      (0x7BFF, IX)],
    Fraction(2**16): [(0x7C00, OF | IX), (0x7C00, OF | IX), (0x7BFF, OF | IX), (0x7C00, OF | IX),
                      (0x7BFF, OF | IX), (0x7BFF, OF | IX)],
    -Fraction(2**16): [(0xFC00, OF | IX), (0xFC00, OF | IX), (0xFBFF, OF | IX), (0xFBFF, OF | IX),
                       (0xFC00, OF | IX), (0xFBFF, OF | IX)],
    HALF_SUBNORMAL: [(0x0000, UF | IX), (0x0001, UF | IX), (0x0000, UF | IX), (0x0001, UF | IX),
                     (0x0000, UF | IX), (0x0001, UF | IX)],
    -HALF_SUBNORMAL: [(0x8000, UF | IX), (0x8001, UF | IX), (0x8000, UF | IX), (0x8000, UF | IX),
                      (0x8001, UF | IX), (0x8001, UF | IX)],
    ODD_SUBNORMAL_TIE: [(0x0002, UF | IX), (0x0002, UF | IX), (0x0001, UF | IX), (0x0002, UF | IX),
                        (0x0001, UF | IX), (0x0001, UF | IX)],
    Fraction(1, 2**24): [(0x0001, 0)] * 6,                   # exact subnormals raise nothing
    Fraction(-3, 2**14): [(0x8A00, 0)] * 6,                  # -1.5 * 2**-13
}


@pytest.mark.parametrize("value", list(HAND), ids=str)
def test_hand_checked_cases(value):
    got = [exact.round_fraction(value, sf.fp16, mode) for mode in MODES]
    assert [(hex(b), f) for b, f in got] == [(hex(b), f) for b, f in HAND[value]]


def test_hand_checked_tininess_and_ftz():
    # 2**-14 - 2**-26 rounds (to 11 bits, unbounded) up to 2**-14: tiny before rounding, not after
    near_normal = Fraction(1, 2**14) - Fraction(1, 2**26)
    assert exact.round_fraction(near_normal, "fp16") == (0x0400, IX)
    assert exact.round_fraction(near_normal, "fp16", tininess="before") == (0x0400, UF | IX)
    assert exact.round_fraction(near_normal, "fp16", ftz=True) == (0x0400, IX)
    assert exact.round_fraction(-near_normal, "fp16", ftz=True, tininess="before") == (0x8000, UF | IX)
    # 2**-14 - 2**-25 has 11 bits (tiny after too); the subnormal grid rounds the tie to even 2**-14
    below_normal = Fraction(1, 2**14) - Fraction(1, 2**25)
    for tininess in ("after", "before"):
        assert exact.round_fraction(below_normal, "fp16", tininess=tininess) == (0x0400, UF | IX)
    assert exact.round_fraction(below_normal, "fp16", "rtz") == (0x03FF, UF | IX)
    # ftz flushes exact subnormal results too, and keeps the sign
    assert exact.round_fraction(Fraction(-1, 2**24), "fp16", ftz=True) == (0x8000, UF | IX)
    assert exact.round_fraction(Fraction(1, 2**14), "fp16", ftz=True) == (0x0400, 0)
    # zeros: no flags, the sign asked for
    assert exact.round_fraction(0, "fp16") == (0x0000, 0)
    assert exact.round_fraction(0, "fp32", negative_zero=True) == (0x80000000, 0)


def test_hand_checked_other_formats_and_sqrt():
    assert exact.round_fraction(Fraction(1, 3), sf.bf16) == (0x3EAB, IX)
    assert exact.round_fraction(Fraction(2) ** -133, sf.bf16) == (0x0001, 0)
    assert exact.round_fraction(Fraction(2) ** -134, sf.bf16) == (0x0000, UF | IX)
    assert exact.round_fraction(2**100 + 1, sf.fp32, "rup") == (0x71800001, IX)
    assert exact.round_fraction(61440, sf.fp8_e5m2) == (0x7C, OF | IX)   # 57344 + half an ulp
    assert exact.round_fraction(61440, sf.fp8_e5m2, "rtz") == (0x7B, IX)
    assert exact.round_sqrt(2, sf.fp16) == (0x3DA8, IX)
    assert exact.round_sqrt(2, sf.fp16, "rup") == (0x3DA9, IX)
    assert exact.round_sqrt(Fraction(1, 2**24), sf.fp16) == (0x0C00, 0)       # sqrt(2**-24) = 2**-12
    assert exact.round_sqrt(0, sf.fp16, negative_zero=True) == (0x8000, 0)
    assert exact.round_sqrt(2, sf.fp32) == (0x3FB504F3, IX)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rounding"):
        exact.round_fraction(1, sf.fp16, "nearest-ish")
    with pytest.raises(ValueError, match="tininess"):
        exact.round_fraction(1, sf.fp16, tininess="during")
    with pytest.raises(ValueError, match="format"):
        exact.round_fraction(1, "fp64")
    with pytest.raises(ValueError, match="negative"):
        exact.round_sqrt(-1, sf.fp16)


# --- IEEE P3109 ----------------------------------------------------------------------------------

GFLOAT_MODES = {"rne": "TiesToEven", "rna": "TiesToAway", "rtz": "TowardZero", "rup": "TowardPositive",
                "rdn": "TowardNegative"}


def p3109_points(fmt: sf.Format) -> tuple[list[float], list[float], list[float]]:
    """Non-negative float64 points of a P3109 format: (every finite value, every midpoint between
    neighbours, the one between max finite and the next value of an unbounded exponent included,
    each midpoint nudged down and up)."""
    finite = sorted({fmt.value(b) for b in range(1 << fmt.width) if fmt.is_finite(b)})
    values = [float(v) for v in finite if v >= 0]
    beyond = values[-1] + 2.0 ** (fmt.emax - fmt.fraction_bits)
    midpoints = [(a + b) / 2 for a, b in zip(values, values[1:] + [beyond])]
    nudged = [m * (1 + s * 2.0**-30) for m in midpoints for s in (-1, 1)]
    return values, midpoints + [beyond, 2 * beyond, 2.0**300], nudged


def gfloat_bits(fmt: sf.Format, x: list[float], mode: str, saturate: bool) -> list[int]:
    """gfloat's codes of x rounded to ``fmt`` (its own description of the P3109 format)."""
    from gfloat import encode_ndarray, round_ndarray
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, RoundMode, Signedness
    info = format_info_p3109(fmt.width, fmt.precision, Signedness.Signed if fmt.signed else Signedness.Unsigned,
                             Domain.Extended if fmt.has_inf else Domain.Finite)
    rounded = round_ndarray(info, np.array(x, dtype=np.float64), getattr(RoundMode, GFLOAT_MODES[mode]), saturate)
    return [int(c) for c in encode_ndarray(info, rounded)]


@pytest.mark.parametrize("fmt", sf.formats.p3109_formats(), ids=lambda f: f.name)
def test_p3109_rounding_agrees_with_gfloat(fmt):
    pytest.importorskip("gfloat")
    values, midpoints, nudged = p3109_points(fmt)
    sign = [1.0, -1.0] if fmt.signed else [1.0]  # gfloat has no rule for negatives in unsigned formats
    top = [x for x in values + midpoints + nudged if x >= values[-1] / 2]   # where saturation can matter
    cases = [("rne", False, values + midpoints + nudged), ("rna", False, midpoints)]
    cases += [(mode, False, values + midpoints) for mode in ("rtz", "rup", "rdn")]
    cases += [(mode, True, top) for mode in GFLOAT_MODES]
    wrong = []
    for mode, saturate, points in cases:
        x = [s * p for s in sign for p in points]
        want = gfloat_bits(fmt, x, mode, saturate)
        got = [exact.round_fraction(Fraction(v), fmt, mode, saturate=saturate)[0] for v in x]
        wrong += [(mode, saturate, v, hex(g), hex(w)) for v, g, w in zip(x, got, want) if g != w]
    assert not wrong, wrong[:10]


def test_p3109_hand_checked():
    k8p1se, k8p1sf, k8p3se, k8p3sf = (sf.format(f"p3109_k8p{p}s{d}") for p in (1, 3) for d in "ef")
    k8p3ue, k8p8uf = sf.format("p3109_k8p3ue"), sf.format("p3109_k8p8uf")
    # precision 1: a tie 1.5 * 2**k goes to the even code (exponent field), E8M0's tie goes up
    assert [exact.round_fraction(x, k8p1se)[0] for x in (3, 6, 12)] == [0x42, 0x42, 0x44]
    assert exact.round_fraction(3, "e8m0")[0] == 0x81
    assert exact.round_fraction(3, k8p1se, "rna") == (0x42, IX)
    # ...also the tie between max finite and the overflow: max finite 0x7e (even) stays, 0x7f (odd) goes
    assert exact.round_fraction(3 * 2**61, k8p1se) == (0x7E, IX)
    assert exact.round_fraction(3 * 2**62, k8p1sf) == (0x80, OF | IX)
    # round to odd with one significant bit truncates, and rounds (0, 2**emin) to 2**emin
    assert exact.round_fraction(Fraction(7, 2), k8p1se, "rod") == (0x41, IX)
    assert exact.round_fraction(Fraction(1, 2**70), k8p1se, "rod") == (0x01, UF | IX)
    # no -0 (0x80 is the NaN): zeros and negative values rounded to zero are +0
    assert exact.round_fraction(0, k8p3se, negative_zero=True) == (0x00, 0)
    assert exact.round_fraction(Fraction(-1, 2**40), k8p3se, "rdn") == (0x81, UF | IX)
    assert exact.round_fraction(Fraction(-1, 2**40), k8p3se, "rup") == (0x00, UF | IX)
    # overflow: +-inf in the extended domain, the NaN in the finite one; max finite with saturate
    # or when the mode rounds toward zero
    assert exact.round_fraction(2**17, k8p3se) == (0x7F, OF | IX)
    assert exact.round_fraction(-(2**17), k8p3se) == (0xFF, OF | IX)
    assert exact.round_fraction(2**17, k8p3sf) == (0x80, OF | IX)
    assert exact.round_fraction(-(2**17), k8p3sf, saturate=True) == (0xFF, OF | IX)
    assert exact.round_fraction(2**17, k8p3se, "rtz") == (0x7E, OF | IX)
    assert exact.round_fraction(2**17, k8p8uf) == (0xFF, OF | IX)   # the unsigned NaN, at the top
    # unsigned: a negative value (also one that would round to zero) is the NaN with INVALID,
    # whatever the mode and saturate; -0 is +0
    for mode in MODES:
        for saturate in (False, True):
            for value in (-1, Fraction(-1, 2**300), -(2**300)):
                assert exact.round_fraction(value, k8p3ue, mode, saturate=saturate) == (0xFF, Flag.INVALID)
    assert exact.round_fraction(0, k8p3ue, negative_zero=True) == (0x00, 0)
    assert exact.round_fraction(Fraction(1, 2**300), k8p3ue) == (0x00, UF | IX)   # a zero and subnormals
    assert exact.round_fraction(Fraction(1, 2**7), k8p8uf) == (0x01, 0)    # the smallest subnormal, 2**-7


@pytest.mark.parametrize("name", ["p3109_k8p1se", "p3109_k8p3sf", "p3109_k8p4ue", "p3109_k6p6uf"])
def test_p3109_flags_agree_with_the_kernels(name):
    """The exact reference and the kernels' conversion from FP32: bits and flags, every option."""
    fmt = sf.format(name)
    values, midpoints, nudged = p3109_points(fmt)
    x = np.array(values + midpoints[:-1] + nudged, dtype=np.float32)
    x = np.concatenate([x, -x]) if fmt.signed else x
    for mode in MODES:
        for saturate, ftz, tininess in ((False, False, "after"), (True, False, "before"), (False, True, "before")):
            bits, flags = sf.convert(x.view(np.uint32), src=sf.fp32, dst=fmt, rounding=mode, saturate=saturate,
                                     ftz=ftz, tininess=tininess, flags=True)
            for v, b, f in zip(x.tolist(), bits.tolist(), flags.tolist()):
                want = exact.round_fraction(Fraction(v), fmt, mode, ftz=ftz, tininess=tininess, saturate=saturate)
                assert (b, f) == want, (name, mode, saturate, ftz, tininess, v)


@pytest.mark.parametrize("name", ["p3109_k8p1se", "p3109_k8p2sf", "p3109_k8p5ue", "p3109_k7p7uf"])
def test_p3109_verify_reference_agrees_with_exact(name):
    """The verification's float64 sign loop (softfloat16._verify_reference) against Fractions, on
    every pair of finite operands (a sample, all modes, both saturation settings)."""
    from softfloat16 import _verify_reference as reference
    fmt = sf.format(name)
    values = [fmt.value(b) for b in range(1 << fmt.width) if fmt.is_finite(b)]
    rng = np.random.default_rng(fmt.width * 10 + fmt.precision)
    a, b = (rng.choice(len(values), 400) for _ in range(2))
    va, vb = (np.array([float(values[i]) for i in index]) for index in (a, b))
    for op, exact_op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul)):
        for mode in MODES:
            for saturate in (False, True):
                out, _ = reference.exact_round(fmt, op, mode, [va, vb], saturate)
                for i in range(len(va)):
                    value = exact_op(values[a[i]], values[b[i]])
                    if value != 0:  # an exact zero's sign is IEEE's rule, not the rational's
                        want = exact.round_fraction(value, fmt, mode, saturate=saturate)[0]
                        assert int(out[i]) == want, (op, mode, saturate, values[a[i]], values[b[i]])
