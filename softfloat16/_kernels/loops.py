"""Loops that map a scalar kernel over flat arrays, specialised per kernel and format.

``make_loop`` builds one Numba loop per (kernel, format widths): the kernel is inlined and the
widths become compile-time constants (:func:`with_constants`), so the compiler folds every mask
and bias. Rounding mode and the other options stay run-time values (the same for the whole array,
so their branches predict perfectly). Loops are serial and release the GIL: softfloat16.threads
runs one loop per thread on separate runs of a large array, so results never depend on a thread
count.

The closures capture only integers and find their kernel in the module-level ``KERNELS`` tuple:
Numba keys its on-disk cache on the captured values, and integers (unlike function objects) give
the same key in every process, so a second process loads the compiled loop instead of recompiling.
"""
from collections import namedtuple

import numpy as np
from numba import njit

from . import arith, convert, fast
from .core import NO_SUBNORMALS, RNE, SIGNED, SR, Options
from .environment import NEAREST, swap_mxcsr

NAMES = ("add", "sub", "mul", "div", "eq", "lt", "le", "fma", "sqrt", "convert", "from_int", "to_float64_bits")
# A namedtuple, not a plain tuple: Numba types a plain tuple of functions as a tuple of function
# pointers (indirect calls, no inlining); a namedtuple keeps each element's own dispatcher type.
KERNELS = namedtuple("Kernels", NAMES)(
    arith.add, arith.sub, arith.mul, arith.div, convert.eq, convert.lt, convert.le,
    arith.fma, arith.sqrt, convert.convert, convert.from_int, convert.to_float64_bits)
ARITY = dict.fromkeys(NAMES[:7], 2) | {"fma": 3} | dict.fromkeys(NAMES[8:], 1)
# Operations with a vectorisable common case (fast.py), for formats no more precise or wide than
# fp32 (what fast.py's 32-bit lanes and its float64 arguments for div, sqrt and fma assume), and
# the block length of the two passes.
FAST = namedtuple("Fast", ("add", "sub", "mul", "div", "fma", "sqrt"))(
    fast.add, fast.sub, fast.mul, fast.div, fast.fma, fast.sqrt)
FAST_MAX_FRACTION_BITS = 23
FAST_MAX_EXPONENT_BITS = 8  # fast.fma_float64 reads values as float32s
# The fast kernels that keep (or, add, sub and fma, make room for) 32 discarded bits: they serve
# stochastic rounding too.
FAST_STOCHASTIC = ("add", "sub", "mul", "fma")
BLOCK = 256

# The options a loop built with defaults=True takes as compile-time constants, and their values.
DEFAULTS = namedtuple("Defaults", ("rounding", "ftz", "daz", "tininess_before", "saturate"))(RNE, 0, 0, 0, 0)

# Where a loop finds stochastic rounding's random words (its ``random`` array): nowhere (every
# other mode), or one uint32 word per element (random_bits broadcast, or a seed's Philox stream).
NO_RANDOM, RANDOM_ARRAY = 0, 1


def uses_defaults(options: Options) -> bool:
    """Whether ``options`` has the DEFAULTS, so that a loop with them folded in applies.

    >>> from softfloat16.ops import _config
    >>> from softfloat16.formats import fp16
    >>> uses_defaults(_config(fp16)), uses_defaults(_config(fp16, rounding="rtz"))
    (True, False)
    """
    # A stochastic loop folds in its rounding (SR) anyway: only the other defaults matter to it.
    names = DEFAULTS._fields[1:] if options.rounding == SR else DEFAULTS._fields
    return all(getattr(options, name) == getattr(DEFAULTS, name) for name in names)


def fast_layout(fbits, encoding):
    """Whether fast.py's kernels read the format: signed, with subnormals (so with a zero) and at
    least one fraction bit; they decline its top binade and a NaN at -0's code themselves."""
    return fbits >= 1 and bool(encoding & SIGNED) and not encoding & NO_SUBNORMALS


@njit(inline="always", error_model="numpy")
def with_constants(options, ebits, fbits, encoding, src_ebits, src_fbits, src_encoding, defaults, stochastic):
    """``options`` with a loop's compile-time constants in place of the run-time values: the format
    widths and encodings, the rounding mode of a stochastic loop (SR), and the DEFAULTS when
    ``defaults``. Inlined into the loop, whose arguments here are constants, so the compiler folds
    them through the inlined kernel. Inlined before typing (``inline="always"``), not compiled on
    its own: Numba types constant arguments as literals, so a function of its own would be
    compiled again for every loop's constants (0.1 to 0.25 s each, a fifth of a loop's compile)."""
    # Chosen before the call: Numba refuses conditional expressions among this many keywords.
    rounding = SR if stochastic else (DEFAULTS.rounding if defaults else options.rounding)
    ftz = DEFAULTS.ftz if defaults else options.ftz
    daz = DEFAULTS.daz if defaults else options.daz
    tininess_before = DEFAULTS.tininess_before if defaults else options.tininess_before
    saturate = DEFAULTS.saturate if defaults else options.saturate
    return Options(
        exponent_bits=ebits, fraction_bits=fbits, encoding=encoding, rounding=rounding, stochastic=stochastic,
        ftz=ftz, daz=daz, tininess_before=tininess_before, saturate=saturate, sr_bits=options.sr_bits,
        nan_propagate=options.nan_propagate, invalid_nan=options.invalid_nan, canonical_nan=options.canonical_nan,
        src_exponent_bits=src_ebits, src_fraction_bits=src_fbits, src_encoding=src_encoding,
    )


