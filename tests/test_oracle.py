"""Self-tests for the exact-rational oracle (tests/oracle.py).

The oracle is checked against
* hardware / library rounding (numpy float16/float32, ml_dtypes bfloat16 and
  float8_e5m2), computing in a wider format first: with p' >= 2p + 2 bits the
  double rounding is innocuous for +, -, *, /, sqrt, so the reference is the
  correctly rounded result;
* for the encodings of docs/formats-spec.md (FP8 E4M3FN/FNUZ, FP6, FP4,
  E8M0): ml_dtypes' decoding, conversions and float32-computed arithmetic,
  torch's float8 conversions, and an enumeration of every value of a format
  (the rounding rules restated as "pick a neighbour"); every place where
  ml_dtypes or torch differ from the spec is asserted as a named exception;
* an independent bit-trick rounding (fp32 -> bf16 / tf32);
* rounding properties (direction, bracketing by neighbours, ties) for every
  mode, evaluated with exact rationals computed here, not by the oracle;
* hand-derived cases written down from IEEE 754 facts.
"""

import bisect
import math
import random
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import oracle
from oracle import (
    ALL_FORMATS, DIVIDE_BY_ZERO, FORMATS, INEXACT, INVALID, OVERFLOW, ROUNDINGS, SMALL_FORMATS, UNDERFLOW,
    decode, encode_round, ref_convert, ref_from_float, ref_op, to_fraction,
)
from softfloat16._verify_reference import ml_dtypes_rounds_correctly

BIN_OPS = ("add", "sub", "mul", "div")


# ---------------------------------------------------------------------------
# Independent helpers (float / integer based, not using the oracle)
# ---------------------------------------------------------------------------

def params(fmt):
    e, f = FORMATS[fmt]
    bias = 2 ** (e - 1) - 1
    return dict(e=e, f=f, w=1 + e + f, bias=bias, emin=1 - bias, emax=bias,
                p=f + 1)


def tvalue(bits, fmt):
    """Exact value of a finite pattern, by the textbook formula.  The
    all-ones exponent with zero fraction yields 2**(emax+1), which serves as
    the 'virtual' neighbour above the largest finite value."""
    P = params(fmt)
    f, w = P["f"], P["w"]
    sign = -1 if bits >> (w - 1) else 1
    ex = (bits >> f) & (2 ** P["e"] - 1)
    frac = bits & (2 ** f - 1)
    if ex == 0:
        mag = Fraction(math.ldexp(frac, P["emin"] - f))
    else:
        mag = Fraction(math.ldexp(2 ** f + frac, ex - P["bias"] - f))
    return sign * mag


def is_nan_bits(bits, fmt):
    P = params(fmt)
    mag = bits & (2 ** (P["w"] - 1) - 1)
    return mag > (2 ** P["e"] - 1) << P["f"]


def is_inf_bits(bits, fmt):
    P = params(fmt)
    return bits & (2 ** (P["w"] - 1) - 1) == (2 ** P["e"] - 1) << P["f"]


def neighbours(bits, fmt):
    """(lower, upper) representable values adjacent to a finite pattern
    (upper neighbour of +max is the virtual 2**(emax+1))."""
    w = params(fmt)["w"]
    sign = bits >> (w - 1)
    mag = bits & (2 ** (w - 1) - 1)
    if mag == 0:
        d = tvalue(1, fmt)
        return -d, d
    smaller, bigger = tvalue(mag - 1, fmt), tvalue(mag + 1, fmt)
    return (-bigger, -smaller) if sign else (smaller, bigger)


def f16_bits(x):
    return int(np.asarray(x, dtype=np.float16).view(np.uint16))


def f32_bits(x):
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def random_finite(rng, fmt, n, edges=()):
    """n random finite (non-NaN, non-inf) patterns plus the edge list."""
    w = params(fmt)["w"]
    out = list(edges)
    while len(out) < n + len(edges):
        b = rng.getrandbits(w)
        if not is_nan_bits(b, fmt) and not is_inf_bits(b, fmt):
            out.append(b)
    return out


def edge_patterns(fmt):
    P = params(fmt)
    f, w = P["f"], P["w"]
    one = P["bias"] << f
    mags = [0, 1, 2, 3, 2 ** f - 1, 2 ** f, 2 ** f + 1, one - 1, one, one + 1,
            (one + (1 << f)), ((2 ** P["e"] - 1) << f) - 2,
            ((2 ** P["e"] - 1) << f) - 1, (2 ** P["e"] - 1) << f]
    return sorted({m | s for m in mags for s in (0, 1 << (w - 1))})


def operand_pairs(rng, fmt, n):
    """Edge x edge pairs, random pairs and near-equal pairs (cancellation)."""
    edges = edge_patterns(fmt)
    pairs = [(a, b) for a in edges for b in edges]
    w = params(fmt)["w"]
    while len(pairs) < len(edges) ** 2 + n:
        a = rng.getrandbits(w)
        if rng.random() < 0.3:  # close magnitudes, random signs
            b = (a ^ (rng.getrandbits(1) << (w - 1))) + rng.randint(-3, 3)
            b %= 2 ** w
        else:
            b = rng.getrandbits(w)
        if not any(is_nan_bits(x, fmt) for x in (a, b)):
            pairs.append((a, b))
    return pairs


# ---------------------------------------------------------------------------
# decode / to_fraction
# ---------------------------------------------------------------------------

def test_decode_fp16_exhaustive_vs_numpy():
    allbits = np.arange(2 ** 16, dtype=np.uint16)
    vals = allbits.view(np.float16).astype(np.float64)
    for b in range(2 ** 16):
        kind, sign, value = decode(b, "fp16")
        x = vals[b]
        assert sign == b >> 15
        if math.isnan(x):
            assert kind == ("qnan" if b & 0x200 else "snan")
            assert value is None
        elif math.isinf(x):
            assert kind == "inf" and value is None
        else:
            assert value == Fraction(float(x))
            assert to_fraction(b, "fp16") == value
            exp_field = (b >> 10) & 0x1F
            expect = ("zero" if x == 0 else
                      "subnormal" if exp_field == 0 else "normal")
            assert kind == expect


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_decode_kinds_and_values(fmt):
    P = params(fmt)
    f, w = P["f"], P["w"]
    inf = (2 ** P["e"] - 1) << f
    sb = 1 << (w - 1)
    assert decode(0, fmt) == ("zero", 0, 0)
    assert decode(sb, fmt)[:2] == ("zero", 1)
    assert decode(1, fmt) == ("subnormal", 0, Fraction(2) ** (P["emin"] - f))
    assert decode(1 << f, fmt) == ("normal", 0, Fraction(2) ** P["emin"])
    assert decode(inf - 1, fmt)[2] == (2 - Fraction(2) ** -f) * 2 ** P["emax"]
    assert decode(inf | sb, fmt) == ("inf", 1, None)
    assert decode(inf | (1 << (f - 1)), fmt)[0] == "qnan"
    assert decode(inf | 1, fmt)[0] == ("snan" if f > 1 else "qnan")
    assert decode(P["bias"] << f, fmt)[2] == 1
    with pytest.raises(ValueError):
        to_fraction(inf, fmt)
    with pytest.raises(ValueError):
        decode(1 << w, fmt)


def test_decode_fp32_random_vs_numpy():
    rng = random.Random(1)
    for _ in range(3000):
        b = rng.getrandbits(32)
        x = float(np.uint32(b).view(np.float32))
        kind, sign, value = decode(b, "fp32")
        if math.isnan(x):
            assert kind in ("qnan", "snan")
        elif math.isinf(x):
            assert kind == "inf"
        else:
            assert value == Fraction(x)


# ---------------------------------------------------------------------------
# RNE arithmetic vs hardware
# ---------------------------------------------------------------------------

def _np_binop(op, x, y):
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply,
            "div": np.divide}[op](x, y)


def _check_against(fmt, op, pairs_or_ops, got_bits, nan_check):
    """got_bits[i] is the reference pattern for case i."""
    for args, ref in zip(pairs_or_ops, got_bits):
        bits, flags = ref_op(op, fmt, *args)
        ref = int(ref)
        if nan_check(ref):
            assert is_nan_bits(bits, fmt), (op, [hex(a) for a in args])
        else:
            assert bits == ref, (op, [hex(a) for a in args], hex(bits), hex(ref))


