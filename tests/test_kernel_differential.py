"""The fast-path loops against the general scalar kernels, bits and flags, on the same inputs.

The loops of add, sub, mul and div run fast.py's vectorised kernel and hand what it declines to
arith.py's general kernel (add, sub and mul under stochastic rounding too, with the same
words). Here the production loop (``ops._loop_for``, as every call uses it) is
compared with a loop written here that calls the general kernel alone, so the fast path must
agree with it wherever it settles an element, and the hand-over must be right where it does not:
every fp8_e5m2 pair in every rounding mode, and sampled pairs of fp16, bf16 and fp32 that include
what the fast kernel declines (zeros, subnormals, infinities, NaNs, results that overflow or
underflow). The general kernel's own correctness is tested against oracles elsewhere
(test_core_vs_oracle.py, the exhaustive rows of docs/verification.md).
"""
import numpy as np
import pytest
from numba import njit

import softfloat16 as sf
from softfloat16 import ops
from softfloat16._kernels import arith, loops
from test_fast_paths import normal_pairs

OPS = ("add", "sub", "mul", "div")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod", "sr")  # sr: with the same random words on both sides
N_SAMPLED = 120_000  # pairs per format, operation and mode


# Not cached: Numba checks a cached function against its own file only, so a cache would keep
# running an old arith.py kernel inlined here after arith.py changes.
@njit(error_model="numpy")
def general_loop(which, a, b, options, out, flags, random):
    """The general kernel alone over flat arrays: the loop without the fast path. ``random``: one
    word per element under stochastic rounding (else unused)."""
    for i in range(out.size):
        r = int(random[i]) >> (32 - options.sr_bits) if options.stochastic else 0
        if which == 0:
            bits, fl = arith.add(a[i], b[i], options, r)
        elif which == 1:
            bits, fl = arith.sub(a[i], b[i], options, r)
        elif which == 2:
            bits, fl = arith.mul(a[i], b[i], options, r)
        else:
            bits, fl = arith.div(a[i], b[i], options, r)
        out[i] = bits
        flags[i] = fl


def assert_same_as_general_kernel(fmt, op, mode, a, b, sr_bits=32, **options):
    options = ops._config(fmt, rounding=mode, sr_bits=sr_bits, **options)
    random = np.random.default_rng(a.size).integers(0, 2**32, a.size, dtype=np.uint64).astype(np.uint32)
    source = loops.RANDOM_ARRAY if mode == "sr" else loops.NO_RANDOM
    fast_bits, fast_flags = np.empty(a.size, fmt.dtype), np.empty(a.size, np.uint8)
    ops._loop_for(op, options, True, source)(a, b, random if mode == "sr" else ops._NO_WORDS, fast_bits, fast_flags,
                                             options)
    want_bits, want_flags = np.empty(a.size, fmt.dtype), np.empty(a.size, np.uint8)
    general_loop(OPS.index(op), a, b, options, want_bits, want_flags, random)
    bad = np.flatnonzero((fast_bits != want_bits) | (fast_flags != want_flags))
    details = [f"{op}({hex(a[i])}, {hex(b[i])}): loop {hex(fast_bits[i])}/{fast_flags[i]}, "
               f"general kernel {hex(want_bits[i])}/{want_flags[i]}" for i in bad[:5]]
    assert bad.size == 0, f"{fmt.name} {mode} {options}: {bad.size} of {a.size} differ, first: {details}"


def class_pairs(fmt, n, rng):
    """Each operand drawn from a class: zero, subnormal, normal, max finite, infinity, quiet or
    signaling NaN (either sign), so that every kind of declined pair occurs."""
    fraction = (1 << fmt.fraction_bits) - 1
    inf = ((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits

    def draw():
        low = rng.integers(1, fraction + 1, n)
        normal = rng.integers(1 << fmt.fraction_bits, inf, n)
        choices = [np.zeros(n, np.int64), low, normal, np.full(n, inf - 1), np.full(n, inf),
                   inf | (1 << (fmt.fraction_bits - 1)) | (low >> 1), inf | np.maximum(low >> 1, 1)]
        kind = rng.choice(len(choices), n, p=[0.12, 0.18, 0.35, 0.08, 0.09, 0.09, 0.09])
        magnitude = np.choose(kind, choices)
        return (rng.integers(0, 2, n) << (fmt.width - 1)) | magnitude
    return draw(), draw()


def sampled_pairs(fmt, op, rng):
    """Uniform bit patterns, operand classes, and normal operands with results near both ends of
    the range and at every cancellation depth (test_fast_paths.normal_pairs), a third each."""
    third = N_SAMPLED // 3
    uniform = rng.integers(0, 1 << fmt.width, (2, third), dtype=np.uint64).astype(np.int64)
    classes = class_pairs(fmt, third, rng)
    ends = normal_pairs(fmt.name, op, N_SAMPLED - 2 * third, rng)
    a, b = (np.concatenate([uniform[k], classes[k], ends[k]]).astype(fmt.dtype) for k in (0, 1))
    return a, b


@pytest.mark.parametrize("op", OPS)
def test_every_fp8_e5m2_pair(op):
    fmt = sf.fp8_e5m2
    every = np.arange(256, dtype=np.uint8)
    a, b = np.repeat(every, 256), np.tile(every, 256)
    for mode in MODES:
        assert_same_as_general_kernel(fmt, op, mode, a, b)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32], ids=["fp16", "bf16", "fp32"])