@njit(cache=True, forceinline=True, error_model="numpy")
def random_for(source, random, i, sr_bits):
    """Element i's stochastic-rounding integer (its word's top sr_bits bits); 0 without SR."""
    if source == RANDOM_ARRAY:
        return int(random[i]) >> (32 - sr_bits)
    return 0


def make_loop(name, ebits, fbits, encoding=0, src_ebits=0, src_fbits=0, src_encoding=0, defaults=False,
              keep_flags=True, random_source=NO_RANDOM):
    """A compiled ``loop(*operands, random, out, flags, options)`` applying kernel ``name`` elementwise.

    ``defaults=True`` also folds in the DEFAULTS (rne, no ftz, no daz, tininess after, no
    saturation), for the configuration where speed matters most (only for options that have them:
    see uses_defaults); otherwise they are read from ``options``, a ``core.Options``.
    ``keep_flags=False`` leaves ``flags`` untouched, and the compiler drops the flag logic.
    ``random_source`` says what ``random`` holds (NO_RANDOM, or RANDOM_ARRAY: one word per element).
    """
    index = NAMES.index(name)
    arity = ARITY[name]
    fast = (name in FAST._fields and fbits <= FAST_MAX_FRACTION_BITS and ebits <= FAST_MAX_EXPONENT_BITS
            and fast_layout(fbits, encoding) and (random_source == NO_RANDOM or name in FAST_STOCHASTIC))
    if fast:
        return make_fast_loop(index, FAST._fields.index(name), arity, ebits, fbits, encoding, defaults, keep_flags,
                              random_source)

    # One loop per arity (a closure over a closure would not be disk-cached: see the module doc).
    if arity == 1:
        @njit(cache=True, nogil=True, error_model="numpy")
        def loop1(a, random, out, flags, options):
            kernel = KERNELS[index]
            options = with_constants(options, ebits, fbits, encoding, src_ebits, src_fbits, src_encoding, defaults,
                                      random_source != NO_RANDOM)
            for i in range(out.size):
                bits, fl = kernel(a[i], options, random_for(random_source, random, i, options.sr_bits))
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop1
    if arity == 2:
        @njit(cache=True, nogil=True, error_model="numpy")
        def loop2(a, b, random, out, flags, options):
            kernel = KERNELS[index]
            options = with_constants(options, ebits, fbits, encoding, src_ebits, src_fbits, src_encoding, defaults,
                                      random_source != NO_RANDOM)
            for i in range(out.size):
                bits, fl = kernel(a[i], b[i], options, random_for(random_source, random, i, options.sr_bits))
                out[i] = bits
                if keep_flags:
                    flags[i] = fl
        return loop2

    @njit(cache=True, nogil=True, error_model="numpy")
    def loop3(a, b, c, random, out, flags, options):
        kernel = KERNELS[index]
        options = with_constants(options, ebits, fbits, encoding, src_ebits, src_fbits, src_encoding, defaults,
                                      random_source != NO_RANDOM)
        for i in range(out.size):
            r = random_for(random_source, random, i, options.sr_bits)
            bits, fl = kernel(a[i], b[i], c[i], options, r)
            out[i] = bits
            if keep_flags:
                flags[i] = fl
    return loop3


@njit(cache=True, forceinline=True, error_model="numpy")
def all_settled(ok, count):
    """Whether ok[:count] are all true. A loop of its own: counted inside the branch-free pass, it
    stops that pass from vectorising."""
    settled = 0
    for j in range(count):
        settled += ok[j]
    return settled == count