def test_fp16_rne_vs_numpy():
    rng = random.Random(16)
    pairs = operand_pairs(rng, "fp16", 2500)
    a = np.array([p[0] for p in pairs], dtype=np.uint16).view(np.float16)
    b = np.array([p[1] for p in pairs], dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        for op in BIN_OPS:
            ref = _np_binop(op, a.astype(np.float32), b.astype(np.float32))
            ref = ref.astype(np.float16).view(np.uint16)
            _check_against("fp16", op, pairs, ref,
                           lambda r: is_nan_bits(r, "fp16"))
        ref = np.sqrt(a.astype(np.float32)).astype(np.float16).view(np.uint16)
        _check_against("fp16", "sqrt", [(p[0],) for p in pairs], ref,
                       lambda r: is_nan_bits(r, "fp16"))
        for op, fn in (("eq", np.equal), ("lt", np.less), ("le", np.less_equal)):
            ref = fn(a, b)
            for (x, y), r in zip(pairs, ref):
                assert ref_op(op, "fp16", x, y) == (bool(r), 0)


def test_fp32_rne_vs_numpy():
    rng = random.Random(32)
    pairs = operand_pairs(rng, "fp32", 2000)
    a = np.array([p[0] for p in pairs], dtype=np.uint32).view(np.float32)
    b = np.array([p[1] for p in pairs], dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        for op in BIN_OPS:
            ref = _np_binop(op, a.astype(np.float64), b.astype(np.float64))
            ref = ref.astype(np.float32).view(np.uint32)
            _check_against("fp32", op, pairs, ref,
                           lambda r: is_nan_bits(r, "fp32"))
        ref = np.sqrt(a.astype(np.float64)).astype(np.float32).view(np.uint32)
        _check_against("fp32", "sqrt", [(p[0],) for p in pairs], ref,
                       lambda r: is_nan_bits(r, "fp32"))
        # fma: a*b is exact in float64 (48 bits); the sum is then rounded
        # once to float64 and again to float32.  Compare only where the
        # float64 sum is exact (checked with Fractions), so it's one rounding.
        cs = random_finite(rng, "fp32", len(pairs))
        checked = 0
        for (x, y), z in zip(pairs, cs):
            fx, fy, fz = (float(np.uint32(v).view(np.float32)) for v in (x, y, z))
            if not all(map(math.isfinite, (fx, fy, fz))):
                continue
            s = fx * fy + fz
            if not math.isfinite(s) or Fraction(s) != (
                    Fraction(fx) * Fraction(fy) + Fraction(fz)):
                continue
            ref = f32_bits(np.float32(s))
            bits, _ = ref_op("fma", "fp32", x, y, z)
            if s == 0:
                continue  # zero signs are covered by the hand cases
            assert bits == ref, (hex(x), hex(y), hex(z))
            checked += 1
        assert checked > 100


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fp16_from_float_and_convert_vs_numpy():
    rng = random.Random(3)
    # every fp16 pattern widens exactly to fp32 and back
    for b in range(2 ** 16):
        if is_nan_bits(b, "fp16"):
            continue
        wide, flags = ref_convert(b, "fp16", "fp32")
        assert flags == 0
        assert wide == f32_bits(np.uint16(b).view(np.float16).astype(np.float32))
        assert ref_convert(wide, "fp32", "fp16") == (b, 0)
    # random float32 / float64 narrowing
    for _ in range(3000):
        b32 = rng.getrandbits(32)
        x32 = np.uint32(b32).view(np.float32)
        bits, _ = ref_convert(b32, "fp32", "fp16")
        ref = f16_bits(x32.astype(np.float16))
        if is_nan_bits(ref, "fp16"):
            assert is_nan_bits(bits, "fp16")
        else:
            assert bits == ref, hex(b32)
    for _ in range(3000):
        # float64 values concentrated around the fp16 range
        x = math.ldexp(rng.random() + 0.5, rng.randint(-30, 18))
        x = -x if rng.random() < 0.5 else x
        assert ref_from_float(x, "fp16")[0] == f16_bits(np.float16(x)), x
        assert ref_from_float(x, "fp32")[0] == f32_bits(np.float32(x)), x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_bf16_vs_ml_dtypes():
    rng = random.Random(8)
    bf = ml_dtypes.bfloat16
    # conversions from float32
    b32 = np.array([rng.getrandbits(32) for _ in range(4000)]
                   + [0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                      0x7F7F8000, 0x7F7F7FFF, 0x3F808000, 0x3F818000,
                      0x00008000, 0x00018000], dtype=np.uint32)
    ref = b32.view(np.float32).astype(bf).view(np.uint16)
    for x, r in zip(b32.tolist(), ref.tolist()):
        bits, _ = ref_convert(x, "fp32", "bf16")
        if is_nan_bits(r, "bf16"):
            assert is_nan_bits(bits, "bf16")
        else:
            assert bits == r, hex(x)
    # arithmetic through float32 (24 >= 2*8+2 bits)
    pairs = operand_pairs(rng, "bf16", 2000)
    a = np.array([p[0] for p in pairs], dtype=np.uint16).view(bf)
    b = np.array([p[1] for p in pairs], dtype=np.uint16).view(bf)
    with np.errstate(all="ignore"):
        for op in BIN_OPS:
            r = _np_binop(op, a.astype(np.float32), b.astype(np.float32))
            r = r.astype(bf).view(np.uint16)
            _check_against("bf16", op, pairs, r,
                           lambda v: is_nan_bits(v, "bf16"))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fp8_e5m2_vs_ml_dtypes():
    f8 = ml_dtypes.float8_e5m2
    rng = random.Random(85)
    b32 = np.array([rng.getrandbits(32) for _ in range(2000)], dtype=np.uint32)
    # also values near the fp8 range
    extra = [math.ldexp(rng.random() + 0.5, rng.randint(-20, 17))
             for _ in range(2000)]
    b32 = np.concatenate([b32, np.array(extra, np.float32).view(np.uint32)])
    ref = b32.view(np.float32).astype(f8).view(np.uint8)
    for x, r in zip(b32.tolist(), ref.tolist()):
        bits, _ = ref_convert(x, "fp32", "fp8_e5m2")
        if is_nan_bits(r, "fp8_e5m2"):
            assert is_nan_bits(bits, "fp8_e5m2")
        else:
            assert bits == r, hex(x)
    # all pairs for mul, random pairs for the rest
    allb = [b for b in range(256) if not is_nan_bits(b, "fp8_e5m2")]
    pairs = [(x, y) for x in allb for y in allb]
    a = np.array([p[0] for p in pairs], np.uint8).view(f8).astype(np.float32)
    b = np.array([p[1] for p in pairs], np.uint8).view(f8).astype(np.float32)
    with np.errstate(all="ignore"):
        for op in BIN_OPS:
            idx = (range(len(pairs)) if op == "mul"
                   else rng.sample(range(len(pairs)), 3000))
            idx = list(idx)
            r = _np_binop(op, a[idx], b[idx]).astype(f8).view(np.uint8)
            _check_against("fp8_e5m2", op, [pairs[i] for i in idx], r,
                           lambda v: is_nan_bits(v, "fp8_e5m2"))


def _bit_trick_rne(b32, drop):
    """Round an fp32 pattern to a narrower format with the same exponent
    width by dropping `drop` fraction bits (RNE, integer carry into the
    exponent handles binade changes and overflow to inf)."""
    sign = b32 >> 31
    mag = b32 & 0x7FFFFFFF
    half = 1 << (drop - 1)
    mag = (mag + half - 1 + ((mag >> drop) & 1)) >> drop
    return (sign << (31 - drop)) | mag


@pytest.mark.parametrize("fmt,drop", [("bf16", 16), ("tf32", 13)])
def test_narrowing_vs_bit_trick(fmt, drop):
    rng = random.Random(drop)
    for _ in range(4000):
        b = rng.getrandbits(32)
        if is_nan_bits(b, "fp32"):
            continue
        got, flags = ref_convert(b, "fp32", fmt)
        assert got == _bit_trick_rne(b, drop), hex(b)
        assert bool(flags & INEXACT) == bool(b & ((1 << drop) - 1))
        # widening back is exact
        back, flags = ref_convert(got, fmt, "fp32")
        if not is_inf_bits(got, fmt):
            assert flags == 0 and back == (got << drop)


def test_tf32_arith_via_fp32_bit_trick():
    rng = random.Random(19)
    for a, b in operand_pairs(rng, "tf32", 1500):
        x = np.uint32(a << 13).view(np.float32)
        y = np.uint32(b << 13).view(np.float32)
        with np.errstate(all="ignore"):
            for op in ("add", "mul"):
                r = f32_bits(_np_binop(op, x, y))
                got, _ = ref_op(op, "tf32", a, b)
                if is_nan_bits(r, "fp32"):
                    assert is_nan_bits(got, "tf32")
                else:
                    assert got == _bit_trick_rne(r, 13), (op, hex(a), hex(b))


# ---------------------------------------------------------------------------
# Rounding-mode properties (all modes, exact values computed here)
# ---------------------------------------------------------------------------

def check_rounding(fmt, mode, cmp, bits, flags, what):
    """Check that `bits` is the correctly rounded result in `mode`.

    cmp(t) returns the sign of (t - v) for the exact (nonzero) result v.
    """
    P = params(fmt)
    f, w = P["f"], P["w"]
    maxf = (2 ** P["p"] - 1) * Fraction(2) ** (P["emax"] - f)
    big = Fraction(2) ** (P["emax"] + 1)
    tiny_bound = Fraction(2) ** P["emin"]
    v_pos = cmp(0) < 0
    sign = bits >> (w - 1)
    assert not is_nan_bits(bits, fmt), what
    assert sign == (0 if v_pos else 1), what   # rounding keeps the sign

    def abs_cmp(t):  # sign of (t - |v|) for t >= 0
        return cmp(t) if v_pos else -cmp(-t)

    if is_inf_bits(bits, fmt):
        assert flags == OVERFLOW | INEXACT, what
        if mode in ("rne", "rna"):
            assert abs_cmp(maxf + (big - maxf) / 2) <= 0, what
        elif (mode, v_pos) in (("rup", True), ("rdn", False)):
            assert abs_cmp(maxf) < 0, what
        else:
            raise AssertionError(f"{what}: {mode} must not overflow to inf")
        return

    r = tvalue(bits, fmt)
    c = cmp(r)
    if c == 0:
        assert flags == 0, what
        return
    assert flags & INEXACT, what
    # directions
    if mode == "rup":
        assert c > 0, what
    if mode == "rdn":
        assert c < 0, what
    if mode == "rtz":
        assert abs_cmp(abs(r)) < 0, what
    if abs_cmp(big) <= 0:  # overflow to the largest finite value
        assert (mode in ("rtz", "rod")
                or (mode, v_pos) in (("rup", False), ("rdn", True))), what
        assert abs(r) == maxf and flags & OVERFLOW, what
        return
    assert not flags & OVERFLOW, what
    # the result and its neighbour on the other side bracket v
    lo, hi = neighbours(bits, fmt)
    assert cmp(lo) < 0 < cmp(hi), what
    other = hi if c < 0 else lo
    mid = (r + other) / 2
    if mode in ("rne", "rna"):
        cm = cmp(mid)
        assert cm == 0 or (cm > 0) == (c < 0), what  # v on r's side of mid
        if cm == 0:
            if mode == "rne":
                assert bits & 1 == 0, what
            else:
                assert abs(r) > abs(other), what
    if mode == "rod":
        assert bits & 1 == 1, what
    # underflow flag: only for tiny values; always for inexact tiny results
    if flags & UNDERFLOW:
        assert abs_cmp(tiny_bound) > 0, what
    if abs(r) < tiny_bound:
        assert flags & UNDERFLOW, what


def rational_cmp(v):
    return lambda t: (t > v) - (t < v)


def sqrt_cmp(x):
    def cmp(t):
        if t < 0:
            return -1
        return (t * t > x) - (t * t < x)
    return cmp


def exact(op, vals):
    a = vals[0]
    if op == "add":
        return a + vals[1]
    if op == "sub":
        return a - vals[1]
    if op == "mul":
        return a * vals[1]
    if op == "div":
        return a / vals[1]
    if op == "fma":
        return a * vals[1] + vals[2]
    raise ValueError(op)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e5m2", "fp32"])
def test_directed_mode_properties(fmt):
    rng = random.Random(hash(fmt) & 0xFFFF)
    n = 500 if fmt != "fp8_e5m2" else 1500
    pats = random_finite(rng, fmt, n, edge_patterns(fmt))
    pats = [b for b in pats if not is_inf_bits(b, fmt)]
    checked = 0
    for _ in range(n):
        op = rng.choice(("add", "sub", "mul", "div", "fma", "sqrt"))
        arity = {"fma": 3, "sqrt": 1}.get(op, 2)
        args = [rng.choice(pats) for _ in range(arity)]
        vals = [tvalue(b, fmt) for b in args]
        if op == "sqrt":
            args[0] &= ~(1 << (params(fmt)["w"] - 1))  # make it non-negative
            x = tvalue(args[0], fmt)
            if x == 0:
                continue
            cmp = sqrt_cmp(x)
        else:
            if op == "div" and vals[1] == 0:
                continue
            v = exact(op, vals)
            if v == 0:
                continue
            cmp = rational_cmp(v)
        results = {}
        for mode in ROUNDINGS:
            bits, flags = ref_op(op, fmt, *args, rounding=mode)
            results[mode] = (bits, flags)
            check_rounding(fmt, mode, cmp, bits, flags,
                           (fmt, op, mode, [hex(a) for a in args]))
        # rne and rna differ only on exact ties
        (b1, _), (b2, _) = results["rne"], results["rna"]
        if b1 != b2:
            va = tvalue(b1, fmt) if not is_inf_bits(b1, fmt) else None
            vb = tvalue(b2, fmt) if not is_inf_bits(b2, fmt) else None
            if va is None or vb is None:  # tie at the overflow boundary
                finite = va if vb is None else vb
                vb_virtual = (Fraction(2) ** (params(fmt)["emax"] + 1)
                              * (1 if finite > 0 else -1))
                assert cmp((finite + vb_virtual) / 2) == 0
            else:
                assert cmp((va + vb) / 2) == 0
        checked += 1
    assert checked > n // 2


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("tininess", ["after", "before"])
def test_encode_round_arbitrary_rationals(fmt, tininess):
    """Non-dyadic rationals (never ties) and dyadic near-grid values,
    across the whole exponent range including subnormals and overflow."""
    rng = random.Random(7 + len(fmt))
    P = params(fmt)
    for _ in range(300):
        k = rng.randint(P["emin"] - P["f"] - 3, P["emax"] + 2)
        if rng.random() < 0.5:
            v = Fraction(rng.randint(1, 10 ** 6), rng.randint(1, 10 ** 6))
            v *= Fraction(2) ** k / (abs(v) + 1) * 2
        else:  # dyadic with a few bits beyond precision (ties happen)
            v = Fraction(rng.randint(1, 2 ** (P["p"] + 2))) * (
                Fraction(2) ** (k - P["p"] - 1))
        if rng.random() < 0.5:
            v = -v
        for mode in ROUNDINGS:
            bits, flags = encode_round(v, 1 if v < 0 else 0, fmt, mode,
                                       tininess=tininess)
            check_rounding(fmt, mode, rational_cmp(v), bits, flags,
                           (fmt, mode, v))


def test_tininess_after_vs_before_properties():
    """'before' flags exactly the inexact results with |v| < 2**emin;
    'after' differs only for values that round to +-2**emin."""
    rng = random.Random(5)
    fmt = "fp16"
    emin_val = Fraction(2) ** -14
    for _ in range(2000):
        v = Fraction(rng.randint(1, 2 ** 16), 2 ** 16) * 2 * emin_val
        for mode in ROUNDINGS:
            bb, fb = encode_round(v, 0, fmt, mode, tininess="before")
            ba, fa = encode_round(v, 0, fmt, mode, tininess="after")
            assert ba == bb
            assert fb & ~UNDERFLOW == fa & ~UNDERFLOW
            inexact = tvalue(bb, fmt) != v
            assert bool(fb & UNDERFLOW) == (inexact and v < emin_val)
            if fa != fb:
                assert fb & UNDERFLOW and bb == 0x0400  # rounded to 2**emin


# ---------------------------------------------------------------------------
# Hand-derived cases (expected bits written from IEEE 754 facts)
# ---------------------------------------------------------------------------

# fp16 constants
ONE, TWO, HALF = 0x3C00, 0x4000, 0x3800
MAXH, INFH, NINFH, MINSUB, MINNORM = 0x7BFF, 0x7C00, 0xFC00, 0x0001, 0x0400
PZ, NZ = 0x0000, 0x8000


def test_hand_overflow_fp16():
    sixteen = 0x4C00
    assert ref_op("add", "fp16", MAXH, sixteen) == (INFH, OVERFLOW | INEXACT)
    assert ref_op("add", "fp16", MAXH, sixteen, rounding="rtz") == (MAXH, INEXACT)
    assert ref_op("add", "fp16", MAXH, sixteen, rounding="rna") == (INFH, OVERFLOW | INEXACT)
    # 65504 + 8 = 65512 < 65520: stays at max in rne, no overflow
    assert ref_op("add", "fp16", MAXH, 0x4800) == (MAXH, INEXACT)
    # 65504 * 2 = 131008: overflows in every mode
    exp = {"rne": INFH, "rna": INFH, "rtz": MAXH, "rup": INFH, "rdn": MAXH,
           "rod": MAXH}
    for mode, want in exp.items():
        assert ref_op("mul", "fp16", MAXH, TWO, rounding=mode) == (want, OVERFLOW | INEXACT)
    expn = {"rne": NINFH, "rna": NINFH, "rtz": 0xFBFF, "rup": 0xFBFF,
            "rdn": NINFH, "rod": 0xFBFF}
    for mode, want in expn.items():
        assert ref_op("mul", "fp16", MAXH | 0x8000, TWO, rounding=mode) == (want, OVERFLOW | INEXACT)
    # rup of 65504 + tiny goes to inf, rod stays at max without overflow
    assert ref_op("add", "fp16", MAXH, MINSUB, rounding="rup") == (INFH, OVERFLOW | INEXACT)
    assert ref_op("add", "fp16", MAXH, MINSUB, rounding="rod") == (MAXH, INEXACT)


def test_hand_ties_fp16():
    two_m11 = 0x1000                                  # 2**-11
    assert ref_op("add", "fp16", ONE, two_m11) == (ONE, INEXACT)  # tie -> even
    assert ref_op("add", "fp16", ONE, two_m11, rounding="rna") == (0x3C01, INEXACT)
    assert ref_op("add", "fp16", ONE, two_m11, rounding="rod") == (0x3C01, INEXACT)
    assert ref_op("add", "fp16", ONE, two_m11, rounding="rup") == (0x3C01, INEXACT)
    assert ref_op("add", "fp16", ONE, two_m11, rounding="rdn") == (ONE, INEXACT)
    # 1 + 2**-10 + 2**-11 = tie between 0x3C01 and 0x3C02 -> even 0x3C02
    assert ref_op("add", "fp16", 0x3C01, two_m11) == (0x3C02, INEXACT)
    assert ref_op("add", "fp16", 0x3C01, two_m11, rounding="rtz") == (0x3C01, INEXACT)
    # -(1 + 2**-11): rup goes toward zero, rdn away
    assert ref_op("sub", "fp16", ONE | 0x8000, two_m11, rounding="rup") == (0xBC00, INEXACT)
    assert ref_op("sub", "fp16", ONE | 0x8000, two_m11, rounding="rdn") == (0xBC01, INEXACT)
    # exact: 1 + 2**-10
    assert ref_op("add", "fp16", ONE, 0x1400) == (0x3C01, 0)


def test_hand_underflow_fp16():
    # 2**-24 * 0.5 = 2**-25: tie between 0 and 2**-24 -> 0 (even)
    assert ref_op("mul", "fp16", MINSUB, HALF) == (PZ, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", MINSUB | 0x8000, HALF) == (NZ, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", MINSUB, HALF, rounding="rna") == (MINSUB, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", MINSUB, HALF, rounding="rup") == (MINSUB, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", MINSUB, HALF, rounding="rod") == (MINSUB, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", MINSUB, HALF, rounding="rtz") == (PZ, UNDERFLOW | INEXACT)
    # 3 * 2**-25 = 1.5 * 2**-24 -> 2 * 2**-24 (tie to even)
    assert ref_op("mul", "fp16", 0x0003, HALF) == (0x0002, UNDERFLOW | INEXACT)
    # exact subnormal result: no flags
    assert ref_op("mul", "fp16", 0x0002, HALF) == (MINSUB, 0)
    assert ref_op("sub", "fp16", MINNORM, MINSUB) == (0x03FF, 0)
    # ...but FTZ flushes it with UNDERFLOW|INEXACT
    assert ref_op("mul", "fp16", 0x0002, HALF, ftz=True) == (PZ, UNDERFLOW | INEXACT)
    assert ref_op("sub", "fp16", MINNORM, MINSUB, ftz=True) == (PZ, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp16", 0x8002, HALF, ftz=True) == (NZ, UNDERFLOW | INEXACT)
    # FTZ does not touch exact zeros or normal results
    assert ref_op("sub", "fp16", MINSUB, MINSUB, ftz=True) == (PZ, 0)
    assert ref_op("add", "fp16", MINNORM, PZ, ftz=True) == (MINNORM, 0)
    # FTZ does not flush subnormal *inputs* (that's DAZ)
    assert ref_op("add", "fp16", MINSUB, 0x3C00, ftz=True) == (0x3C00, INEXACT)


def test_hand_tininess_before_after():
    # v = 2**-14 - 2**-26: in 11-bit unbounded precision this is the midpoint
    # of 2**-14 - 2**-25 (odd significand) and 2**-14, so RNE gives 2**-14:
    # not tiny after rounding, but tiny before.
    x32 = 0x38800000 - 0x1000                         # fp32 2**-14 - 2**-26
    assert Fraction(float(np.uint32(x32).view(np.float32))) == \
        Fraction(1, 2 ** 14) - Fraction(1, 2 ** 26)
    assert ref_convert(x32, "fp32", "fp16", tininess="after") == (MINNORM, INEXACT)
    assert ref_convert(x32, "fp32", "fp16", tininess="before") == (MINNORM, UNDERFLOW | INEXACT)
    # with FTZ, 'before' flushes the same value to zero, 'after' does not
    assert ref_convert(x32, "fp32", "fp16", ftz=True, tininess="after") == (MINNORM, INEXACT)
    assert ref_convert(x32, "fp32", "fp16", ftz=True, tininess="before") == (PZ, UNDERFLOW | INEXACT)
    # v = 2**-14 - 2**-25 is exact in 11 bits (tiny after too); the subnormal
    # grid rounds it (tie, to even) to 2**-14 -> underflow in both modes.
    v = Fraction(1, 2 ** 14) - Fraction(1, 2 ** 25)
    for t in ("after", "before"):
        assert encode_round(v, 0, "fp16", tininess=t) == (MINNORM, UNDERFLOW | INEXACT)
        assert encode_round(v, 0, "fp16", tininess=t, ftz=True) == (PZ, UNDERFLOW | INEXACT)
    # rtz of the same value stays subnormal in both modes
    assert encode_round(v, 0, "fp16", "rtz") == (0x03FF, UNDERFLOW | INEXACT)
    # encode_round: negative value or magnitude + sign, zero uses sign
    assert encode_round(Fraction(-1), 0, "fp16") == (0xBC00, 0)
    assert encode_round(Fraction(1), 1, "fp16") == (0xBC00, 0)
    assert encode_round(Fraction(0), 1, "fp16") == (NZ, 0)
    assert encode_round(Fraction(1, 3), 0, "fp16") == (0x3555, INEXACT)


def test_hand_daz():
    assert ref_op("add", "fp16", MINSUB, PZ, daz=True) == (PZ, 0)
    assert ref_op("add", "fp16", MINSUB, PZ) == (MINSUB, 0)
    assert ref_op("mul", "fp16", 0x8001, ONE, daz=True) == (NZ, 0)
    assert ref_op("div", "fp16", ONE, 0x0200, daz=True) == (INFH, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp16", 0x8200, 0x0200, daz=True) == (0x7E00, INVALID)
    assert ref_op("eq", "fp16", 0x0001, 0x8002, daz=True) == (True, 0)
    assert ref_op("lt", "fp16", 0x8001, 0x0001, daz=True) == (False, 0)
    assert ref_op("lt", "fp16", 0x8001, 0x0001) == (True, 0)
    assert ref_convert(0x0001, "fp16", "fp32", daz=True) == (0, 0)
    assert ref_convert(0x8001, "fp16", "fp32", daz=True) == (0x80000000, 0)


def test_hand_zero_signs():
    neg_one = ONE | 0x8000
    assert ref_op("add", "fp16", ONE, neg_one) == (PZ, 0)
    assert ref_op("sub", "fp16", ONE, ONE) == (PZ, 0)
    for mode in ROUNDINGS:
        want = NZ if mode == "rdn" else PZ
        assert ref_op("add", "fp16", ONE, neg_one, rounding=mode) == (want, 0)
        assert ref_op("add", "fp16", PZ, NZ, rounding=mode) == (want, 0)
        assert ref_op("add", "fp16", NZ, NZ, rounding=mode) == (NZ, 0)
        assert ref_op("add", "fp16", PZ, PZ, rounding=mode) == (PZ, 0)
        assert ref_op("sub", "fp16", NZ, PZ, rounding=mode) == (NZ, 0)
        assert ref_op("sub", "fp16", PZ, PZ, rounding=mode) == (want, 0)
    # x + 0 keeps x, including x = -0 + +0 handled above
    assert ref_op("add", "fp16", neg_one, PZ) == (neg_one, 0)
    # mul/div: sign is the xor
    assert ref_op("mul", "fp16", NZ, ONE) == (NZ, 0)
    assert ref_op("mul", "fp16", NZ, neg_one) == (PZ, 0)
    assert ref_op("div", "fp16", PZ, neg_one) == (NZ, 0)
    assert ref_op("div", "fp16", neg_one, INFH) == (NZ, 0)
    # fma: exact zero product plus zero
    assert ref_op("fma", "fp16", NZ, ONE, NZ) == (NZ, 0)
    assert ref_op("fma", "fp16", NZ, ONE, PZ) == (PZ, 0)
    assert ref_op("fma", "fp16", NZ, ONE, PZ, rounding="rdn") == (NZ, 0)
    assert ref_op("fma", "fp16", ONE, ONE, neg_one) == (PZ, 0)
    assert ref_op("fma", "fp16", ONE, ONE, neg_one, rounding="rdn") == (NZ, 0)
    # fma: tiny product is not lost (single rounding)
    assert ref_op("fma", "fp16", MINSUB, MINSUB, ONE, rounding="rup") == (0x3C01, INEXACT)
    assert ref_op("fma", "fp16", MINSUB, MINSUB, NZ) == (PZ, UNDERFLOW | INEXACT)
    assert ref_op("fma", "fp16", MINSUB | 0x8000, MINSUB, PZ) == (NZ, UNDERFLOW | INEXACT)


def test_hand_special_operations():
    neg_one = ONE | 0x8000
    assert ref_op("sqrt", "fp16", NZ) == (NZ, 0)
    assert ref_op("sqrt", "fp16", PZ) == (PZ, 0)
    assert ref_op("sqrt", "fp16", INFH) == (INFH, 0)
    assert ref_op("sqrt", "fp16", NINFH) == (0x7E00, INVALID)
    assert ref_op("sqrt", "fp16", neg_one) == (0x7E00, INVALID)
    assert ref_op("sqrt", "fp16", 0x8001) == (0x7E00, INVALID)
    assert ref_op("sqrt", "fp16", 0x4400) == (TWO, 0)              # sqrt(4)
    assert ref_op("sqrt", "fp16", TWO) == (0x3DA8, INEXACT)         # sqrt(2)
    assert ref_op("sqrt", "fp16", TWO, rounding="rup") == (0x3DA9, INEXACT)
    assert ref_op("sqrt", "fp16", MINSUB) == (0x0C00, 0)            # 2**-12
    assert ref_op("div", "fp16", ONE, PZ) == (INFH, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp16", neg_one, PZ) == (NINFH, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp16", ONE, NZ) == (NINFH, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp16", INFH, PZ) == (INFH, 0)
    assert ref_op("div", "fp16", INFH, neg_one) == (NINFH, 0)
    assert ref_op("div", "fp16", PZ, PZ) == (0x7E00, INVALID)
    assert ref_op("div", "fp16", INFH, NINFH) == (0x7E00, INVALID)
    assert ref_op("div", "fp16", ONE, 0x4200) == (0x3555, INEXACT)  # 1/3
    assert ref_op("mul", "fp16", INFH, PZ) == (0x7E00, INVALID)
    assert ref_op("mul", "fp16", NZ, NINFH) == (0x7E00, INVALID)
    assert ref_op("mul", "fp16", NINFH, neg_one) == (INFH, 0)
    assert ref_op("add", "fp16", INFH, NINFH) == (0x7E00, INVALID)
    assert ref_op("sub", "fp16", INFH, INFH) == (0x7E00, INVALID)
    assert ref_op("sub", "fp16", INFH, NINFH) == (INFH, 0)
    assert ref_op("add", "fp16", NINFH, MAXH) == (NINFH, 0)
    assert ref_op("fma", "fp16", INFH, PZ, ONE) == (0x7E00, INVALID)
    assert ref_op("fma", "fp16", INFH, neg_one, INFH) == (0x7E00, INVALID)
    assert ref_op("fma", "fp16", INFH, neg_one, NINFH) == (NINFH, 0)
    assert ref_op("fma", "fp16", ONE, ONE, INFH) == (INFH, 0)
    # fma with huge intermediate product, exact cancellation in the sum
    assert ref_op("fma", "fp16", MAXH, MAXH, MAXH) == (INFH, OVERFLOW | INEXACT)
    assert ref_op("fma", "fp16", MAXH, TWO, MAXH | 0x8000) == (MAXH, 0)
    # comparisons
    assert ref_op("eq", "fp16", PZ, NZ) == (True, 0)
    assert ref_op("le", "fp16", NZ, PZ) == (True, 0)
    assert ref_op("lt", "fp16", NZ, PZ) == (False, 0)
    assert ref_op("lt", "fp16", NINFH, MAXH | 0x8000) == (True, 0)
    assert ref_op("le", "fp16", INFH, INFH) == (True, 0)
    assert ref_op("lt", "fp16", INFH, INFH) == (False, 0)


def test_hand_fp32_bf16():
    one32 = 0x3F800000
    assert ref_op("add", "fp32", one32, 0x33800000) == (one32, INEXACT)  # 1+2**-24
    assert ref_op("add", "fp32", one32, 0x33800000, rounding="rna") == (0x3F800001, INEXACT)
    assert ref_op("mul", "fp32", 0x00000001, 0x3F000000) == (0, UNDERFLOW | INEXACT)
    assert ref_op("add", "fp32", 0x7F7FFFFF, 0x73800000) == (0x7F800000, OVERFLOW | INEXACT)
    assert ref_op("sqrt", "fp32", 0x40000000) == (0x3FB504F3, INEXACT)
    assert ref_op("add", "bf16", 0x3F80, 0x3B80) == (0x3F80, INEXACT)       # 1+2**-8
    assert ref_op("add", "bf16", 0x3F81, 0x3B80) == (0x3F82, INEXACT)
    # max bf16 = (2 - 2**-7) * 2**127, half an ulp there is 2**119
    assert ref_op("add", "bf16", 0x7F7F, 0x7A80) == (0x7F7F, INEXACT)      # +2**118
    assert ref_op("add", "bf16", 0x7F7F, 0x7B00) == (0x7F80, OVERFLOW | INEXACT)  # tie
    assert ref_op("add", "bf16", 0x7F7F, 0x7B00, rounding="rtz") == (0x7F7F, INEXACT)
    assert ref_from_float(1 / 3, "bf16") == (0x3EAB, INEXACT)
    assert ref_from_float(2.0 ** -133, "bf16") == (0x0001, 0)
    assert ref_from_float(2.0 ** -134, "bf16") == (0x0000, UNDERFLOW | INEXACT)
    assert ref_from_float(3, "fp16") == (0x4200, 0)
    assert ref_from_float(0, "fp16") == (PZ, 0)
    assert ref_from_float(-0.0, "fp16") == (NZ, 0)
    assert ref_from_float(65520, "fp16") == (INFH, OVERFLOW | INEXACT)
    assert ref_from_float(2 ** 100 + 1, "fp32", rounding="rup") == (0x71800001, INEXACT)
    assert ref_from_float(math.inf, "fp8_e5m2") == (0x7C, 0)
    assert ref_from_float(-math.inf, "tf32") == (0x7F800000 >> 13 | 1 << 18, 0)
    assert ref_from_float(57344.0, "fp8_e5m2") == (0x7B, 0)
    assert ref_from_float(61440.0, "fp8_e5m2") == (0x7C, OVERFLOW | INEXACT)


# ---------------------------------------------------------------------------
# NaN profiles
# ---------------------------------------------------------------------------

INVALID_NAN = {
    "ieee": {"fp16": 0x7E00, "bf16": 0x7FC0, "fp32": 0x7FC00000},
    "x86": {"fp16": 0xFE00, "bf16": 0xFFC0, "fp32": 0xFFC00000},
    "riscv": {"fp16": 0x7E00, "bf16": 0x7FC0, "fp32": 0x7FC00000},
    "arm": {"fp16": 0x7E00, "bf16": 0x7FC0, "fp32": 0x7FC00000},
    "cuda": {"fp16": 0x7FFF, "bf16": 0x7FFF, "fp32": 0x7FFFFFFF},
}


@pytest.mark.parametrize("nan", sorted(INVALID_NAN))
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
def test_invalid_nan_per_profile(nan, fmt):
    P = params(fmt)
    one = P["bias"] << P["f"]
    inf = (2 ** P["e"] - 1) << P["f"]
    ninf = inf | 1 << (P["w"] - 1)
    want = (INVALID_NAN[nan][fmt], INVALID)
    assert ref_op("add", fmt, inf, ninf, nan=nan) == want
    assert ref_op("mul", fmt, 0, inf, nan=nan) == want
    assert ref_op("div", fmt, 0, 0, nan=nan) == want
    assert ref_op("div", fmt, inf, inf, nan=nan) == want
    assert ref_op("sqrt", fmt, one | 1 << (P["w"] - 1), nan=nan) == want
    assert ref_op("fma", fmt, inf, 0, one, nan=nan) == want


def test_nan_propagation_profiles():
    qa, qb = 0x7E05, 0xFE0A          # quiet NaNs with payloads
    sa = 0x7C05                       # signaling, payload 5
    sb = 0xFD01                       # signaling, negative
    # ieee / x86: first NaN, quieted, sign and payload kept
    for nan in ("ieee", "x86"):
        assert ref_op("add", "fp16", qa, qb, nan=nan) == (qa, 0)
        assert ref_op("add", "fp16", ONE, qb, nan=nan) == (qb, 0)
        assert ref_op("add", "fp16", sa, ONE, nan=nan) == (0x7E05, INVALID)
        assert ref_op("mul", "fp16", ONE, sb, nan=nan) == (0xFF01, INVALID)
        assert ref_op("add", "fp16", qa, sb, nan=nan) == (qa, INVALID)
        assert ref_op("sqrt", "fp16", sb, nan=nan) == (0xFF01, INVALID)
        assert ref_op("fma", "fp16", ONE, ONE, sa, nan=nan) == (0x7E05, INVALID)
        assert ref_op("fma", "fp16", ONE, qb, sa, nan=nan) == (qb, INVALID)
        # 0 * inf + qNaN: invalid is raised, result is c's NaN
        assert ref_op("fma", "fp16", PZ, INFH, qa, nan=nan) == (qa, INVALID)
        assert ref_op("fma", "fp16", INFH, NZ, qb, nan=nan) == (qb, INVALID)
        # sub does not flip a NaN's sign
        assert ref_op("sub", "fp16", ONE, qa, nan=nan) == (qa, 0)
        assert ref_op("sub", "fp16", ONE, qb, nan=nan) == (qb, 0)
        # inf - inf still uses the invalid NaN of the profile
        inv = 0x7E00 if nan == "ieee" else 0xFE00
        assert ref_op("sub", "fp16", INFH, INFH, nan=nan) == (inv, INVALID)
    for nan, canon in (("riscv", 0x7E00), ("arm", 0x7E00), ("cuda", 0x7FFF)):
        assert ref_op("add", "fp16", qb, qa, nan=nan) == (canon, 0)
        assert ref_op("add", "fp16", sb, ONE, nan=nan) == (canon, INVALID)
        assert ref_op("fma", "fp16", PZ, INFH, qa, nan=nan) == (canon, INVALID)
        assert ref_op("sqrt", "fp16", qb, nan=nan) == (canon, 0)
    # fp8: quiet bit is fraction bit 1
    assert ref_op("add", "fp8_e5m2", 0x7D, 0x3C) == (0x7F, INVALID)
    assert ref_op("add", "fp8_e5m2", 0x7C, 0xFC) == (0x7E, INVALID)
    assert ref_op("add", "fp8_e5m2", 0x7C, 0xFC, nan="cuda") == (0x7F, INVALID)
    # comparisons are quiet
    for op in ("eq", "lt", "le"):
        assert ref_op(op, "fp16", qa, qa) == (False, 0)
        assert ref_op(op, "fp16", ONE, qb) == (False, 0)
        assert ref_op(op, "fp16", sa, ONE) == (False, INVALID)
        assert ref_op(op, "fp16", ONE, sb, nan="cuda") == (False, INVALID)


def test_nan_conversions():
    # narrowing fp32 -> fp16 keeps the top fraction bits
    assert ref_convert(0x7FC00000, "fp32", "fp16") == (0x7E00, 0)
    assert ref_convert(0xFFC00000, "fp32", "fp16") == (0xFE00, 0)
    assert ref_convert(0x7F800001, "fp32", "fp16") == (0x7E00, INVALID)
    assert ref_convert(0x7FA00000, "fp32", "fp16") == (0x7F00, INVALID)
    assert ref_convert(0x7FFFE000, "fp32", "fp16") == (0x7FFF, 0)
    assert ref_convert(0x7FC12345, "fp32", "bf16") == (0x7FC1, 0)
    # widening pads at the bottom
    assert ref_convert(0x7D01, "fp16", "fp32") == (0x7FE02000, INVALID)
    assert ref_convert(0xFE01, "fp16", "fp32", nan="x86") == (0xFFC02000, 0)
    assert ref_convert(0x7F81, "bf16", "fp32") == (0x7FC10000, INVALID)
    assert ref_convert(0x7D01, "fp16", "bf16") == (0x7FC0 | 0x20, INVALID)
    # other profiles
    assert ref_convert(0xFD01, "fp16", "fp32", nan="riscv") == (0x7FC00000, INVALID)
    assert ref_convert(0xFE01, "fp16", "fp32", nan="cuda") == (0x7FFFFFFF, 0)
    assert ref_convert(0xFFC12345, "fp32", "fp16", nan="arm") == (0x7E00, 0)
    # Python floats are fp64
    snan64 = struct.unpack("<d", struct.pack("<Q", 0x7FF4000000000000))[0]
    assert ref_from_float(math.nan, "fp16") == (0x7E00, 0)
    assert ref_from_float(-math.nan, "fp32") == (0xFFC00000, 0)
    assert ref_from_float(snan64, "fp16") == (0x7F00, INVALID)
    assert ref_from_float(math.nan, "fp16", nan="cuda") == (0x7FFF, 0)
    # infinities and zeros convert exactly
    assert ref_convert(0xFF800000, "fp32", "fp16") == (NINFH, 0)
    assert ref_convert(0x80000000, "fp32", "fp8_e5m2") == (0x80, 0)


def test_bad_arguments():
    with pytest.raises(ValueError):
        ref_op("add", "fp16", 1, 2, rounding="up")
    with pytest.raises(ValueError):
        ref_op("add", "fp16", 1, 2, nan="intel")
    with pytest.raises(ValueError):
        ref_op("pow", "fp16", 1, 2)
    with pytest.raises(TypeError):
        ref_op("add", "fp16", 1)
    with pytest.raises(ValueError):
        ref_op("add", "fp16", 1, 1 << 16)
    with pytest.raises(ValueError):
        encode_round(Fraction(1), 0, "fp64x")


def test_oracle_is_independent_of_the_kernels():
    # The oracle takes only softfloat16.exact from the library, and exact reaches (through its
    # imports, even function-level ones) nothing of the arithmetic: no ops, no kernels, no numba.
    from test_import_graph import ROOT, import_graph, imports_in_source
    src = open(oracle.__file__).read()
    assert imports_in_source(src) & {"softfloat16", "numba"} == {"softfloat16"}
    assert [line for line in src.splitlines() if "softfloat16" in line and "import" in line] == \
        ["from softfloat16 import exact"]
    graph = import_graph("softfloat16")
    reached, todo = set(), ["softfloat16.exact"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    assert reached == {"softfloat16.exact", "softfloat16.flags", "softfloat16.formats",
                       "softfloat16.profiles", "softfloat16.rounding"}
    for module in reached:
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert "numba" not in imports_in_source(source), module


# ---------------------------------------------------------------------------
# The encodings of docs/formats-spec.md: FP8 E4M3FN / FNUZ, FP6, FP4, E8M0,
# saturate and stochastic rounding
# ---------------------------------------------------------------------------

ML_DTYPES = {
    "fp8_e5m2": ml_dtypes.float8_e5m2, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn, "e8m0": ml_dtypes.float8_e8m0fnu,
}
FINITE_ONLY = ("fp6_e2m3", "fp6_e3m2", "fp4_e2m1")   # no inf, no NaN
ALL_MODES = ROUNDINGS + ("sr",)


def ml_bits(fmt):
    return ml_dtypes.finfo(ML_DTYPES[fmt]).bits


def ml_values(fmt):
    """float64 value of every pattern, as ml_dtypes decodes it."""
    return np.arange(1 << ml_bits(fmt), dtype=np.uint8).view(ML_DTYPES[fmt]).astype(np.float64)


def ml_from_float32(x, fmt):
    with np.errstate(all="ignore"):
        return np.asarray(x, np.float32).astype(ML_DTYPES[fmt]).view(np.uint8).astype(np.int64)


def f32_from_bits(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


def sign_bit(fmt):
    return 0 if fmt == "e8m0" else 1 << (ml_bits(fmt) - 1)


def test_oracle_formats_agree_with_the_library_and_ml_dtypes():
    from softfloat16.formats import format as library_format
    for name in ALL_FORMATS:
        s, lib = oracle.spec(name), library_format(name)
        assert (s.e, s.f, s.encoding, s.bias, s.emin, s.emax) == (
            lib.exponent_bits, lib.fraction_bits, lib.encoding, lib.bias, lib.emin, lib.emax), name
        assert (s.max_finite, s.default_nan, s.width) == (
            lib.max_finite, lib.default_nan, lib.width - lib.storage_shift), name
        assert (s.inf is not None, s.default_nan is not None) == (lib.has_inf, lib.has_nan), name
        if name in ML_DTYPES:
            info = ml_dtypes.finfo(ML_DTYPES[name])
            assert (s.width, s.f, s.emin) == (info.bits, info.nmant, info.minexp), name
            assert to_fraction(s.max_finite, name) == Fraction(float(info.max)), name
            assert to_fraction(1 << s.f if s.encoding != "e8m0" else 0, name) == Fraction(float(info.smallest_normal))


@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_decode_every_pattern_vs_ml_dtypes(fmt):
    s = oracle.spec(fmt)
    for bits, x in enumerate(ml_values(fmt).tolist()):
        kind, sign, value = decode(bits, fmt)
        if math.isnan(x):
            assert kind in ("qnan", "snan") and value is None, hex(bits)
            assert kind == "qnan" or s.encoding == "ieee", hex(bits)   # only IEEE formats signal
        elif math.isinf(x):
            assert (kind, sign, value) == ("inf", int(x < 0), None), hex(bits)
        else:
            assert value == Fraction(x), hex(bits)
            assert sign == int(math.copysign(1, x) < 0), hex(bits)
            exponent_field = (bits >> s.f) & s.exp_ones
            if fmt != "e8m0":
                assert kind == ("zero" if x == 0 else "subnormal" if exponent_field == 0 else "normal"), hex(bits)
    nans = {b for b, x in enumerate(ml_values(fmt).tolist()) if math.isnan(x)}
    expected_nans = {"fn": {0x7F, 0xFF}, "fnuz": {0x80}, "finite": set(), "e8m0": {0xFF}}.get(s.encoding)
    if expected_nans is not None:
        assert nans == expected_nans


# --- rounding restated as "pick a neighbour", from ml_dtypes' list of values ---

class Grid:
    """Every non-negative finite value of a format (from ml_dtypes), ascending, with its pattern;
    one virtual value past the largest ('over'), and for E8M0 virtual powers of two below 2**-127."""

    def __init__(self, fmt):
        values = ml_values(fmt)
        width = ml_bits(fmt)
        positive = [(Fraction(float(v)), b) for b, v in enumerate(values.tolist())
                    if not math.isnan(v) and not math.isinf(v) and (fmt == "e8m0" or b < 1 << (width - 1))]
        positive.sort()
        (top, top_bits), (below_top, _) = positive[-1], positive[-2]
        self.max_bits, self.max = top_bits, top
        self.over = 2 * top if fmt == "e8m0" else top + (top - below_top)
        entries = positive + [(self.over, "over")]
        if fmt == "e8m0":
            entries = [(Fraction(1, 2 ** k), "below") for k in range(400, 127, -1)] + entries
        self.values = [v for v, _ in entries]
        self.patterns = [p for _, p in entries]
        self.fmt = fmt
        info = ml_dtypes.finfo(ML_DTYPES[fmt])
        self.min_normal = Fraction(float(info.smallest_normal))
        with np.errstate(all="ignore"):
            inf = np.array([np.inf, -np.inf], np.float32).astype(ML_DTYPES[fmt]).view(np.uint8)
        # ml_dtypes' conversion of inf is the spec's overflow value (its table: "the defaults are
        # what ml_dtypes' conversions do")
        self.overflow_value = {False: int(inf[0]), True: int(inf[1])}


def round_by_enumeration(value, grid, mode, saturate=False, random_r=None, sr_bits=None):
    """(bits, flags) of ``value`` rounded by choosing between its two neighbours in ``grid``;
    tininess before rounding."""
    fmt, value = grid.fmt, Fraction(value)
    if fmt == "e8m0" and value <= 0:
        return 0xFF, INVALID
    negative, mag = value < 0, abs(value)
    i = bisect.bisect_right(grid.values, mag) - 1   # grid.values[i] <= mag < grid.values[i + 1]
    sign = sign_bit(fmt) if negative else 0
    if grid.values[i] == mag and grid.patterns[i] not in ("over", "below"):
        bits = grid.patterns[i]
        return (0 if bits == 0 and fmt in ("fp8_e4m3fnuz", "fp8_e5m2fnuz") else sign | bits), 0
    lo, hi = grid.values[i], None
    if grid.patterns[i] == "over":
        choice = i
    else:
        hi = grid.values[i + 1]
        below, above = mag - lo, hi - mag
        even_hi = (grid.patterns[i + 1] == "over" and (grid.max_bits + 1) % 2 == 0) or \
            (isinstance(grid.patterns[i + 1], int) and grid.patterns[i + 1] % 2 == 0)
        if mode in ("rne", "rna"):
            if below != above:
                up = above < below
            elif mode == "rna" or fmt == "e8m0":   # E8M0: both significands are 1; the larger
                up = True
            else:
                up = even_hi
        elif mode == "rtz":
            up = False
        elif mode == "rup":
            up = not negative
        elif mode == "rdn":
            up = negative
        elif mode == "rod":
            up = fmt != "e8m0" and not even_hi
        else:
            d = (below * 2 ** sr_bits) // (hi - lo)
            up = d + random_r >= 2 ** sr_bits
        choice = i + up
    pattern = grid.patterns[choice]
    if pattern == "over":
        toward_zero = mode in ("rtz", "rod") or mode == ("rup" if negative else "rdn")
        if saturate or toward_zero:
            return sign | grid.max_bits, OVERFLOW | INEXACT
        return grid.overflow_value[negative], OVERFLOW | INEXACT
    if pattern == "below":
        return 0, UNDERFLOW | INEXACT
    flags = INEXACT | (UNDERFLOW if mag < grid.min_normal else 0)
    if pattern == 0 and fmt in ("fp8_e4m3fnuz", "fp8_e5m2fnuz"):
        return 0, flags
    return sign | pattern, flags


def values_to_round(grid, rng, count):
    """Exact values around every neighbour pair: midpoints (ties), just either side of them, random
    points, and values past the virtual top, both signs."""
    values = [v for v in grid.values if v > 0][-60:] if grid.fmt == "e8m0" else list(grid.values)
    out = []
    for lo, hi in zip(values, values[1:]):
        mid = (lo + hi) / 2
        gap = hi - lo
        out += [lo, mid, mid - gap / 1024, mid + gap / 1024, lo + gap * Fraction(rng.randrange(1, 255), 256)]
    top = values[-1]
    out += [top * 3 / 2, top * 4, values[1] / 3, values[1] / 2, values[1] * Fraction(3, 4)]
    if grid.fmt == "e8m0":
        out += [Fraction(k, 4 * 2 ** 127) for k in (1, 2, 3, 5)] + [Fraction(3, 2 ** 128)]
    rng.shuffle(out)
    out = out[:count]
    return out + [-v for v in out[: count // 2]]


@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_round_fraction_vs_enumeration_of_neighbours(fmt):
    grid = Grid(fmt)
    rng = random.Random(fmt)
    for value in values_to_round(grid, rng, 700):
        for mode in ALL_MODES:
            for saturate in (False, True):
                options = {}
                if mode == "sr":
                    sr_bits = rng.choice([1, 2, 3, 5, 8, 32])
                    options = dict(random=rng.randrange(2 ** sr_bits), sr_bits=sr_bits)
                got = oracle.exact.round_fraction(value, fmt, mode, saturate=saturate, tininess="before",
                                                  **options)
                want = round_by_enumeration(value, grid, mode, saturate, options.get("random"),
                                            options.get("sr_bits"))
                assert (got[0], int(got[1])) == want, (fmt, value, mode, saturate, options, got, want)


def test_e8m0_zero_and_negative_values_are_invalid():
    for value in (0, -1, Fraction(-1, 2 ** 200)):
        for mode in ALL_MODES:
            extra = dict(random=0, sr_bits=1) if mode == "sr" else {}
            assert encode_round(value, 0, "e8m0", mode, **extra) == (0xFF, INVALID)


@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_stochastic_rounding_counts_round_ups_exactly(fmt):
    """For R-bit random integers r = 0 .. 2**R - 1, the number of round-ups is d, the first R bits
    of the exact magnitude below the truncated result's last place (read from its binary expansion,
    with the format's precision and exponent range from ml_dtypes.finfo)."""
    info = ml_dtypes.finfo(ML_DTYPES[fmt])
    grid = Grid(fmt)
    rng = random.Random("sr" + fmt)
    # Past the virtual top truncation itself overflows, and E8M0 returns 2**-127 for everything
    # below 2**-128 (rounding up or down is seen there only in the flags): nothing to observe.
    values = [v for v in values_to_round(grid, rng, 250)
              if v != 0 and abs(v) < grid.over and (fmt != "e8m0" or v >= Fraction(1, 2 ** 128))]
    for sr_bits in (1, 2, 3, 4, 6):
        for value in values:
            mag = abs(value)
            exponent = math.floor(math.log2(mag))
            while Fraction(2) ** exponent > mag:
                exponent -= 1
            while Fraction(2) ** (exponent + 1) <= mag:
                exponent += 1
            # e8m0 has no subnormals: its precision (1 bit) holds below 2**-127 too
            last_place = (exponent if fmt == "e8m0" else max(exponent, info.minexp)) - info.nmant
            d = math.floor(mag / Fraction(2) ** (last_place - sr_bits)) % 2 ** sr_bits
            results = [encode_round(value, 0, fmt, "sr", random=r, sr_bits=sr_bits)
                       for r in range(2 ** sr_bits)]
            truncated = encode_round(value, 0, fmt, "rtz")
            # up: another result than truncation's (bits, or only flags: OVERFLOW to FP6/FP4's max
            # finite, E8M0's 2**-127 reached from below without UNDERFLOW)
            up = [result != truncated for result in results]
            assert sum(up) == d, (fmt, value, sr_bits, d, sum(up))
            assert up == [r >= 2 ** sr_bits - d for r in range(2 ** sr_bits)], (fmt, value)   # the largest r
            if truncated[1] == 0:
                assert all(result == truncated for result in results)


def test_round_sqrt_stochastic_counts():
    """sqrt: d from an integer square root (floor(sqrt(x) * 2**k) = isqrt(floor(x * 4**k)))."""
    rng = random.Random(7)
    for fmt in ("fp4_e2m1", "fp6_e3m2", "fp8_e4m3fn", "fp8_e5m2", "fp16"):
        s = oracle.spec(fmt)
        for _ in range(40):
            x = Fraction(rng.randrange(1, 2 ** 20), 2 ** rng.randrange(0, 24))
            root = math.sqrt(x)
            exponent = math.floor(math.log2(root))
            for sr_bits in (2, 5):
                shift = s.f + sr_bits - max(exponent, s.emin)   # scale: 2**shift, the R-th bit below the last place
                scaled = math.isqrt(math.floor(x * 4 ** shift)) if shift >= 0 else None
                if scaled is None:
                    continue
                d = scaled % 2 ** sr_bits
                truncated = oracle.exact.round_sqrt(x, fmt, "rtz")
                ups = sum(oracle.exact.round_sqrt(x, fmt, "sr", random=r, sr_bits=sr_bits) != truncated
                          for r in range(2 ** sr_bits))
                if truncated[0] != s.max_finite:
                    assert ups == d, (fmt, x, sr_bits)


def test_stochastic_rounding_hand_cases():
    # 1 + 2**-11 + 2**-13 in fp16 (ulp 2**-10): discarded .1010 -> d = 0b1010 = 10 of 16 with R = 4
    value = 1 + Fraction(1, 2 ** 11) + Fraction(1, 2 ** 13)
    results = [encode_round(value, 0, "fp16", "sr", random=r, sr_bits=4)[0] for r in range(16)]
    assert results == [0x3C00] * 6 + [0x3C01] * 10
    # the sign does not change the probability: -value rounds its magnitude the same way
    assert [encode_round(-value, 0, "fp16", "sr", random=r, sr_bits=4)[0] for r in range(16)] == \
        [b | 0x8000 for b in results]
    # d holds only the first R discarded bits: 2**-20 below the last place is invisible to R = 4
    assert all(encode_round(1 + Fraction(1, 2 ** 20), 0, "fp16", "sr", random=r, sr_bits=4) == (0x3C00, INEXACT)
               for r in range(16))
    # overflow: the largest fp16 + 3/4 ulp goes past it when r >= 1/4 of the range; saturate keeps max
    near = Fraction(65504) + 24
    assert encode_round(near, 0, "fp16", "sr", random=0, sr_bits=2) == (0x7BFF, INEXACT)
    assert encode_round(near, 0, "fp16", "sr", random=1, sr_bits=2) == (0x7C00, OVERFLOW | INEXACT)
    assert encode_round(near, 0, "fp16", "sr", random=1, sr_bits=2, saturate=True) == (0x7BFF, OVERFLOW | INEXACT)
    assert encode_round(near, 0, "fp8_e4m3fn", "sr", random=3, sr_bits=2) == (0x7F, OVERFLOW | INEXACT)
    # tininess after rounding uses the same r at full precision: 2**-14 - 2**-26 in fp16 (the
    # subnormal grid's ulp is 2**-24: discarded .11 -> up for r >= 1 of 4; at 11 bits, unbounded,
    # the discarded bits are .1 (half) -> 2**-14 for r >= 2): r = 1 rounds up but stays tiny.
    value = Fraction(1, 2 ** 14) - Fraction(1, 2 ** 26)
    assert encode_round(value, 0, "fp16", "sr", random=0, sr_bits=2) == (0x03FF, UNDERFLOW | INEXACT)
    assert encode_round(value, 0, "fp16", "sr", random=1, sr_bits=2) == (0x0400, UNDERFLOW | INEXACT)
    assert encode_round(value, 0, "fp16", "sr", random=2, sr_bits=2) == (0x0400, INEXACT)
    assert encode_round(value, 0, "fp16", "sr", random=2, sr_bits=2, tininess="before") == (0x0400, UNDERFLOW | INEXACT)
    # exact values: no flags whatever r
    assert encode_round(Fraction(3, 2), 0, "fp16", "sr", random=2 ** 32 - 1) == (0x3E00, 0)
    for bad in (dict(random=4, sr_bits=2), dict(random=-1), dict(random=None), dict(random=0, sr_bits=33)):
        with pytest.raises(ValueError):
            encode_round(value, 0, "fp16", "sr", **bad)
    with pytest.raises(ValueError):
        encode_round(value, 0, "fp16", "rne", random=3)


# --- conversions against ml_dtypes and torch ---

def conversion_inputs(fmt, rng):
    """float32 bit patterns around ``fmt``'s values: every midpoint between neighbours and the
    float32 values next to it (ties and near-ties), the range limits, float32 subnormals,
    specials (zeros, infinities, NaNs with payloads, signaling), random bits; both signs."""
    grid = Grid(fmt)
    values = [v for v in grid.values if v > 0 and v < 2 ** 128]
    if fmt == "e8m0":
        values = values[::7] + values[-3:] + [Fraction(1, 2 ** 127), Fraction(1, 2 ** 126)]
    points = []
    for lo, hi in zip(values, values[1:]):
        points += [float(lo), float((lo + hi) / 2)]
    mids = np.array(points, np.float32).view(np.uint32).astype(np.int64)
    near = np.concatenate([mids - 1, mids, mids + 1])
    near = near[(near > 0) & (near < 0x7F800000)]
    specials = np.array([0, 0x7F800000, 0x7FC00000, 0x7FA00001, 0x7FFFFFFF, 0x7F800001, 0x00000001,
                         0x007FFFFF, 0x00400000, 0x00600000, 0x00600001, 0x005FFFFF, 0x7F7FFFFF,
                         0x3F800000], np.int64)
    rand = np.array([rng.getrandbits(32) for _ in range(1500)], np.int64) & 0x7FFFFFFF
    wide = np.array([math.ldexp(rng.random() + 0.5, rng.randrange(-150, 20)) for _ in range(1500)],
                    np.float32).view(np.uint32).astype(np.int64)
    positive = np.unique(np.concatenate([near, specials, rand, wide]))
    return np.concatenate([positive, positive | 0x80000000])


def oracle_convert_all(bits32, fmt, **options):
    return np.array([ref_convert(int(b), "fp32", fmt, **options)[0] for b in bits32], np.int64)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_conversions_from_float32_vs_ml_dtypes(fmt):
    """RNE, non-saturating: the oracle equals ml_dtypes on every input but these documented ones:
    * NaN into FP6/FP4 (no NaN): the spec gives +0 with INVALID; ml_dtypes -0 for +NaN, +0 for -NaN.
    * NaN into E5M2: the spec keeps the sign and the payload's top bits, quieted (0x7FFFFFFF ->
      0x7F); ml_dtypes gives the canonical quiet NaN of the sign (0x7E / 0xFE).
    * E8M0 from float32 subnormals in (2**-127, 1.5 * 2**-127): the nearest power of two is
      2**-127 (0x00); ml_dtypes before 0.7 gives 2**-126 (0x01): it rounds the subnormal's fraction
      field as if it were a normal number's (0x00400000 is its own half-way point), off by one
      binade. ml_dtypes 0.7 gives the nearest, as the oracle does."""
    rng = random.Random("convert" + fmt)
    bits32 = conversion_inputs(fmt, rng)
    x = f32_from_bits(bits32)
    got = ml_from_float32(x, fmt)
    want = oracle_convert_all(bits32, fmt)
    differ = got != want
    nan_in = np.isnan(x)
    if fmt in FINITE_ONLY:
        assert np.all(want[nan_in] == 0)
        assert np.array_equal(got[nan_in], np.where(np.signbit(x[nan_in]), 0, sign_bit(fmt)))
        differ &= ~nan_in
    elif fmt == "fp8_e5m2":
        assert np.array_equal(got[nan_in], np.where(np.signbit(x[nan_in]), 0xFE, 0x7E))
        payload_top = (bits32[nan_in] >> 21) & 3
        assert np.array_equal(want[nan_in], np.where(np.signbit(x[nan_in]), 0x80, 0) | 0x7C | 2 | payload_top)
        differ &= ~nan_in
    elif fmt == "e8m0":
        below_the_tie = (x > 2.0 ** -127) & (x < 1.5 * 2.0 ** -127)
        assert below_the_tie.sum() > 3 and np.all(want[below_the_tie] == 0x00)
        if not ml_dtypes_rounds_correctly():  # ml_dtypes < 0.7: off by one binade there
            assert np.all(got[below_the_tie] == 0x01)
            differ &= ~below_the_tie
    bad = np.flatnonzero(differ)
    assert bad.size == 0, [(hex(int(bits32[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:10]]


def test_ml_dtypes_float64_conversion_by_version():
    """ml_dtypes before 0.7 converts float64 to the 8-bit formats through float32: a double rounding,
    e.g. 1.0625 + 2**-40 into E4M3FN: 1.125 (0x39) directly, 1.0 (0x38) after float32 made it the tie
    1.0625. ml_dtypes 0.7 rounds the float64 value once, as the oracle (and the spec) does."""
    x = 1.0625 + 2.0 ** -40
    assert ref_from_float(x, "fp8_e4m3fn") == (0x39, INEXACT)
    ml = int(np.array([x]).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0])
    assert int(np.array([x], np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0]) == 0x38
    assert ml == (0x39 if ml_dtypes_rounds_correctly() else 0x38)
    # on float64 values that float32 holds exactly, the two agree (the test above covers them)
    assert ref_from_float(1.0625, "fp8_e4m3fn") == (0x38, INEXACT)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_conversions_from_float64_vs_ml_dtypes(fmt):
    """From float64, on inputs within a float32 ulp of the format's ties (where one rounding and two
    through float32 differ) and wide random values: ml_dtypes 0.7 and later round once, and equal
    both the oracle's single rounding and this package's ``from_float`` on every input; earlier
    ml_dtypes equal the oracle's two roundings float64 -> float32 -> format (RNE), with E8M0's
    off-by-one binade below 1.5 * 2**-127 (test_conversions_from_float32_vs_ml_dtypes)."""
    from softfloat16.formats import format as library_format
    rng = random.Random("float64" + fmt)
    grid = Grid(fmt)
    ties = [float((lo + hi) / 2) for lo, hi in zip(grid.values, grid.values[1:]) if hi < 2 ** 127 and lo > 0]
    x = [t + d * t * 2.0 ** -30 for t in ties for d in (-1, 1)]           # within a float32 ulp of a tie
    x += [math.ldexp(rng.random() + 0.5, rng.randrange(-150, 20)) for _ in range(800)]
    x += [math.inf, 1e300, 1e-300, 0.0]
    x += [-v for v in x]
    got = np.array(x).astype(ML_DTYPES[fmt]).view(np.uint8).astype(np.int64)
    once = [ref_from_float(value, fmt)[0] for value in x]
    twice = []
    for value in x:
        via_float32, _ = ref_convert(f32_bits(np.float32(value)), "fp32", fmt)
        if fmt == "e8m0" and 2.0 ** -127 < np.float32(value) < 1.5 * 2.0 ** -127:
            via_float32 = 0x01   # ml_dtypes' off-by-one binade before 0.7
        twice.append(via_float32)
    # the inputs tell the two apart (FP4's ties are all float32 values: random inputs decide there)
    assert sum(a != b for a, b in zip(once, twice)) > 0
    if ml_dtypes_rounds_correctly():
        bad = [(v, hex(g), hex(w)) for v, g, w in zip(x, got.tolist(), once) if g != w]
        assert not bad, (fmt, len(bad), bad[:5])
        ours = library_format(fmt).from_float(np.array(x)).astype(np.int64)
        assert np.array_equal(ours, got), [(v, hex(a), hex(b)) for v, a, b in zip(x, ours, got) if a != b][:5]
    else:
        bad = [(v, hex(g), hex(w)) for v, g, w in zip(x, got.tolist(), twice) if g != w]
        assert not bad, (fmt, len(bad), bad[:5])


@pytest.mark.parametrize("fmt", sorted(ML_DTYPES))
def test_widening_to_float32_vs_ml_dtypes(fmt):
    """Every pattern into float32 (exact): equal to ml_dtypes but for NaN payloads, which the spec
    keeps (E4M3FN's NaN 0x7F carries 0b111: float32 0x7FF00000; E5M2 0x7D: 0x7FA00000 quieted to
    0x7FE00000) and ml_dtypes drops (the canonical 0x7FC00000 of the sign)."""
    values = ml_values(fmt).astype(np.float32)
    got = values.view(np.uint32).astype(np.int64)
    for bits, ml in enumerate(got.tolist()):
        want, flags = ref_convert(bits, fmt, "fp32")
        if math.isnan(values[bits]):
            assert want >> 31 == ml >> 31 and (want & 0x7FC00000) == 0x7FC00000, hex(bits)
            assert ml & 0x7FFFFFFF == 0x7FC00000
        else:
            assert (want, flags) == (ml, 0), hex(bits)
    if fmt == "fp8_e4m3fn":
        assert [ref_convert(b, fmt, "fp32")[0] for b in (0x7F, 0xFF)] == [0x7FF00000, 0xFFF00000]
    if fmt == "fp8_e5m2":
        assert ref_convert(0x7D, fmt, "fp32") == (0x7FE00000, INVALID)


def nan_in(fmt, bits):
    kind = decode(bits, fmt)[0]
    return kind in ("qnan", "snan")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fmt", SMALL_FORMATS)
def test_arithmetic_vs_ml_dtypes(fmt):
    """ml_dtypes computes + - * / and sqrt in float32 and rounds once to the format: with
    24 >= 2p + 2 bits that is the correctly rounded RNE result (sums and products are even exact).
    numpy's float32 on x86 makes the x86 NaNs (invalid: -qNaN). Equal bits, except that when the
    result is a NaN only NaN-ness is compared: which operand's NaN (and sign) ml_dtypes returns
    depends on its code generation (E4M3FN: 0 + 0xFF gives 0x7F; 0x7F * 0xFF gives 0xFF), and it
    drops E5M2 payloads."""
    width = oracle.spec(fmt).width
    rng = random.Random("arith" + fmt)
    if width <= 6:
        pairs = [(a, b) for a in range(1 << width) for b in range(1 << width)]
    else:
        specials = [0, 0x80, 0x7F, 0xFF, 0x7E, 0xFE, 0x7C, 0xFC, 0x7B, 0x01, 0x81, 0x08, 0x38, 0x40]
        pairs = [(a, b) for a in specials for b in specials]
        pairs += [(rng.randrange(256), rng.randrange(256)) for _ in range(2500)]
    dtype = ML_DTYPES[fmt]
    a = np.array([p[0] for p in pairs], np.uint8).view(dtype)
    b = np.array([p[1] for p in pairs], np.uint8).view(dtype)
    with np.errstate(all="ignore"):
        results = {op: _np_binop(op, a, b).view(np.uint8) for op in BIN_OPS}
        results["sqrt"] = np.sqrt(np.arange(1 << width, dtype=np.uint8).view(dtype)).view(np.uint8)
    for op in BIN_OPS + ("sqrt",):
        cases = pairs if op != "sqrt" else [(x,) for x in range(1 << width)]
        for args, ml in zip(cases, results[op].tolist()):
            want, _ = ref_op(op, fmt, *args, nan="x86")
            if nan_in(fmt, want):
                assert nan_in(fmt, ml), (op, [hex(v) for v in args], hex(ml))
            else:
                assert want == ml, (op, [hex(v) for v in args], hex(want), hex(ml))


TORCH_DTYPES = {  # format -> (torch dtype name, does torch saturate the conversion from float32?)
    "fp8_e4m3fn": ("float8_e4m3fn", True), "fp8_e5m2": ("float8_e5m2", False),
    "fp8_e4m3fnuz": ("float8_e4m3fnuz", False), "fp8_e5m2fnuz": ("float8_e5m2fnuz", False),
    "e8m0": ("float8_e8m0fnu", False),
}


@pytest.mark.parametrize("fmt", sorted(TORCH_DTYPES))
def test_conversions_from_float32_vs_torch(fmt):
    """torch 2.13 CPU ``.to(float8_*)`` from float32, RNE; torch saturates E4M3FN (compare with
    saturate=True) and overflows the others to inf/NaN. Equal but for these documented cases:
    * E5M2 NaNs: torch returns 0x7F / 0xFF (all fraction bits set), the spec the payload's top
      bits, quieted (0x7FC00000 -> 0x7E).
    * E8M0 (not the spec's rules): torch ignores the sign (-x gives E8M0(|x|)) and maps +-0 to 0x00
      (2**-127) where the spec gives NaN with INVALID; float32 subnormals in (2**-127, 1.5 * 2**-127)
      go to 0x01 (2**-126) instead of the nearest, 2**-127, as in ml_dtypes."""
    torch = pytest.importorskip("torch")
    name, saturates = TORCH_DTYPES[fmt]
    rng = random.Random("torch" + fmt)
    bits32 = conversion_inputs(fmt, rng)
    x = f32_from_bits(bits32)
    got = torch.from_numpy(x.copy()).to(getattr(torch, name)).view(torch.uint8).numpy().astype(np.int64)
    want = oracle_convert_all(bits32, fmt, saturate=saturates)
    differ = got != want
    nan_in_x = np.isnan(x)
    if fmt == "fp8_e5m2":
        assert np.array_equal(got[nan_in_x], np.where(np.signbit(x[nan_in_x]), 0xFF, 0x7F))
        assert all(nan_in(fmt, int(w)) for w in want[nan_in_x])
        differ &= ~nan_in_x
    if fmt == "e8m0":
        negative = np.signbit(x) & ~nan_in_x
        magnitudes = torch.from_numpy(np.abs(x[negative])).to(torch.float8_e8m0fnu).view(torch.uint8).numpy()
        assert np.array_equal(got[negative], magnitudes) and np.all(want[negative] == 0xFF)
        assert np.all(got[x == 0] == 0) and np.all(want[x == 0] == 0xFF)
        off_by_one = (x > 2.0 ** -127) & (x < 1.5 * 2.0 ** -127)
        assert np.all(got[off_by_one] == 1) and np.all(want[off_by_one] == 0) and off_by_one.sum() > 3
        differ &= ~negative & ~off_by_one & (x != 0)
    bad = np.flatnonzero(differ)
    assert bad.size == 0, [(hex(int(bits32[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:10]]


@pytest.mark.parametrize("fmt", sorted(TORCH_DTYPES))
def test_widening_to_float32_vs_torch(fmt):
    """Every pattern into float32: equal to torch's, NaN payloads included (E4M3FN 0x7F ->
    0x7FF00000, E5M2 0x7D -> 0x7FE00000), except the NaN of FNUZ and of E8M0, which torch turns
    into 0x7F800001, a float32 *signaling* NaN, where the spec gives -qNaN (0xFFC00000: FNUZ's NaN
    has the sign bit) and +qNaN (0x7FC00000)."""
    torch = pytest.importorskip("torch")
    name, _ = TORCH_DTYPES[fmt]
    every = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, name))
    got = every.to(torch.float32).view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF
    for bits, value in enumerate(got.tolist()):
        want, _ = ref_convert(bits, fmt, "fp32")
        if nan_in(fmt, bits) and oracle.spec(fmt).encoding in ("fnuz", "e8m0"):
            assert (value, want) == (0x7F800001, 0xFFC00000 if fmt != "e8m0" else 0x7FC00000), hex(bits)
        else:
            assert want == value, (hex(bits), hex(want), hex(value))


# --- hand-derived cases, written from docs/formats-spec.md ---

def test_hand_fn_e4m3fn():
    one, two, three = 0x38, 0x40, 0x44
    assert ref_op("add", "fp8_e4m3fn", one, one) == (two, 0)
    assert ref_op("mul", "fp8_e4m3fn", 0x7E, two) == (0x7F, OVERFLOW | INEXACT)          # 896: NaN
    assert ref_op("mul", "fp8_e4m3fn", 0xFE, two) == (0xFF, OVERFLOW | INEXACT)          # NaN of the sign
    assert ref_op("mul", "fp8_e4m3fn", 0x7E, two, saturate=True) == (0x7E, OVERFLOW | INEXACT)
    assert ref_op("mul", "fp8_e4m3fn", 0x7E, two, rounding="rtz") == (0x7E, OVERFLOW | INEXACT)
    assert ref_op("mul", "fp8_e4m3fn", 0xFE, two, rounding="rup") == (0xFE, OVERFLOW | INEXACT)
    assert ref_op("mul", "fp8_e4m3fn", 0xFE, two, rounding="rdn") == (0xFF, OVERFLOW | INEXACT)
    # 464 = 448 + half an ulp: a tie, to 448 (even significand 1.110); 480 would be the NaN pattern
    assert encode_round(464, 0, "fp8_e4m3fn") == (0x7E, INEXACT)
    assert encode_round(465, 0, "fp8_e4m3fn") == (0x7F, OVERFLOW | INEXACT)
    # round to odd: 450 truncates to 448 (even) and is made odd, 480: past the largest -> max finite
    assert encode_round(450, 0, "fp8_e4m3fn", "rod") == (0x7E, OVERFLOW | INEXACT)
    # x / 0: the overflow value (NaN of the sign), DIVIDE_BY_ZERO only
    assert ref_op("div", "fp8_e4m3fn", one, 0x80) == (0xFF, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp8_e4m3fn", one, 0x00, saturate=True) == (0x7E, DIVIDE_BY_ZERO)
    # NaNs: always quiet (no INVALID by themselves); propagated with their sign in ieee/x86
    assert ref_op("add", "fp8_e4m3fn", 0xFF, one) == (0xFF, 0)
    assert ref_op("add", "fp8_e4m3fn", one, 0x7F, nan="x86") == (0x7F, 0)
    assert ref_op("add", "fp8_e4m3fn", 0xFF, 0x7F) == (0xFF, 0)
    for nan in ("riscv", "cuda", "arm"):
        assert ref_op("add", "fp8_e4m3fn", 0xFF, one, nan=nan) == (0x7F, 0)
    # invalid operations: 0x7F, x86's negative "indefinite" 0xFF
    assert ref_op("div", "fp8_e4m3fn", 0, 0) == (0x7F, INVALID)
    assert ref_op("sqrt", "fp8_e4m3fn", 0xB8) == (0x7F, INVALID)
    assert ref_op("div", "fp8_e4m3fn", 0, 0x80, nan="x86") == (0xFF, INVALID)
    assert ref_op("div", "fp8_e4m3fn", 0, 0, nan="cuda") == (0x7F, INVALID)
    assert ref_op("sqrt", "fp8_e4m3fn", 0x80) == (0x80, 0)                            # sqrt(-0) = -0
    assert ref_op("sub", "fp8_e4m3fn", three, three, rounding="rdn") == (0x80, 0)
    assert ref_op("lt", "fp8_e4m3fn", 0x7F, one) == (False, 0)


def test_hand_fnuz():
    one = 0x40                                  # E4M3FNUZ: bias 8
    assert to_fraction(one, "fp8_e4m3fnuz") == 1 and to_fraction(0x7F, "fp8_e4m3fnuz") == 240
    assert to_fraction(0x40, "fp8_e5m2fnuz") == 1 and to_fraction(0x7F, "fp8_e5m2fnuz") == 57344
    # no -0: exact zeros, underflows and flushes are +0
    assert ref_op("sub", "fp8_e4m3fnuz", one, one, rounding="rdn") == (0x00, 0)
    assert ref_op("mul", "fp8_e4m3fnuz", 0xC0, 0x00) == (0x00, 0)
    assert ref_op("div", "fp8_e4m3fnuz", 0x00, 0xC0) == (0x00, 0)
    assert ref_op("mul", "fp8_e4m3fnuz", 0x81, 0x08) == (0x00, UNDERFLOW | INEXACT)
    assert ref_op("mul", "fp8_e4m3fnuz", 0x84, one) == (0x84, 0)                        # -2**-8, subnormal
    assert ref_op("mul", "fp8_e4m3fnuz", 0x84, one, ftz=True) == (0x00, UNDERFLOW | INEXACT)
    assert ref_op("add", "fp8_e4m3fnuz", 0x81, 0x00, daz=True, rounding="rdn") == (0x00, 0)    # -0 + +0 -> +0
    # daz reads 0x81 as the zero of its sign, as IEEE DAZ does (the spec is silent on FNUZ inputs):
    # -0 is no FNUZ result, but converted into a format with -0 the sign survives
    assert ref_convert(0x81, "fp8_e4m3fnuz", "fp32", daz=True) == (0x80000000, 0)
    assert ref_op("add", "fp8_e4m3fnuz", 0x80, 0x00, daz=True) == (0x80, 0)            # the NaN stays
    assert ref_convert(0x8000, "fp16", "fp8_e4m3fnuz") == (0x00, 0)
    # one NaN, 0x80, for every NaN result and every profile
    for nan in ("ieee", "x86", "riscv", "cuda"):
        assert ref_op("div", "fp8_e4m3fnuz", 0, 0, nan=nan) == (0x80, INVALID)
        assert ref_op("add", "fp8_e5m2fnuz", 0x80, 0x40, nan=nan) == (0x80, 0)
    # overflow and x / 0: NaN; saturate: +-max
    assert ref_op("mul", "fp8_e4m3fnuz", 0xFF, 0x48) == (0x80, OVERFLOW | INEXACT)
    assert ref_op("mul", "fp8_e4m3fnuz", 0xFF, 0x48, saturate=True) == (0xFF, OVERFLOW | INEXACT)
    assert ref_op("div", "fp8_e4m3fnuz", 0xC0, 0x00) == (0x80, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp8_e4m3fnuz", 0xC0, 0x00, saturate=True) == (0xFF, DIVIDE_BY_ZERO)


def test_hand_finite_formats():
    one, max_fp4 = 0x2, 0x7                                # FP4 E2M1: 1.0 and 6.0
    assert ref_op("mul", "fp4_e2m1", 0x6, 0x6) == (max_fp4, OVERFLOW | INEXACT)      # 16 -> 6
    assert ref_op("mul", "fp4_e2m1", 0xE, 0x6) == (0x8 | max_fp4, OVERFLOW | INEXACT)
    # no NaN: an invalid operation gives +0 with INVALID, whatever the profile
    for nan in ("ieee", "x86", "riscv", "cuda"):
        assert ref_op("div", "fp4_e2m1", 0x0, 0x8, nan=nan) == (0x0, INVALID)
        assert ref_op("sqrt", "fp6_e3m2", 0x2C, nan=nan) == (0x0, INVALID)
    assert ref_op("div", "fp4_e2m1", one, 0x0) == (max_fp4, DIVIDE_BY_ZERO)
    assert ref_op("div", "fp4_e2m1", one, 0x8) == (0x8 | max_fp4, DIVIDE_BY_ZERO)
    assert ref_op("sub", "fp6_e2m3", 0x08, 0x08, rounding="rdn") == (0x20, 0)          # -0 exists
    assert encode_round(Fraction(1, 8), 1, "fp4_e2m1") == (0x8, UNDERFLOW | INEXACT)
    # NaNs converted in: +0 with INVALID (ml_dtypes: -0 for +NaN), infinities: +-max with INVALID
    assert ref_convert(0x7E00, "fp16", "fp4_e2m1") == (0x0, INVALID)
    assert ref_convert(0xFE00, "fp16", "fp6_e2m3", nan="riscv") == (0x0, INVALID)
    assert ref_convert(0xFC00, "fp16", "fp6_e3m2") == (0x3F, INVALID)
    assert ref_from_float(math.nan, "fp4_e2m1") == (0x0, INVALID)
    assert ref_from_float(100.0, "fp6_e3m2") == (0x1F, OVERFLOW | INEXACT)


def test_hand_saturate_in_ieee_formats():
    inf, max_e5m2 = 0x7C, 0x7B
    assert ref_op("add", "fp8_e5m2", inf, 0x3C, saturate=True) == (max_e5m2, 0)
    assert ref_op("mul", "fp8_e5m2", 0xFC, 0x3C, saturate=True) == (0x80 | max_e5m2, 0)
    assert ref_op("div", "fp8_e5m2", 0x3C, 0x00, saturate=True) == (max_e5m2, DIVIDE_BY_ZERO)
    assert ref_op("mul", "fp8_e5m2", max_e5m2, 0x40, saturate=True) == (max_e5m2, OVERFLOW | INEXACT)
    assert ref_op("sqrt", "fp8_e5m2", inf, saturate=True) == (max_e5m2, 0)
    assert ref_op("sub", "fp8_e5m2", inf, inf, saturate=True) == (0x7E, INVALID)          # NaNs stay
    assert ref_op("add", "fp8_e5m2", 0x7D, 0x3C, saturate=True) == (0x7F, INVALID)
    assert ref_convert(0xFF800000, "fp32", "fp16", saturate=True) == (0xFBFF, 0)
    assert ref_convert(0x7F7FFFFF, "fp32", "fp16", saturate=True) == (0x7BFF, OVERFLOW | INEXACT)
    assert ref_convert(0x7F800000, "fp32", "fp16") == (0x7C00, 0)


def test_hand_infinities_into_formats_without_them():
    pinf, ninf = 0x7F800000, 0xFF800000
    assert ref_convert(pinf, "fp32", "fp8_e4m3fn") == (0x7F, INVALID)
    assert ref_convert(ninf, "fp32", "fp8_e4m3fn") == (0xFF, INVALID)
    assert ref_convert(ninf, "fp32", "fp8_e4m3fn", saturate=True) == (0xFE, INVALID)
    assert ref_convert(ninf, "fp32", "fp8_e5m2fnuz") == (0x80, INVALID)
    assert ref_convert(ninf, "fp32", "fp8_e5m2fnuz", saturate=True) == (0xFF, INVALID)
    assert ref_convert(pinf, "fp32", "fp4_e2m1") == (0x7, INVALID)
    # the mode does not matter: inf is not a rounding, it has no representation
    assert ref_convert(pinf, "fp32", "fp8_e4m3fn", rounding="rtz") == (0x7F, INVALID)


def test_hand_e8m0():
    # conversions in: powers of two, 1.5 * 2**k ties to the larger (both neighbours' significands
    # are 1, "to even" picks neither; ml_dtypes and torch do the same), no zero, no sign
    assert ref_from_float(1.0, "e8m0") == (0x7F, 0)
    assert ref_from_float(1.5, "e8m0") == (0x80, INEXACT)
    assert ref_from_float(3.0, "e8m0") == (0x81, INEXACT)
    assert ref_from_float(1.4, "e8m0") == (0x7F, INEXACT)
    assert ref_from_float(0.0, "e8m0") == (0xFF, INVALID)
    assert ref_from_float(-0.0, "e8m0") == (0xFF, INVALID)
    assert ref_from_float(-1.0, "e8m0") == (0xFF, INVALID)
    assert ref_from_float(math.inf, "e8m0") == (0xFF, INVALID)
    assert ref_from_float(math.inf, "e8m0", saturate=True) == (0xFE, INVALID)
    assert ref_from_float(-math.inf, "e8m0", saturate=True) == (0xFF, INVALID)
    assert ref_from_float(math.nan, "e8m0") == (0xFF, 0)
    assert ref_convert(0x7D00, "fp16", "e8m0") == (0xFF, INVALID)                     # sNaN
    assert ref_from_float(2.0 ** 127 * 1.5, "e8m0") == (0xFF, OVERFLOW | INEXACT)
    assert ref_from_float(2.0 ** 127 * 1.5, "e8m0", saturate=True) == (0xFE, OVERFLOW | INEXACT)
    assert ref_from_float(2.0 ** 127 * 1.5, "e8m0", rounding="rtz") == (0xFE, INEXACT)       # truncates to max
    assert ref_from_float(2.0 ** 128, "e8m0", rounding="rtz") == (0xFE, OVERFLOW | INEXACT)
    assert ref_from_float(2.0 ** -130, "e8m0") == (0x00, UNDERFLOW | INEXACT)           # below 2**-127
    assert ref_from_float(2.0 ** -128 * 1.5, "e8m0") == (0x00, INEXACT)                 # rounds to 2**-127
    assert ref_from_float(2.0 ** -128 * 1.5, "e8m0", tininess="before") == (0x00, UNDERFLOW | INEXACT)
    # conversions out: exact where the value fits, rounded otherwise; its NaN is +qNaN
    assert ref_convert(0x7F, "e8m0", "fp32") == (0x3F800000, 0)
    assert ref_convert(0x00, "e8m0", "fp32") == (0x00400000, 0)                         # 2**-127
    assert ref_convert(0xFF, "e8m0", "fp32") == (0x7FC00000, 0)
    assert ref_convert(0xFF, "e8m0", "fp8_e4m3fn") == (0x7F, 0)
    assert ref_convert(0xFF, "e8m0", "fp4_e2m1") == (0x0, INVALID)
    assert ref_convert(0x00, "e8m0", "fp16") == (0x0000, UNDERFLOW | INEXACT)
    assert ref_convert(0xFE, "e8m0", "fp16") == (0x7C00, OVERFLOW | INEXACT)
    assert ref_convert(0xFE, "e8m0", "fp8_e4m3fnuz") == (0x80, OVERFLOW | INEXACT)
    assert ref_convert(0x7F, "e8m0", "e8m0") == (0x7F, 0)
    # comparisons work, arithmetic does not
    assert ref_op("lt", "e8m0", 0x7F, 0x80) == (True, 0)
    assert ref_op("eq", "e8m0", 0xFF, 0xFF) == (False, 0)
    with pytest.raises(ValueError):
        ref_op("add", "e8m0", 0x7F, 0x7F)


def test_hand_nan_conversions_between_encodings():
    # sign and payload carried (aligned at the top, quieted) between ieee and fn ...
    assert ref_convert(0xFF, "fp8_e4m3fn", "fp16") == (0xFF80, 0)
    assert ref_convert(0x7F, "fp8_e4m3fn", "bf16") == (0x7FF0, 0)
    assert ref_convert(0xFE00, "fp16", "fp8_e4m3fn") == (0xFF, 0)
    assert ref_convert(0x7D00, "fp16", "fp8_e4m3fn") == (0x7F, INVALID)                 # signaling
    # ... none from fnuz (its NaN has the sign bit: -qNaN) and e8m0 (+qNaN)
    assert ref_convert(0x80, "fp8_e4m3fnuz", "fp32") == (0xFFC00000, 0)
    assert ref_convert(0x80, "fp8_e5m2fnuz", "fp8_e4m3fn") == (0xFF, 0)
    assert ref_convert(0xFF, "e8m0", "fp16") == (0x7E00, 0)
    assert ref_convert(0x7E00, "fp16", "fp8_e5m2fnuz") == (0x80, 0)
    # non-propagating profiles: their canonical NaN of the destination
    assert ref_convert(0xFF, "fp8_e4m3fn", "fp16", nan="riscv") == (0x7E00, 0)
    assert ref_convert(0xFF, "fp8_e4m3fn", "fp16", nan="cuda") == (0x7FFF, 0)
    assert ref_convert(0xFE00, "fp16", "fp8_e4m3fn", nan="cuda") == (0x7F, 0)
    assert ref_convert(0xFE00, "fp16", "fp8_e4m3fn", nan="x86") == (0xFF, 0)