def test_sampled_pairs(fmt, op):
    for mode in MODES:
        rng = np.random.default_rng([20261201, fmt.width, fmt.fraction_bits, OPS.index(op), MODES.index(mode)])
        a, b = sampled_pairs(fmt, op, rng)
        assert_same_as_general_kernel(fmt, op, mode, a, b)


@pytest.mark.parametrize("op", ("add", "sub", "mul"))
def test_stochastic_fast_paths_with_few_random_bits(op):
    """sr_bits below 32: the fast kernels' d must be the same first R discarded bits."""
    for fmt in (sf.fp16, sf.bf16, sf.fp32):
        rng = np.random.default_rng([7, fmt.width, OPS.index(op)])
        a, b = sampled_pairs(fmt, op, rng)
        for sr_bits in (1, 5, 31):
            assert_same_as_general_kernel(fmt, op, "sr", a, b, sr_bits)


def small_pairs(fmt, n, rng):
    """Zeros, subnormals and the smallest normal numbers, either sign: sums that stay subnormal,
    cross into the normal range, cancel to zero or to a subnormal (fast.add_normal's
    ``subnormals`` case), and a few larger operands that swallow them."""
    ends = rng.choice([0, 1, 2, 3, 12], (2, n), p=[0.4, 0.3, 0.12, 0.12, 0.06])
    fraction = rng.integers(0, 1 << fmt.fraction_bits, (2, n))
    fraction[:, : n // 8] = rng.integers(0, 4, (2, n // 8))  # the smallest subnormals and zeros
    sign = rng.integers(0, 2, (2, n)) << (fmt.width - 1)
    a, b = (sign | (ends << fmt.fraction_bits) | fraction).astype(fmt.dtype)
    return a, b


@pytest.mark.parametrize("op", ("add", "sub"))
@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32], ids=["fp16", "bf16", "fp32"])
def test_subnormal_sums_under_every_ftz_daz_and_tininess(fmt, op):
    """The fast add and sub settle zero and subnormal operands and results unless ftz or daz would
    change them: the loop must equal the general kernel under every combination."""
    rng = np.random.default_rng([11, fmt.width, OPS.index(op)])
    a, b = small_pairs(fmt, 20_000, rng)
    for mode in MODES:
        for ftz in (False, True):
            for daz in (False, True):
                for tininess in ("after", "before"):
                    assert_same_as_general_kernel(fmt, op, mode, a, b, ftz=ftz, daz=daz, tininess=tininess)


def test_samples_reach_what_the_fast_kernel_declines():
    """The sampled operands must include every class the general kernel handles."""
    rng = np.random.default_rng(1)
    for fmt in (sf.fp16, sf.bf16, sf.fp32):
        a, b = sampled_pairs(fmt, "mul", rng)
        magnitude = a.astype(np.int64) & ((1 << (fmt.width - 1)) - 1)
        inf = ((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits
        kinds = {"zero": magnitude == 0, "subnormal": (magnitude > 0) & (magnitude < 1 << fmt.fraction_bits),
                 "inf": magnitude == inf, "nan": magnitude > inf}
        kinds = {name: np.count_nonzero(where) for name, where in kinds.items()}
        assert min(kinds.values()) > N_SAMPLED // 50, (fmt.name, kinds)
        _, flags = fmt.mul(a, b, flags=True)
        for flag in (sf.Flag.OVERFLOW, sf.Flag.UNDERFLOW, sf.Flag.INVALID):
            assert np.count_nonzero(flags & flag) > N_SAMPLED // 200, (fmt.name, flag)