def make_fast_loop(index, fast_index, arity, ebits, fbits, encoding, defaults, keep_flags, random_source):
    """make_loop's loop for an operation with a fast kernel (fast.py), same arguments and results.

    Per block of BLOCK elements: a branch-free pass of the fast kernel over every element (which
    LLVM vectorises), then, if it declined any, the general kernel on those, while they are still
    in cache. The passes index slices of the block from 0: from an arbitrary ``start`` LLVM cannot
    rule out a negative index (which Numba wraps around) and loads and stores element by element
    with gather and scatter instead (fp32 add 2.9 ns per element that way, 1.1 ns this way, on
    AVX-512). One function per arity, like make_loop's.
    """
    if arity == 1:
        @njit(cache=True, nogil=True, error_model="numpy")
        def loop1_fast(a, random, out, flags, options):
            kernel, fast_kernel = KERNELS[index], FAST[fast_index]
            options = with_constants(options, ebits, fbits, encoding, 0, 0, 0, defaults, random_source != NO_RANDOM)
            ok = np.empty(BLOCK, np.bool_)
            for start in range(0, out.size, BLOCK):
                stop = min(start + BLOCK, out.size)
                a_, out_ = a[start:stop], out[start:stop]
                flags_ = flags[start:stop] if keep_flags else flags
                random_ = random[start:stop] if random_source != NO_RANDOM else random
                for i in range(stop - start):
                    bits, fl, good = fast_kernel(a_[i], options, random_for(random_source, random_, i, options.sr_bits))
                    out_[i] = bits
                    if keep_flags:
                        flags_[i] = fl
                    ok[i] = good
                if all_settled(ok, stop - start):
                    continue
                for i in range(stop - start):
                    if not ok[i]:
                        bits, fl = kernel(a_[i], options, random_for(random_source, random_, i, options.sr_bits))
                        out_[i] = bits
                        if keep_flags:
                            flags_[i] = fl
        return loop1_fast
    if arity == 2:
        @njit(cache=True, nogil=True, error_model="numpy")
        def loop2_fast(a, b, random, out, flags, options):
            kernel, fast_kernel = KERNELS[index], FAST[fast_index]
            options = with_constants(options, ebits, fbits, encoding, 0, 0, 0, defaults, random_source != NO_RANDOM)
            ok = np.empty(BLOCK, np.bool_)
            for start in range(0, out.size, BLOCK):
                stop = min(start + BLOCK, out.size)
                a_, b_, out_ = a[start:stop], b[start:stop], out[start:stop]
                flags_ = flags[start:stop] if keep_flags else flags
                random_ = random[start:stop] if random_source != NO_RANDOM else random
                for i in range(stop - start):
                    bits, fl, good = fast_kernel(a_[i], b_[i], options,
                                                 random_for(random_source, random_, i, options.sr_bits))
                    out_[i] = bits
                    if keep_flags:
                        flags_[i] = fl
                    ok[i] = good
                if all_settled(ok, stop - start):
                    continue
                for i in range(stop - start):
                    if not ok[i]:
                        bits, fl = kernel(a_[i], b_[i], options, random_for(random_source, random_, i, options.sr_bits))
                        out_[i] = bits
                        if keep_flags:
                            flags_[i] = fl
        return loop2_fast

    @njit(cache=True, nogil=True, error_model="numpy")
    def loop3_fast(a, b, c, random, out, flags, options):
        kernel, fast_kernel = KERNELS[index], FAST[fast_index]
        options = with_constants(options, ebits, fbits, encoding, 0, 0, 0, defaults, random_source != NO_RANDOM)
        ok = np.empty(BLOCK, np.bool_)
        saved = swap_mxcsr(NEAREST)  # fast.fma's TwoSum needs rounding to nearest even (fast.fma)
        for start in range(0, out.size, BLOCK):
            stop = min(start + BLOCK, out.size)
            a_, b_, c_, out_ = a[start:stop], b[start:stop], c[start:stop], out[start:stop]
            flags_ = flags[start:stop] if keep_flags else flags
            random_ = random[start:stop] if random_source != NO_RANDOM else random
            for i in range(stop - start):
                bits, fl, good = fast_kernel(a_[i], b_[i], c_[i], options,
                                             random_for(random_source, random_, i, options.sr_bits))
                out_[i] = bits
                if keep_flags:
                    flags_[i] = fl
                ok[i] = good
            if all_settled(ok, stop - start):
                continue
            for i in range(stop - start):
                if not ok[i]:
                    bits, fl = kernel(a_[i], b_[i], c_[i], options, random_for(random_source, random_, i,
                                                                                 options.sr_bits))
                    out_[i] = bits
                    if keep_flags:
                        flags_[i] = fl
        if saved >= 0:
            swap_mxcsr(saved)
    return loop3_fast


@njit(cache=True, nogil=True, error_model="numpy")
def lookup(index, table, out):
    """out[i] = table[index[i]]: ops.py's tables of results over every 16-bit input or 8-bit pair."""
    for i in range(out.size):
        out[i] = table[index[i]]


@njit(cache=True, nogil=True, error_model="numpy")
def pair_index(a, b):
    """a[i] << 8 | b[i] for two uint8 arrays: the index of a pair in ops.py's table of pairs."""
    index = np.empty(a.size, np.uint16)
    for i in range(a.size):
        index[i] = (np.uint16(a[i]) << np.uint16(8)) | np.uint16(b[i])
    return index
