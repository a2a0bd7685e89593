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
from softfloat16 import ops
from softfloat16._kernels import arith, fast, loops

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
        elif which == 4:
            r = fast.add_normal(a[i], b[i], 0, ebits, fbits, rounding, subnormals=True)
        elif which == 5:
            r = fast.add_normal(a[i], b[i], 1, ebits, fbits, rounding, subnormals=True)
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


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("fmt_name", ["fp16", "bf16", "fp32"])
def test_fast_add_with_subnormals_against_the_oracle(fmt_name, op, rounding):
    """add_normal(subnormals=True), as the elementwise loops run it: exact where it settles, and it
    settles every finite pair with a nonzero result that does not overflow, however small."""
    ebits, fbits = FORMATS[fmt_name]
    rng = np.random.default_rng([RNG_SEED, 7, len(op), ebits, ROUNDING_CODES[rounding]])
    n = N_PAIRS
    fields = rng.choice([0, 1, 2, 3, 9, (1 << ebits) - 2], (2, n), p=[0.4, 0.25, 0.1, 0.1, 0.1, 0.05])
    fraction = rng.integers(0, 1 << fbits, (2, n))
    fraction[:, : n // 8] = rng.integers(0, 3, (2, n // 8))
    a, b = (rng.integers(0, 2, (2, n)) << (ebits + fbits)) | (fields << fbits) | fraction
    bits, flags, ok = _run_fast(4 + ["add", "sub"].index(op), a, b, ebits, fbits, ROUNDING_CODES[rounding])
    settled_subnormal = 0
    for i in range(n):
        args = (int(a[i]), int(b[i]))
        want_bits, want_flags = ref_op(op, fmt_name, *args, rounding=rounding)
        where = f"{fmt_name} {op}({hex(args[0])}, {hex(args[1])}) {rounding}"
        x, y = to_fraction(args[0], fmt_name), to_fraction(args[1], fmt_name)
        exact = x + y if op == "add" else x - y
        if ok[i]:
            assert (int(bits[i]), int(flags[i])) == (want_bits, want_flags), (
                f"{where}: fast path gave {hex(int(bits[i]))}/{int(flags[i])}, want {hex(want_bits)}/{want_flags}")
            settled_subnormal += int(want_bits & ((1 << (ebits + fbits)) - 1) < (1 << fbits))
        else:
            assert exact == 0 or want_flags & int(sf.Flag.OVERFLOW), f"{where}: declined {hex(want_bits)}"
    assert settled_subnormal >= n // 10, f"only {settled_subnormal} subnormal results settled"


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


# --- fma and sqrt, and the loops' hand-over for them ---------------------------------------------

N_TRIPLES = 300
FMA_FORMATS = ["fp16", "bf16", "fp32", "fp8_e5m2", "tf32"]


# Not cache=True: Numba would key a cached helper on this file alone, and keep running the kernels
# it inlined after fast.py changed.
@njit(error_model="numpy")
def _run_fast_fma(a, b, c, ebits, fbits, rounding, random, sr_bits, integer):
    """fast.fma_float64 over arrays, or fast.fma_normal (integer=True) -> bits, flags, ok."""
    n = a.size
    bits = np.empty(n, np.int64)
    flags = np.empty(n, np.int64)
    ok = np.empty(n, np.bool_)
    for i in range(n):
        if integer:
            r, fl, good = fast.fma_normal(a[i], b[i], c[i], ebits, fbits, rounding, random[i], sr_bits)
        else:
            r, fl, good = fast.fma_float64(a[i], b[i], c[i], ebits, fbits, rounding, random[i], sr_bits)
        bits[i], flags[i], ok[i] = r, fl, good
    return bits, flags, ok


@njit(error_model="numpy")
def _run_fast_sqrt(a, ebits, fbits, rounding):
    """fast.sqrt_normal over an array -> bits, flags, ok."""
    n = a.size
    bits = np.empty(n, np.int64)
    flags = np.empty(n, np.int64)
    ok = np.empty(n, np.bool_)
    for i in range(n):
        r, fl, good = fast.sqrt_normal(a[i], ebits, fbits, rounding)
        bits[i], flags[i], ok[i] = r, fl, good
    return bits, flags, ok


def normal_triples(fmt_name, n, rng):
    """Normal operands of fma whose results reach what the kernels find hard: c cancelling a*b to
    within a few ulps of its rounded value (exact results of every length); c near a*b's exponent
    (carries, one-bit cancellations); c far above or below it (sticky bits on either side; half of
    these with an exact product, b a power of two, so that only the sticky bits decide the directed
    modes); c a power of two next to a product of p + 1 bits when b's fraction is one half (ties);
    and c a power of two 2**54 or more above a product of the other sign (sums just below a power of
    two, a third of them below the smallest normal: tiny, though float64 rounds them up to it; where
    the exponent range allows, not in fp16). Products lie near both ends of the range too."""
    ebits, fbits = FORMATS[fmt_name]
    top = (1 << ebits) - 2
    bias = (1 << (ebits - 1)) - 1
    ones = (1 << fbits) - 1
    width = ebits + fbits
    cancel, near, far, tie, below_power = range(5)
    kind = rng.choice(5, n, p=[0.25, 0.2, 0.2, 0.2, 0.15])
    ends = np.select([rng.random(n) < 0.25, rng.random(n) < 0.33],
                     [rng.integers(1, 4, n), rng.integers(top - 3, top + 1, n)], rng.integers(1, top + 1, n))
    e_a = rng.integers(1, top + 1, n)
    e_b = np.clip(ends + bias - e_a + rng.integers(-1, 2, n), 1, top)
    at_min_normal = (kind == below_power) & (rng.random(n) < 0.33) & (bias - 56 >= 2)
    e_a = np.where(at_min_normal, rng.integers(1, max(bias - 56, 2) // 2 + 1, n), e_a)
    e_b = np.where(at_min_normal, rng.integers(1, max(bias - 56, 2) // 2 + 1, n), e_b)
    frac_a = np.where(rng.random(n) < 0.15, ones, rng.integers(0, ones + 1, n))
    frac_b = np.select([(kind == far) & (rng.random(n) < 0.5), rng.random(n) < 0.15, rng.random(n) < 0.3],
                       [np.zeros(n, np.int64), np.full(n, ones), np.full(n, 1 << (fbits - 1))],
                       rng.integers(0, ones + 1, n))
    sign_a, sign_b = rng.integers(0, 2, (2, n))
    a = (sign_a << width) | (e_a << fbits) | frac_a
    b = (sign_b << width) | (e_b << fbits) | frac_b
    e_p = e_a + e_b - bias  # the product's exponent field, give or take one
    apart = rng.integers(fbits + 1, 2 * fbits + 20, n) * rng.choice([-1, 1], n)
    e_c = np.select([kind == near, kind == far, kind == tie, at_min_normal],
                    [e_p + rng.integers(-3, 4, n), e_p + apart, e_p - rng.integers(0, 3, n), np.ones(n, np.int64)],
                    e_p + rng.integers(54, 60, n))
    sometimes_zero = np.where(rng.random(n) < 0.5, 0, frac_a)
    frac_c = np.select([kind == near, kind == far], [rng.integers(0, ones + 1, n), sometimes_zero], 0)
    sign_c = np.where(kind == below_power, 1 - (sign_a ^ sign_b), rng.integers(0, 2, n))
    c = (sign_c << width) | (np.clip(e_c, 1, top) << fbits) | frac_c
    for i in np.flatnonzero(kind == cancel):
        rounded, _ = ref_op("mul", fmt_name, int(a[i]), int(b[i]))
        candidate = (rounded ^ (1 << width)) + int(rng.integers(-2, 3))
        if 1 <= (candidate >> fbits) & (top + 1) <= top:  # still a normal number
            c[i] = candidate
    return a, b, c


def exponent_of(x: Fraction) -> int:
    """floor(log2 |x|) of a nonzero rational."""
    x = abs(x)
    k = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** k > x:
        k -= 1
    while Fraction(2) ** (k + 1) <= x:
        k += 1
    return k


def just_below_power_of_two(x: Fraction) -> bool:
    """|x| in [2**k - 2**(k - 54), 2**k): float64 rounds it up to 2**k (fma_float64 declines it)."""
    power = Fraction(2) ** (exponent_of(x) + 1)
    return power - abs(x) <= power / 2 ** 54


def is_midpoint(x: Fraction, fbits: int) -> bool:
    """Whether x lies halfway between two numbers of fbits fraction bits (with an unbounded exponent)."""
    scaled = abs(x) / Fraction(2) ** (exponent_of(x) - fbits - 1)
    return scaled.denominator == 1 and scaled.numerator % 2 == 1


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("fmt_name", FMA_FORMATS)
def test_fast_fma_is_exact_where_it_settles_and_settles_all_normal_results(fmt_name, rounding):
    """Both fma kernels (float64 TwoSum, and the uint64 one stochastic fp32 uses) against the
    Fraction oracle: right bits and flags where they settle, and every normal result settled (the
    float64 kernel may leave sums just below a power of two)."""
    ebits, fbits = FORMATS[fmt_name]
    rng = np.random.default_rng([RNG_SEED, ebits, fbits, ROUNDING_CODES[rounding]])
    a, b, c = normal_triples(fmt_name, N_TRIPLES, rng)
    min_normal = Fraction(2) ** (2 - (1 << (ebits - 1)))
    no_words = np.zeros(N_TRIPLES, np.uint32)
    want = [ref_op("fma", fmt_name, int(a[i]), int(b[i]), int(c[i]), rounding=rounding) for i in range(N_TRIPLES)]
    for integer in (False, True):
        bits, flags, ok = _run_fast_fma(a, b, c, ebits, fbits, ROUNDING_CODES[rounding], no_words, 32, integer)
        for i in np.flatnonzero(ok):
            assert (int(bits[i]), int(flags[i])) == want[i], (
                f"{fmt_name} fma({hex(a[i])}, {hex(b[i])}, {hex(c[i])}) {rounding} integer={integer}: fast path gave "
                f"{hex(int(bits[i]))}/{int(flags[i])}, want {hex(want[i][0])}/{want[i][1]}")
        for i in np.flatnonzero(~ok):
            exact = to_fraction(int(a[i]), fmt_name) * to_fraction(int(b[i]), fmt_name) + to_fraction(int(c[i]),
                                                                                                     fmt_name)
            normal = exact != 0 and abs(exact) >= min_normal and not want[i][1] & int(sf.Flag.OVERFLOW)
            excused = not integer and normal and just_below_power_of_two(exact)
            assert not normal or excused, (
                f"{fmt_name} fma({hex(a[i])}, {hex(b[i])}, {hex(c[i])}) {rounding} integer={integer}: a normal "
                f"result ({hex(want[i][0])}) left to the general kernel")
        assert np.count_nonzero(ok) >= N_TRIPLES // 2, f"only {np.count_nonzero(ok)} settled: the mix lost its point"


def test_fma_triples_reach_the_hard_cases():
    """The triples must include deep cancellations, ties, sums just below a power of two, and
    results that the fast kernels decline (subnormal, overflow)."""
    for fmt_name in ("fp16", "fp32"):
        rng = np.random.default_rng([RNG_SEED, len(fmt_name)])
        a, b, c = normal_triples(fmt_name, 2000, rng)
        exact = [to_fraction(int(x), fmt_name) * to_fraction(int(y), fmt_name) + to_fraction(int(z), fmt_name)
                 for x, y, z in zip(a, b, c)]
        ebits, fbits = FORMATS[fmt_name]
        min_normal, overflow = Fraction(2) ** (2 - (1 << (ebits - 1))), Fraction(2) ** (1 << (ebits - 1))
        counts = {
            "deep cancellation": sum(0 < abs(x) < abs(to_fraction(int(z), fmt_name)) / 2 ** (fbits // 2)
                                     for x, z in zip(exact, c)),
            "tie": sum(bool(x) and is_midpoint(x, fbits) for x in exact),
            "just below a power of two": sum(bool(x) and just_below_power_of_two(x) for x in exact),
            "just below the smallest normal": sum(bool(x) and just_below_power_of_two(x) and abs(x) < min_normal
                                                  for x in exact),
            "subnormal or overflow": sum(bool(x) and not min_normal <= abs(x) < overflow for x in exact),
        }
        if fmt_name == "fp16":  # no fp16 sum lies that close below a power of two
            del counts["just below a power of two"], counts["just below the smallest normal"]
        assert min(counts.values()) >= 40, (fmt_name, counts)


@pytest.mark.parametrize("fmt_name", ["fp16", "bf16", "fp32"])
def test_fast_fma_stochastic_rounding(fmt_name):
    """Stochastic rounding reads R discarded bits: fma_float64 (fp16, bf16) and fma_normal (fp32),
    the kernels loops.py uses for it, against the oracle with the same random integers."""
    ebits, fbits = FORMATS[fmt_name]
    integer = fbits > fast.FMA_FLOAT64_SR_MAX_FRACTION_BITS
    for sr_bits in (32, 3):
        rng = np.random.default_rng([RNG_SEED, ebits, fbits, sr_bits])
        a, b, c = normal_triples(fmt_name, 200, rng)
        random = rng.integers(0, 1 << sr_bits, 200).astype(np.uint32)
        bits, flags, ok = _run_fast_fma(a, b, c, ebits, fbits, int(sf.Rounding.SR), random, sr_bits, integer)
        assert np.count_nonzero(ok) >= 100
        for i in np.flatnonzero(ok):
            want = ref_op("fma", fmt_name, int(a[i]), int(b[i]), int(c[i]), rounding="sr", random=int(random[i]),
                          sr_bits=sr_bits)
            assert (int(bits[i]), int(flags[i])) == want, (
                f"{fmt_name} fma({hex(a[i])}, {hex(b[i])}, {hex(c[i])}) sr R={sr_bits} r={random[i]}: fast path gave "
                f"{hex(int(bits[i]))}/{int(flags[i])}, want {hex(want[0])}/{want[1]}")


def round_from_float64(values, fmt_name, rounding):
    """Bits and INEXACT flags of positive float64 values rounded into a format's normal range,
    given that no value is within 2**-53 (relative) of a value or midpoint of the format that it
    does not equal. True of float64's correctly rounded sqrt(x) and a / b for p-bit x, a, b, p <= 24:
    were sqrt(x) or a / b not such a value y (p + 1 bits) itself, x - y*y or a - b*y would be a
    nonzero multiple of y*y's or b*y's last place, which puts them 2**-2p or more (relative) apart."""
    ebits, fbits = FORMATS[fmt_name]
    encoding = values.view(np.uint64)
    drop = np.uint64(52 - fbits)
    low = encoding & ((np.uint64(1) << drop) - np.uint64(1))
    half = np.uint64(1) << (drop - np.uint64(1))
    assert not np.any(low == half), "a float64 value on a midpoint: the premise fails"
    inexact = low != 0
    up = {"rne": low > half, "rna": low > half, "rup": inexact}.get(rounding, np.zeros(values.size, bool))
    rounded = encoding - low + (up.astype(np.uint64) << drop)  # a carry runs into the exponent
    if rounding == "rod":
        rounded |= inexact.astype(np.uint64) << drop
    field = (rounded >> np.uint64(52)).astype(np.int64) - 1023 + (1 << (ebits - 1)) - 1
    assert np.all((field >= 1) & (field < (1 << ebits) - 1)), "a result outside the normal range"
    fraction = (rounded >> drop) & np.uint64((1 << fbits) - 1)
    return (field << fbits) | fraction.astype(np.int64), inexact.astype(np.int64) * int(sf.Flag.INEXACT)


def positive_normals(fmt_name, rng, n):
    """Every positive normal pattern of a 16-bit format; n random ones and the edges of each
    binade's significands for fp32."""
    ebits, fbits = FORMATS[fmt_name]
    first, stop = 1 << fbits, ((1 << ebits) - 1) << fbits
    if fbits < 16:
        return np.arange(first, stop, dtype=np.int64)
    fields = np.arange(1, (1 << ebits) - 1, dtype=np.int64) << fbits
    ones = (1 << fbits) - 1
    edges = (fields[:, None] | np.array([0, 1, 2, ones - 1, ones, ones >> 1, (ones >> 1) + 1])).ravel()
    return np.concatenate([edges, rng.integers(first, stop, n)])


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_fast_sqrt_against_float64_sqrt_in_every_mode(rounding):
    """sqrt_normal on every positive normal fp16 and bf16 and 2**16 fp32 ones (every exponent, both
    parities), against float64's correctly rounded square root rounded here to the format: it
    settles them all, bits and INEXACT right."""
    rng = np.random.default_rng([RNG_SEED, ROUNDING_CODES[rounding]])
    for fmt_name in ("fp16", "bf16", "fp32"):
        ebits, fbits = FORMATS[fmt_name]
        x = positive_normals(fmt_name, rng, 1 << 16)
        bits, flags, ok = _run_fast_sqrt(x, ebits, fbits, ROUNDING_CODES[rounding])
        assert ok.all(), f"{fmt_name}: declined {[hex(v) for v in x[~ok][:5]]}"
        if fmt_name == "fp16":
            values = x.astype(np.uint16).view(np.float16).astype(np.float64)
        else:  # a bf16 is the top half of an fp32
            values = (x << (32 - ebits - fbits - 1)).astype(np.uint32).view(np.float32).astype(np.float64)
        want_bits, want_flags = round_from_float64(np.sqrt(values), fmt_name, rounding)
        bad = np.flatnonzero((bits != want_bits) | (flags != want_flags))
        assert bad.size == 0, (f"{fmt_name} sqrt {rounding}: {bad.size} differ, first "
                               f"{[(hex(x[i]), hex(bits[i]), hex(want_bits[i])) for i in bad[:5]]}")


def test_fast_sqrt_against_the_fraction_oracle():
    """A second oracle for sqrt_normal: exact rationals, every mode, and what it declines."""
    rng = np.random.default_rng(RNG_SEED)
    for fmt_name in ("fp16", "bf16", "fp32"):
        ebits, fbits = FORMATS[fmt_name]
        width = ebits + fbits
        x = rng.integers(0, 1 << width, 120)
        x[:40] &= (1 << (width - 1)) - 1  # positive, of every class
        x[40:60] = rng.integers(1 << fbits, ((1 << ebits) - 1) << fbits, 20)
        for rounding in ROUNDINGS:
            bits, flags, ok = _run_fast_sqrt(x, ebits, fbits, ROUNDING_CODES[rounding])
            for i in range(x.size):
                field, negative = (int(x[i]) >> fbits) & ((1 << ebits) - 1), int(x[i]) >> width
                assert ok[i] == (0 < field < (1 << ebits) - 1 and not negative), (fmt_name, hex(x[i]))
                if ok[i]:
                    want = ref_op("sqrt", fmt_name, int(x[i]), rounding=rounding)
                    assert (int(bits[i]), int(flags[i])) == want, (fmt_name, rounding, hex(x[i]), hex(bits[i]))


def test_fp32_sqrt_and_div_equal_numpy_float32():
    """The whole loop (fast path and general kernel) in rne with the x86 NaN profile is numpy's
    float32 arithmetic, bit for bit, for every kind of operand: every fp32 in [1, 4) (every
    significand, both exponent parities) and random patterns of every class."""
    every = np.arange(0x3F800000, 0x40800000, dtype=np.uint32)
    assert np.array_equal(sf.fp32.sqrt(every), np.sqrt(every.view(np.float32)).view(np.uint32))
    rng = np.random.default_rng(RNG_SEED)
    a, b = rng.integers(0, 1 << 32, (2, 1 << 18), dtype=np.uint64).astype(np.uint32)
    b[::3] = (a[::3] & 0x807FFFFF) | (rng.integers(100, 160, a[::3].size, dtype=np.uint32) << 23)  # normal quotients
    with np.errstate(all="ignore"):
        assert np.array_equal(sf.fp32.sqrt(a, nan="x86"), np.sqrt(a.view(np.float32)).view(np.uint32))
        assert np.array_equal(sf.fp32.div(a, b, nan="x86"), (a.view(np.float32) / b.view(np.float32)).view(np.uint32))


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_fp32_div_against_float64_division_in_every_mode(rounding):
    """The fp32 div loop on normal pairs whose quotient is normal, against float64's correctly
    rounded quotient rounded here (round_from_float64), bits and flags."""
    rng = np.random.default_rng([RNG_SEED, 3, ROUNDING_CODES[rounding]])
    n = 1 << 16
    e_a = rng.integers(1, 255, n)
    e_b = np.clip(e_a - rng.integers(-120, 121, n), 1, 254)
    fractions = np.where(rng.random((2, n)) < 0.1, (1 << 23) - 1, rng.integers(0, 1 << 23, (2, n)))
    a = (rng.integers(0, 2, n) << 31) | (e_a << 23) | fractions[0]
    b = (rng.integers(0, 2, n) << 31) | (e_b << 23) | fractions[1]
    quotient = a.astype(np.uint32).view(np.float32).astype(np.float64) / b.astype(np.uint32).view(np.float32)
    keep = (np.abs(quotient) >= 2.0 ** -125) & (np.abs(quotient) < 2.0 ** 127)
    a, b, quotient = a[keep].astype(np.uint32), b[keep].astype(np.uint32), quotient[keep]
    negative = quotient < 0
    magnitude = np.abs(quotient)
    # The magnitude rounds like a positive value, with rup and rdn exchanged for negative ones.
    want_bits, want_flags = np.empty(a.size, np.int64), np.empty(a.size, np.int64)
    for sign, mode in ((False, rounding), (True, {"rup": "rdn", "rdn": "rup"}.get(rounding, rounding))):
        mode = {"rdn": "rtz"}.get(mode, mode)  # for a positive magnitude, rounding down is truncation
        part = negative == sign
        want_bits[part], want_flags[part] = round_from_float64(magnitude[part], "fp32", mode)
    want_bits |= negative.astype(np.int64) << 31
    got, got_flags = sf.fp32.div(a, b, rounding=rounding, flags=True)
    bad = np.flatnonzero((got != want_bits) | (got_flags != want_flags))
    assert bad.size == 0, f"{bad.size} of {a.size} differ, first {[(hex(a[i]), hex(b[i])) for i in bad[:5]]}"


@njit(error_model="numpy")
def _general_loop(which, a, b, c, options, random, out, flags):
    """The general kernel alone (0: fma, 1: sqrt) over flat arrays, with stochastic rounding's
    word per element: what the loops must give."""
    for i in range(out.size):
        r = int(random[i]) >> (32 - options.sr_bits) if options.stochastic else 0
        if which == 0:
            bits, fl = arith.fma(a[i], b[i], c[i], options, r)
        else:
            bits, fl = arith.sqrt(a[i], options, r)
        out[i] = bits
        flags[i] = fl


def class_mix(fmt, n, rng):
    """Bit patterns of every class (either sign): zero, subnormal, normal, max finite, infinity,
    quiet and signaling NaN; and normal numbers near 1, where fma's results cancel and stay normal."""
    fbits, ebits = fmt.fraction_bits, fmt.exponent_bits
    inf = ((1 << ebits) - 1) << fbits
    low = rng.integers(1, 1 << fbits, n)
    one = ((1 << (ebits - 1)) - 1) << fbits
    choices = [np.zeros(n, np.int64), low, rng.integers(1 << fbits, inf, n), np.full(n, inf - 1), np.full(n, inf),
               inf | (1 << (fbits - 1)) | (low >> 1), inf | np.maximum(low >> 1, 1),
               one + rng.integers(-3 << fbits, 3 << fbits, n)]
    magnitude = np.choose(rng.choice(len(choices), n, p=[0.1, 0.15, 0.25, 0.05, 0.07, 0.07, 0.06, 0.25]), choices)
    return ((rng.integers(0, 2, n) << (fmt.width - 1)) | magnitude).astype(fmt.dtype)


CONFIGURATIONS = [{"rounding": mode} for mode in ROUNDINGS] + [
    {"rounding": "rne", "ftz": True, "tininess": "before", "nan": "x86"},
    {"rounding": "rtz", "daz": True, "nan": "riscv"},
    {"rounding": "rup", "ftz": True, "daz": True, "nan": "cuda"},
    {"rounding": "sr"}, {"rounding": "sr", "sr_bits": 5},
]


@pytest.mark.parametrize("op", ["fma", "sqrt"])
@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32, sf.fp8_e5m2], ids=["fp16", "bf16", "fp32", "fp8_e5m2"])
def test_fma_and_sqrt_loops_equal_the_general_kernel(fmt, op):
    """The production loop (fast kernel, then the general kernel on what it declines) against the
    general kernel alone, bits and flags, on operands of every class in every mode, with ftz, daz,
    tininess before, the NaN profiles, and stochastic rounding (the same words on both sides)."""
    n = 2000
    for k, configuration in enumerate(CONFIGURATIONS):
        rng = np.random.default_rng([RNG_SEED, fmt.width, fmt.fraction_bits, k, len(op)])
        a, b, c = (class_mix(fmt, n, rng) for _ in range(3))
        if op == "fma":  # and a quarter of hard normal triples, for ftz and tininess near the smallest normal
            a[: n // 4], b[: n // 4], c[: n // 4] = normal_triples(fmt.name, n // 4, rng)
        if op == "sqrt":
            a[: n // 2] &= np.array(fmt.sign_mask - 1, fmt.dtype)
        options = ops._config(fmt, **configuration)
        stochastic = configuration["rounding"] == "sr"
        words = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        operands = (a, b, c) if op == "fma" else (a,)
        got, got_flags = np.empty(n, fmt.dtype), np.empty(n, np.uint8)
        loop = ops._loop_for(op, options, True, loops.RANDOM_ARRAY if stochastic else loops.NO_RANDOM)
        loop(*operands, words if stochastic else ops._NO_WORDS, got, got_flags, options)
        want, want_flags = np.empty(n, fmt.dtype), np.empty(n, np.uint8)
        _general_loop(0 if op == "fma" else 1, a, b, c, options, words, want, want_flags)
        bad = np.flatnonzero((got != want) | (got_flags != want_flags))
        assert bad.size == 0, (f"{fmt.name} {op} {configuration}: {bad.size} of {n} differ, first "
                               f"{[tuple(hex(x[i]) for x in operands) for i in bad[:3]]}")
