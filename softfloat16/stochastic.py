"""The random stream of stochastic rounding with ``seed=``, as docs/formats-spec.md pins it down.

Element i (its flat, C-order index in the result) reads the i-th 32-bit word of the Philox4x32-10
stream keyed by the seed: word ``i & 3`` of counter ``(c & 0xFFFFFFFF, c >> 32, 0, 0)``,
c = i >> 2, with key ``(seed & 0xFFFFFFFF, seed >> 32)``. The same words come out whatever the
chunking, so :func:`random_words` regenerates exactly what an operation used, anywhere: the top
R bits of an element's word are its R-bit random integer r.
"""
from __future__ import annotations

import numbers

import numpy as np

from ._kernels.philox import fill_words

SEED_LIMIT = 1 << 64
# Flat indices are handed to the kernel as int64.
INDEX_LIMIT = 1 << 63


def seed_key(seed: int | np.integer) -> tuple[int, int]:
    """The Philox key ``(key_lo, key_hi)`` of ``seed``, an integer in [0, 2**64).

    Raises TypeError for a bool, a float or any non-integer, ValueError for a negative seed or
    one of 2**64 or more.

    >>> [hex(word) for word in seed_key(0x0123456789ABCDEF)]
    ['0x89abcdef', '0x1234567']
    >>> seed_key(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed: -1 is outside [0, 2**64); stochastic rounding needs an integer seed in that range
    """
    # bool is an Integral; a seed of True is far more likely a mistake than a choice.
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected an integer in [0, 2**64), got {type(seed).__name__} {seed!r}")
    value = int(seed)
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(
            f"seed: {value} is outside [0, 2**64); stochastic rounding needs an integer seed in that range")
    return value & 0xFFFFFFFF, value >> 32


def random_words(seed: int | np.integer, shape: int | tuple[int, ...], start: int = 0) -> np.ndarray:
    """The stream words of flat indices start, start + 1, ..., as a uint32 array of ``shape``.

    ``random_words(seed, result.shape)`` gives each element of an operation's result the word its
    stochastic rounding used; ``start`` picks a piece of a larger array's stream.

    >>> [hex(word) for word in random_words(0, 4)]  # Philox4x32-10 of counter 0, key 0
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    >>> whole = random_words(2024, (3, 5))
    >>> np.array_equal(whole.ravel()[7:], random_words(2024, 8, start=7))
    True
    """
    key_lo, key_hi = seed_key(seed)
    if isinstance(start, (bool, np.bool_)) or not isinstance(start, numbers.Integral):
        raise TypeError(f"start: expected a non-negative integer, got {type(start).__name__} {start!r}")
    words = np.empty(shape, dtype=np.uint32)  # numpy validates the shape
    if not 0 <= int(start) <= INDEX_LIMIT - words.size:
        raise ValueError(f"start: {int(start)} must be in [0, 2**63 - {words.size}] (flat indices fit an int64)")
    fill_words(key_lo, key_hi, int(start), words.reshape(-1))
    return words


def check_sr_bits(sr_bits) -> int:
    """R, the number of discarded bits stochastic rounding compares: an integer from 1 to 32.

    >>> check_sr_bits(8)
    8
    """
    if isinstance(sr_bits, (bool, np.bool_)) or not isinstance(sr_bits, numbers.Integral) or not 1 <= sr_bits <= 32:
        raise ValueError(f"sr_bits: expected an integer from 1 to 32, got {sr_bits!r}")
    return int(sr_bits)


def randomness(stochastic: bool, seed, random_bits, shape: tuple, what: str = "the result") -> tuple:
    """Validate stochastic rounding's source of randomness -> ``(seed, words)``: ``(None, None)``
    when not ``stochastic``, ``(seed, None)`` for a seed (checked), ``(None, words)`` for
    ``random_bits`` (flat uint32 words broadcast to ``shape``). The one check for every caller.

    >>> randomness(True, 5, None, (2,))
    (5, None)
    >>> randomness(True, None, np.uint32(7), (2,))[1]
    array([7, 7], dtype=uint32)
    """
    if not stochastic:
        for name, value in (("seed", seed), ("random_bits", random_bits)):
            if value is not None:
                raise ValueError(f"{name}: only stochastic rounding (rounding='sr') uses it")
        return None, None
    if (seed is None) == (random_bits is None):
        raise ValueError("rounding='sr' needs its randomness: pass exactly one of seed= (an integer) or "
                         f"random_bits= (a uint32 array broadcasting to {what})")
    if seed is not None:
        seed_key(seed)
        return seed, None
    words = np.asarray(random_bits)
    if words.dtype.kind not in "iu":
        raise TypeError(f"random_bits: expected unsigned 32-bit integers, got dtype {words.dtype}")
    if words.size and (words.min() < 0 or int(words.max()) >> 32):
        raise ValueError("random_bits: values must lie in [0, 2**32)")
    try:
        words = np.broadcast_to(words, shape)
    except ValueError:
        raise ValueError(f"random_bits: shape {words.shape} does not broadcast to {what}'s shape {shape}") from None
    return None, np.ascontiguousarray(words, dtype=np.uint32).reshape(-1)
