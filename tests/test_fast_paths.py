"""The vectorised common-case kernels (softfloat16/_kernels/fast.py) and the 16-bit lookup tables.

The fast kernels are checked directly, element by element, against the exact-rational oracle: what
they settle (ok) must be right, bits and flags, in every rounding mode; and they must settle every
pair of normal operands whose exact result is a normal number (otherwise the speed silently goes).
The tables must give what the kernel gives, per configuration.
"""
from fractions import Fraction

import numpy as np
import pytest
from numba import njit

import softfloat16 as sf
from oracle import FORMATS, ROUNDINGS, ref_op, to_fraction
from softfloat16._kernels import fast

RNG_SEED = 20261201
N_PAIRS = 400
ROUNDING_CODES = {name: int(sf.Rounding[name.upper()]) for name in ROUNDINGS}


@njit
def _run_fast(which, a, b, ebits, fbits, rounding):
    n = a.size
    bits = np.empty(n, np.int64)
    flags = np.empty(n, np.int64)
    ok = np.empty(n, np.bool_)
    for i in range(n):
        if which == 0:
            r = fast.add_normal(a[i], b[i], 0, ebits, fbits, rounding)
        elif which == 1:
            r = fast.add_normal(a[i], b[i], 1, ebits, fbits, rounding)
        elif which == 2:
            r = fast.mul_normal(a[i], b[i], ebits, fbits, rounding)
        else:
            r = fast.div_normal(a[i], b[i], ebits, fbits, rounding)
        bits[i], flags[i], ok[i] = r
    return bits, flags, ok


@njit
def _msb32(x):
    out = np.empty(x.size, np.int64)
    for i in range(x.size):
        out[i] = fast.msb_index32(np.uint32(x[i]))
    return out


def test_msb_index32_is_the_bit_length_minus_one():
    powers = np.array([1 << k for k in range(31)], dtype=np.int64)
    around = np.concatenate([powers, powers - 1, powers + 1, (powers << 1) - 1])
    around = around[(around > 0) & (around < 1 << 31)]
    rng = np.random.default_rng(RNG_SEED)
    random = rng.integers(1, 1 << 31, 100_000) >> rng.integers(0, 31, 100_000)
    x = np.concatenate([around, random[random > 0]])
    want = np.array([int(v).bit_length() - 1 for v in x])
    got = _msb32(x.astype(np.uint32))
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"msb_index32 wrong for {[hex(int(v)) for v in x[bad[:5]]]}: got {got[bad[:5]]}"


def normal_pairs(fmt_name, op, n, rng):
    """Normal operands whose exponents are close (carries, cancellations of every depth), far
    apart (sticky bits), or whose result lies at an end of the range (near overflow, underflow)."""
    ebits, fbits = FORMATS[fmt_name]
    top = (1 << ebits) - 2  # largest normal exponent field
    bias = (1 << (ebits - 1)) - 1
    ones = (1 << fbits) - 1
    ends = np.select([rng.random(n) < 0.3, rng.random(n) < 0.5],
                     [rng.integers(1, 4, n), rng.integers(top - 3, top + 1, n)], rng.integers(1, top + 1, n))
    delta = np.select([rng.random(n) < 0.6], [rng.integers(-2, 3, n)], rng.integers(-fbits - 6, fbits + 7, n))
    if op == "mul":  # the product's exponent field is about e_a + e_b - bias
        e_a = rng.integers(1, top + 1, n)
        e_b = np.clip(ends + bias - e_a + delta, 1, top)
    elif op == "div":  # the quotient's, about e_a - e_b + bias
        e_a = rng.integers(1, top + 1, n)
        e_b = np.clip(e_a + bias - ends + delta, 1, top)
    else:
        e_a = ends
        e_b = np.clip(e_a + delta, 1, top)
    frac_a = rng.integers(0, ones + 1, n)
    # Fractions equal or one apart from a's make the deepest cancellations; all ones make carries.
    frac_b = np.select([rng.random(n) < 0.25, rng.random(n) < 0.2, rng.random(n) < 0.2],
                       [frac_a, np.clip(frac_a + rng.integers(-2, 3, n), 0, ones), np.full(n, ones)],
                       rng.integers(0, ones + 1, n))
    sign_a, sign_b = rng.integers(0, 2, n), rng.integers(0, 2, n)
    width = ebits + fbits
    return (sign_a << width) | (e_a << fbits) | frac_a, (sign_b << width) | (e_b << fbits) | frac_b


