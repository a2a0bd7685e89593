"""Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3" (SC 2011): the generator Random123 and cuRAND call philox4x32_10.

It maps a 128-bit counter and a 64-bit key to 128 random bits, with no state: any word of the
stream is computed directly from its index, so results never depend on how an array is split into
blocks or threads. One round, on counter words (x0, x1, x2, x3) and key (k0, k1), is

    hi0:lo0 = 0xD2511F53 * x0,  hi1:lo1 = 0xCD9E8D57 * x2     (32 x 32 -> 64-bit products)
    (x0, x1, x2, x3) <- (hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0)

and the key is bumped by the Weyl constants (0x9E3779B9, 0xBB67AE85), mod 2**32, between rounds.

Every 32-bit value is held in a uint64 whose top half is zero: a product of two of them is then
exact, and LLVM sees the 32 x 32 -> 64-bit multiply it can vectorise (vpmuludq).

The stream of docs/formats-spec.md ("Stochastic rounding"): the word of flat index i is output word
``i & 3`` of counter ``(c & 0xFFFFFFFF, c >> 32, 0, 0)``, c = i >> 2, under key (key_lo, key_hi).
"""
import numpy as np
from numba import njit

# Typed numpy scalars: Numba freezes them as uint64 constants; a plain int would be an int64, and
# uint64 op int64 is float64 in Numba.
MASK32 = np.uint64(0xFFFFFFFF)
SHIFT32 = np.uint64(32)
MULTIPLIER_0 = np.uint64(0xD2511F53)
MULTIPLIER_1 = np.uint64(0xCD9E8D57)
WEYL_0 = np.uint64(0x9E3779B9)  # the golden ratio's fraction, 32 bits
WEYL_1 = np.uint64(0xBB67AE85)  # sqrt(3) - 1, 32 bits
ROUNDS = 10


@njit(cache=True, forceinline=True, error_model="numpy")
def philox_rounds(x0, x1, x2, x3, k0, k1):
    """The ten rounds on 32-bit values held in uint64s; returns the four output words (uint64)."""
    for round_index in range(ROUNDS):
        if round_index > 0:
            k0 = (k0 + WEYL_0) & MASK32
            k1 = (k1 + WEYL_1) & MASK32
        product_0 = MULTIPLIER_0 * x0
        product_1 = MULTIPLIER_1 * x2
        x0, x1, x2, x3 = ((product_1 >> SHIFT32) ^ x1 ^ k0, product_1 & MASK32,
                          (product_0 >> SHIFT32) ^ x3 ^ k1, product_0 & MASK32)
    return x0, x1, x2, x3


@njit(cache=True, forceinline=True, error_model="numpy")
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0, c1, c2, c3) and key (k0, k1), each a 32-bit value (only the low
    32 bits of each argument are used). Returns the four output words as np.uint32."""
    x0, x1, x2, x3 = philox_rounds(
        np.uint64(c0) & MASK32, np.uint64(c1) & MASK32, np.uint64(c2) & MASK32, np.uint64(c3) & MASK32,
        np.uint64(k0) & MASK32, np.uint64(k1) & MASK32)
    return np.uint32(x0), np.uint32(x1), np.uint32(x2), np.uint32(x3)


@njit(cache=True, forceinline=True, error_model="numpy")
def counter_words(counter, k0, k1):
    """The four words of stream counter ``counter`` (a uint64): counter (lo, hi, 0, 0)."""
    zero = np.uint64(0)
    return philox_rounds(counter & MASK32, counter >> SHIFT32, zero, zero, k0, k1)


@njit(cache=True, forceinline=True, error_model="numpy")
def store_partial(counter, k0, k1, first_word, end_word, out, position):
    """Store words first_word .. end_word - 1 of ``counter`` at out[position], out[position + 1], ..."""
    w0, w1, w2, w3 = counter_words(counter, k0, k1)
    for word in range(first_word, end_word):
        value = w0 if word == 0 else w1 if word == 1 else w2 if word == 2 else w3
        out[position + word - first_word] = np.uint32(value)


@njit(cache=True, forceinline=True, nogil=True, error_model="numpy")
def fill_words(key_lo, key_hi, start, out):
    """out[j] = the 32-bit stream word of flat index start + j, for a uint32 array ``out``.

    Each counter's four words are computed once. The loop over whole counters has no branches, so
    LLVM vectorises it; a counter cut by the start or the end of ``out`` is stored apart.
    """
    count = out.shape[0]
    if count == 0:
        return
    k0 = np.uint64(key_lo) & MASK32
    k1 = np.uint64(key_hi) & MASK32
    start = np.uint64(start)
    counter = start >> np.uint64(2)
    last_counter = (start + np.uint64(count - 1)) >> np.uint64(2)
    first_word = np.int64(start & np.uint64(3))
    if counter == last_counter:  # everything inside one counter
        store_partial(counter, k0, k1, first_word, first_word + count, out, 0)
        return
    position = 0
    if first_word != 0:
        store_partial(counter, k0, k1, first_word, 4, out, 0)
        position = 4 - first_word
        counter += np.uint64(1)
    whole = np.uint64((count - position) >> 2)
    # Unsigned indices: Numba emits no negative-index wraparound code, which would stop the
    # vectoriser.
    base = np.uint64(position)
    for j in range(whole):
        w0, w1, w2, w3 = counter_words(counter + j, k0, k1)
        slot = base + np.uint64(4) * j
        out[slot] = np.uint32(w0)
        out[slot + np.uint64(1)] = np.uint32(w1)
        out[slot + np.uint64(2)] = np.uint32(w2)
        out[slot + np.uint64(3)] = np.uint32(w3)
    position += 4 * np.int64(whole)
    if position < count:
        store_partial(counter + whole, k0, k1, 0, count - position, out, position)
