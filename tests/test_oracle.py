"""Self-tests for the exact-rational oracle (tests/oracle.py).

The oracle is checked against
* hardware / library rounding (numpy float16/float32, ml_dtypes bfloat16 and
  float8_e5m2), computing in a wider format first: with p' >= 2p + 2 bits the
  double rounding is innocuous for +, -, *, /, sqrt, so the reference is the
  correctly rounded result;
* an independent bit-trick rounding (fp32 -> bf16 / tf32);
* rounding properties (direction, bracketing by neighbours, ties) for every
  mode, evaluated with exact rationals computed here, not by the oracle;
* hand-derived cases written down from IEEE 754 facts.
"""

import math
import random
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import oracle
from oracle import (
    DIVIDE_BY_ZERO, FORMATS, INEXACT, INVALID, OVERFLOW, ROUNDINGS, UNDERFLOW,
    decode, encode_round, ref_convert, ref_from_float, ref_op, to_fraction,
)

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