def exact_result(op, a, b, fmt_name):
    x, y = to_fraction(a, fmt_name), to_fraction(b, fmt_name)
    return {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y}[op]


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("fmt_name", ["fp16", "bf16", "fp32"])
def test_fast_kernel_is_exact_where_it_settles_and_settles_all_normal_results(fmt_name, op, rounding):
    ebits, fbits = FORMATS[fmt_name]
    rng = np.random.default_rng([RNG_SEED, len(op), ebits, ROUNDING_CODES[rounding]])
    a, b = normal_pairs(fmt_name, op, N_PAIRS, rng)
    bits, flags, ok = _run_fast(["add", "sub", "mul", "div"].index(op), a, b, ebits, fbits, ROUNDING_CODES[rounding])
    min_normal = Fraction(2) ** (2 - (1 << (ebits - 1)))
    settled = 0
    for i in range(N_PAIRS):
        args = (int(a[i]), int(b[i]))
        want_bits, want_flags = ref_op(op, fmt_name, *args, rounding=rounding)
        where = f"{fmt_name} {op}({hex(args[0])}, {hex(args[1])}) {rounding}"
        if ok[i]:
            settled += 1
            assert (int(bits[i]), int(flags[i])) == (want_bits, want_flags), (
                f"{where}: fast path gave {hex(int(bits[i]))}/{int(flags[i])}, want {hex(want_bits)}/{want_flags}")
        else:
            exact = exact_result(op, *args, fmt_name)
            normal_result = abs(exact) >= min_normal and not want_flags & int(sf.Flag.OVERFLOW)
            assert not normal_result, f"{where}: a normal result ({hex(want_bits)}) left to the general kernel"
    assert settled >= N_PAIRS // 2, f"only {settled} of {N_PAIRS} settled: the operand mix lost its point"


@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_loops_use_the_general_kernel_where_the_fast_path_declines(op):
    """Long arrays mixing every class of operand: the two-pass loop equals elementwise calls."""
    rng = np.random.default_rng(RNG_SEED)
    for fmt in (sf.fp16, sf.bf16, sf.fp32):
        n = 3000  # several blocks and a partial one
        a = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64).astype(fmt.dtype)
        b = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64).astype(fmt.dtype)
        got, got_flags = getattr(fmt, op)(a, b, rounding="rup", flags=True)
        one = [getattr(fmt, op)(a[i:i + 1], b[i:i + 1], rounding="rup", flags=True) for i in range(n)]
        want = np.array([int(r[0][0]) for r in one])
        want_flags = np.array([int(r[1][0]) for r in one])
        assert np.array_equal(got, want) and np.array_equal(got_flags, want_flags), fmt.name


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=["fp16", "bf16"])
def test_tables_match_the_kernel_per_configuration(fmt):
    """A 16-bit unary operation on a long array reads a table; it must be this configuration's."""
    every = np.arange(1 << 16, dtype=np.uint16)
    for options in ({}, {"rounding": "rtz"}, {"rounding": "rup", "ftz": True}, {"daz": True, "nan": "cuda"}):
        table_bits, table_flags = fmt.sqrt(every, flags=True, **options)  # long: the table
        for start in range(0, 1 << 16, 8192):  # short slices: the kernel loop
            chunks = [fmt.sqrt(every[i:i + 1000], flags=True, **options) for i in range(start, start + 8192, 1000)]
            bits = np.concatenate([c[0] for c in chunks])[:8192]
            flags = np.concatenate([c[1] for c in chunks])[:8192]
            assert np.array_equal(table_bits[start:start + 8192], bits), (fmt.name, options)
            assert np.array_equal(table_flags[start:start + 8192], flags), (fmt.name, options)
        widened = sf.convert(every, fmt, sf.fp32, **options)
        assert np.array_equal(widened[::97], sf.convert(every[::97], fmt, sf.fp32, **options)), (fmt.name, options)


SMALL = [sf.fp8_e5m2, sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp6_e3m2, sf.fp4_e2m1]


@pytest.mark.parametrize("fmt", SMALL, ids=[f.name for f in SMALL])
def test_pair_tables_match_the_kernel_per_configuration(fmt):
    """A binary operation on two long 8-bit arrays reads a table of every pair; it must give what
    the kernel loop gives on short slices, bits and flags, per configuration."""
    codes = np.arange(1 << min(fmt.width, 8), dtype=np.uint8)
    rng = np.random.default_rng(fmt.width)
    a = np.concatenate([np.repeat(codes, codes.size), rng.choice(codes, 40000)])  # >= the table's threshold
    b = np.concatenate([np.tile(codes, codes.size), rng.choice(codes, 40000)])
    configurations = ({}, {"rounding": "rtz", "saturate": True}, {"rounding": "rdn", "ftz": True, "nan": "x86"},
                      {"daz": True, "tininess": "before", "nan": "cuda"})
    for op in ("add", "sub", "mul", "div", "eq", "lt", "le"):
        for options in configurations:
            options = {k: v for k, v in options.items() if op not in ("eq", "lt", "le") or k in ("daz", "nan")}
            flags = op not in ("eq", "lt", "le")
            long = getattr(fmt, op)(a, b, flags=flags, **options)
            short = [getattr(fmt, op)(a[i:i + 4000], b[i:i + 4000], flags=flags, **options)
                     for i in range(0, a.size, 4000)]
            if flags:
                assert np.array_equal(long[0], np.concatenate([s[0] for s in short])), (op, options)
                assert np.array_equal(long[1], np.concatenate([s[1] for s in short])), (op, options)
            else:
                assert np.array_equal(long, np.concatenate(short)), (op, options)
