"""Edge-biased bit patterns for the core's tests (independent of the core's own code).

Values are built from fields: sign, an exponent field drawn near the interesting ends (0, 1, the
bias, the top) and a fraction with TestFloat-like patterns (0, 1, all ones, runs, random).
"""
import numpy as np
from hypothesis import strategies as st

from oracle import FORMATS


def spec(fmt):
    ebits, fbits = FORMATS[fmt]
    return ebits, fbits, (1 << (ebits - 1)) - 1


def fraction_patterns(fbits):
    ones = (1 << fbits) - 1
    return st.one_of(
        st.sampled_from([0, 1, ones, 1 << (fbits - 1), ones >> 1, ones - 1, 3, ones ^ 1]),
        st.integers(0, fbits).map(lambda k: ((1 << k) - 1) << (fbits - k)),   # leading ones
        st.integers(0, fbits).map(lambda k: (1 << k) - 1),                    # trailing ones
        st.integers(0, ones),
    )


def exponent_fields(ebits, fbits):
    top = (1 << ebits) - 1
    bias = (1 << (ebits - 1)) - 1
    return st.one_of(
        st.sampled_from([0, 1, 2, top - 1, top - 2, bias, bias - 1, bias + 1]),
        st.integers(0, min(fbits + 3, top)),                 # subnormal products / results
        st.integers(max(0, top - fbits - 3), top),           # overflow region (and inf/NaN)
        st.integers(0, top),
    )


def bit_patterns(fmt):
    """Any bit pattern of ``fmt``, biased towards zeros, subnormals, extremes, inf and NaN."""
    ebits, fbits, _ = spec(fmt)
    return st.builds(
        lambda s, e, f: (s << (ebits + fbits)) | (e << fbits) | f,
        st.integers(0, 1), exponent_fields(ebits, fbits), fraction_patterns(fbits),
    )


def near_pair(fmt):
    """(a, b) with exponent fields within a few precisions of each other: the rounding-boundary zone
    of add/sub (ties, cancellation, sticky bits)."""
    ebits, fbits, _ = spec(fmt)
    top = (1 << ebits) - 1

    def build(a, delta, s, f):
        e = min(max(((a >> fbits) & top) + delta, 0), top - 1)
        return a, (s << (ebits + fbits)) | (e << fbits) | f

    return st.builds(build, bit_patterns(fmt), st.integers(-fbits - 4, fbits + 4),
                     st.integers(0, 1), fraction_patterns(fbits))


options = st.fixed_dictionaries({
    "ftz": st.booleans(), "daz": st.booleans(),
    "nan": st.sampled_from(["ieee", "x86", "riscv", "cuda"]),
    "tininess": st.sampled_from(["after", "before"]),
})
plain_options = st.just({"ftz": False, "daz": False, "nan": "ieee", "tininess": "after"})


def random_bit_patterns(fmt, n, rng):
    """numpy version of ``bit_patterns``: n edge-biased patterns from a numpy Generator."""
    ebits, fbits, bias = spec(fmt)
    top = (1 << ebits) - 1
    ones = (1 << fbits) - 1
    sign = rng.integers(0, 2, n)
    exp_choices = np.array([0, 1, 2, top - 1, top - 2, bias, bias - 1, bias + 1, top])
    kind = rng.integers(0, 4, n)
    exponent = np.select(
        [kind == 0, kind == 1, kind == 2],
        [exp_choices[rng.integers(0, len(exp_choices), n)],
         rng.integers(0, min(fbits + 3, top) + 1, n),
         rng.integers(max(0, top - fbits - 3), top + 1, n)],
        rng.integers(0, top + 1, n))
    k = rng.integers(0, fbits + 1, n)
    frac_choices = np.array([0, 1, ones, 1 << (fbits - 1), ones >> 1, ones - 1, 3 & ones, ones ^ 1])
    fkind = rng.integers(0, 4, n)
    fraction = np.select(
        [fkind == 0, fkind == 1, fkind == 2],
        [frac_choices[rng.integers(0, len(frac_choices), n)],
         ((1 << k) - 1) << (fbits - k),
         (1 << k) - 1],
        rng.integers(0, ones + 1, n))
    return ((sign << (ebits + fbits)) | (exponent << fbits) | fraction).astype(np.int64)


def random_near_pairs(fmt, n, rng):
    """numpy version of ``near_pair``."""
    ebits, fbits, _ = spec(fmt)
    top = (1 << ebits) - 1
    a = random_bit_patterns(fmt, n, rng)
    b = random_bit_patterns(fmt, n, rng)
    e = np.clip(((a >> fbits) & top) + rng.integers(-fbits - 4, fbits + 5, n), 0, top - 1)
    b = (b & ~(top << fbits)) | (e << fbits)
    return a, b
