"""The block-scaled GEMM of softfloat16.mx.matmul on the host's arithmetic, where it provably gives
the exact kernel's bits (_kernels.blockscale.block_scaled_matmul).

The model: for each block of K in increasing order, the exact dot product of the element values
times the two block scales, rounded once to FP32 (to nearest even), added to an FP32 accumulator
from +0 (each + to nearest even); then, for NVFP4, one FP32 multiplication by the per-tensor factor.

On the host, for finite elements and scales (the caller checks, and that every block's exact sum
and its product with the two scales fit in binary64's 53 bits, see :func:`exact_in_binary64`):

- each product of two element values, and every partial sum of a block, is a binary64 value, so
  the host's binary64 fused multiply-adds compute the block's dot product exactly (in any order);
- times the two scales' product (itself exact) is exact again, and the host's conversion to
  binary32 is the one rounding to nearest even (overflow to infinity, subnormals kept);
- the accumulator's + and the final factor are binary32 operations of the host.

The tile (hardware.ROWS rows x ``cols`` binary64 columns of B's panels) keeps the rows'
accumulators while the blocks stream; each element's steps are the model's, in its order, so the
bits depend on no tiling or thread count. The environment is set and checked per tile as in
_kernels.hardware (x86's MXCSR: nearest even, no FTZ, no DAZ); False when it could not be.
"""
import functools

import numpy as np
from numba import njit, prange

from .core import RNE
from .hardware import MXCSR, ROWS, _stored, env_ok, fma, swap_mxcsr

COLS = 32  # binary64 columns of a tile: four AVX-512 vectors


@functools.cache
def make_block_scaled_gemm(parallel):
    """A compiled ``kernel(a, a_scales, panels, scale_panels, block, factor, has_factor, out,
    probe, nan) -> bool``.

    ``a`` (m, k) binary64 element values, m a multiple of ROWS; ``a_scales`` (m, blocks) binary64
    scale values; ``panels`` (n // COLS, k, COLS) and ``scale_panels`` (n // COLS, blocks, COLS):
    B's element and scale values cut into panels (hardware.panels); ``block``: the block size (the
    last block may be shorter); ``factor`` (binary32) multiplies every result where
    ``has_factor``; ``out`` (m, n) binary32, every NaN written as ``nan[0]``."""
    rows = prange if parallel else range
    control = MXCSR[RNE]

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, a_scales, panels, scale_panels, block, factor, has_factor, out, probe, nan):
        k = a.shape[1]
        blocks = a_scales.shape[1]
        tiles = a.shape[0] // ROWS
        good = np.ones(tiles, np.bool_)
        for tile in rows(tiles):
            saved = swap_mxcsr(control)
            good[tile] = env_ok(probe, RNE)
            i0, i1, i2, i3 = tile * ROWS, tile * ROWS + 1, tile * ROWS + 2, tile * ROWS + 3
            for p in range(panels.shape[0]):
                panel, scales = panels[p], scale_panels[p]
                acc0, acc1 = np.zeros(COLS, np.float32), np.zeros(COLS, np.float32)
                acc2, acc3 = np.zeros(COLS, np.float32), np.zeros(COLS, np.float32)
                dot0, dot1 = np.empty(COLS, np.float64), np.empty(COLS, np.float64)
                dot2, dot3 = np.empty(COLS, np.float64), np.empty(COLS, np.float64)
                for q in range(blocks):
                    dot0[:], dot1[:], dot2[:], dot3[:] = 0.0, 0.0, 0.0, 0.0  # +0: an all-zero block stays +0
                    for t in range(q * block, min(q * block + block, k)):
                        x0, x1, x2, x3 = a[i0, t], a[i1, t], a[i2, t], a[i3, t]
                        for w in range(COLS):
                            y = panel[t, w]
                            dot0[w] = fma(x0, y, dot0[w])
                            dot1[w] = fma(x1, y, dot1[w])
                            dot2[w] = fma(x2, y, dot2[w])
                            dot3[w] = fma(x3, y, dot3[w])
                    s0, s1, s2, s3 = a_scales[i0, q], a_scales[i1, q], a_scales[i2, q], a_scales[i3, q]
                    for w in range(COLS):
                        sb = scales[q, w]
                        acc0[w] += np.float32(dot0[w] * (s0 * sb))
                        acc1[w] += np.float32(dot1[w] * (s1 * sb))
                        acc2[w] += np.float32(dot2[w] * (s2 * sb))
                        acc3[w] += np.float32(dot3[w] * (s3 * sb))
                j0 = p * COLS
                for w in range(COLS):
                    if has_factor:
                        acc0[w] *= factor
                        acc1[w] *= factor
                        acc2[w] *= factor
                        acc3[w] *= factor
                    out[i0, j0 + w] = _stored(acc0[w], nan[0])
                    out[i1, j0 + w] = _stored(acc1[w], nan[0])
                    out[i2, j0 + w] = _stored(acc2[w], nan[0])
                    out[i3, j0 + w] = _stored(acc3[w], nan[0])
            if saved >= 0:
                swap_mxcsr(saved)
        return good.all()
    return kernel


def exact_in_binary64(a_range: tuple[int, int], b_range: tuple[int, int], block: int, scale_bits: int) -> bool:
    """Whether every block's exact dot product, times a product of two scales of ``scale_bits``
    significand bits together, is a binary64 value: each operand's ``(lowest, top)`` exponents —
    every nonzero element is a multiple of 2**lowest and below 2**top — bound a block's sum between
    multiples of 2**(lowest_a + lowest_b) and 2**(top_a + top_b + bits of ``block``)."""
    span = a_range[1] + b_range[1] + int(block).bit_length() - (a_range[0] + b_range[0])
    return span + scale_bits <= 53
