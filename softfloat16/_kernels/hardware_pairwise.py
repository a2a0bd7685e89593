"""The pairwise order of linalg.matmul on the host's arithmetic (the sequential one:
_kernels/hardware.py's make_fma_gemm, whose environment rules, tiles and panels this shares)."""
import functools

import numpy as np
from numba import njit, prange

from . import checked as checks
from .checked import half_rounded, narrowed, undecided
from .core import RNE
from .hardware import MXCSR, PAIRWISE_COLS, PROBE, ROWS, _nan, _stored, env_ok, fma, least, padded, panels, swap_mxcsr
from .twosum import BINARY32_IN_BINARY64, PLAIN, rounded_sum

MAX_DEPTH = 64  # partial sums of the pairwise tree: enough for k < 2**63
BLOCK = 16  # products the pairwise kernel sums as one tree in registers


@functools.cache
def make_pairwise_gemm(cols, parallel, mode=RNE, spec=PLAIN, checked=False):
    """A compiled ``kernel(a, panels, out, probe, nan) -> bool``: out[i, j] = the products
    a[i, t] * b[t, j] summed as matmul.pairwise_row's binary tree (a binary counter: while the two
    newest partial sums cover equally many products they become older + newer; at the end the
    partial sums are added newest first; k == 1 gives +0 + the product), every + one binary32
    addition of the host.

    Exact only where every product is a binary32 value (the caller checks the formats): a
    product is then one multiplication, and each + rounds the exact sum of its operands once, as
    the order says. Operands as for hardware.make_fma_gemm (binary32); the tree's shape depends on
    k alone, so every lane of a tile takes the same steps. ``mode``: as for make_fma_gemm; with a
    ``spec`` of _kernels.twosum (``mode`` RNE, finite operands) each + is rounded_sum's, except
    under twosum.BINARY32_IN_BINARY64 a + of two partial sums (binary32 values already): the
    host's binary64 sum converted to binary32, the same rounding (that spec's comment).

    ``checked`` (binary32 operands in binary64, a spec of a _kernels.checked kind; for BINARY32
    every product a multiple of 2**-149): in a block, a + of two products is the host's fused
    multiply-add (one rounding into binary64) rounded into the accumulator by checked.narrowed,
    and so is a + of two partial sums (exact in binary64: FP32 and FP16 values; FP16 ones are added
    in binary32 and rounded by checked.half_rounded). A panel where checked.undecided is zero is
    summed again with rounded_sum's exact steps."""
    rows = prange if parallel else range
    control = MXCSR[mode]
    rounding, precision, emin_field, max_bits = spec  # compile-time constants (closure variables)
    rounded_twice = spec == BINARY32_IN_BINARY64
    kind = checks.kind_of(spec) if checked else checks.BINARY32
    if checked and kind == checks.NONE:
        raise ValueError(f"no checked rounding for the spec {spec}")
    in_binary32 = checked and rounded_twice  # partial sums added in binary32 itself
    away = checks.ties_away(spec)  # (a sum of two FP32 values on a midpoint is exact: undecided for ties away)

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, panels, out, probe, nan):
        def add(x, y):
            return rounded_sum(x, y, rounding, precision, emin_field, max_bits)

        def merge(x, y):  # a + of two partial sums (values of the accumulation format)
            if rounded_twice:
                return np.float64(np.float32(x + y))
            return add(x, y)

        def tree8(x, panel, t, o, w):  # the balanced tree of x[o + u] * panel[t + o + u, w], u < 8
            return merge(merge(add(x[o] * panel[t + o, w], x[o + 1] * panel[t + o + 1, w]),
                               add(x[o + 2] * panel[t + o + 2, w], x[o + 3] * panel[t + o + 3, w])),
                         merge(add(x[o + 4] * panel[t + o + 4, w], x[o + 5] * panel[t + o + 5, w]),
                               add(x[o + 6] * panel[t + o + 6, w], x[o + 7] * panel[t + o + 7, w])))

        def leaf(x, panel, t, o, w):  # (checked) x[o] * b + x[o + 1] * b rounded once into binary64
            return fma(x[o], panel[t + o, w], x[o + 1] * panel[t + o + 1, w])

        def joined(u, v, apart, w):  # (checked) a + of two partial sums
            s = u + v
            if away:
                apart[w] = min(apart[w], undecided(s, kind))
            return narrowed(s, kind)

        k = a.shape[1]
        tiles = a.shape[0] // ROWS
        # One job per tile and panel, panel by panel: consecutive jobs (one thread's) share B's panel
        # while it is in cache.
        good = np.ones(tiles * panels.shape[0], np.bool_)
        for job in rows(tiles * panels.shape[0]):
            saved = swap_mxcsr(control)
            good[job] = env_ok(probe, mode)
            q, i0 = job // tiles, (job % tiles) * ROWS
            stack = np.empty((ROWS, MAX_DEPTH, cols), a.dtype)
            sizes = np.empty(MAX_DEPTH, np.int64)
            p = np.empty((ROWS, cols), a.dtype)
            apart = np.ones(cols, np.uint64)  # (checked: zero in a lane where a sum was undecided)
            panel = panels[q]
            exact = not checked
            while True:  # (checked: once more with exact steps where a sum was undecided)
                depth = 0
                for t in range(0, k, 1):
                    if t % BLOCK == 0 and t + BLOCK <= k:
                        # BLOCK products from a multiple of BLOCK: the counter's balanced tree of
                        # them in registers, then one partial sum (the state the counter reaches).
                        for r in range(ROWS):
                            x = a[i0 + r, t:t + BLOCK]
                            if exact:
                                for w in range(cols):
                                    p[r, w] = merge(tree8(x, panel, t, 0, w), tree8(x, panel, t, 8, w))
                                continue
                            for w in range(cols):
                                s0, s1, s2, s3 = (leaf(x, panel, t, 0, w), leaf(x, panel, t, 2, w),
                                                  leaf(x, panel, t, 4, w), leaf(x, panel, t, 6, w))
                                s4, s5, s6, s7 = (leaf(x, panel, t, 8, w), leaf(x, panel, t, 10, w),
                                                  leaf(x, panel, t, 12, w), leaf(x, panel, t, 14, w))
                                apart[w] = min(apart[w], min(
                                    min(min(undecided(s0, kind), undecided(s1, kind)),
                                        min(undecided(s2, kind), undecided(s3, kind))),
                                    min(min(undecided(s4, kind), undecided(s5, kind)),
                                        min(undecided(s6, kind), undecided(s7, kind)))))
                                if in_binary32:  # binary32 additions of binary32 values: each rounded once
                                    n0, n1, n2, n3 = np.float32(s0), np.float32(s1), np.float32(s2), np.float32(s3)
                                    n4, n5, n6, n7 = np.float32(s4), np.float32(s5), np.float32(s6), np.float32(s7)
                                    p[r, w] = np.float64(((n0 + n1) + (n2 + n3)) + ((n4 + n5) + (n6 + n7)))
                                elif kind == checks.FP16:  # FP16 values added in binary32, then to FP16
                                    h0, h1 = np.float32(narrowed(s0, kind)), np.float32(narrowed(s1, kind))
                                    h2, h3 = np.float32(narrowed(s2, kind)), np.float32(narrowed(s3, kind))
                                    h4, h5 = np.float32(narrowed(s4, kind)), np.float32(narrowed(s5, kind))
                                    h6, h7 = np.float32(narrowed(s6, kind)), np.float32(narrowed(s7, kind))
                                    p[r, w] = np.float64(half_rounded(
                                        half_rounded(half_rounded(h0 + h1) + half_rounded(h2 + h3))
                                        + half_rounded(half_rounded(h4 + h5) + half_rounded(h6 + h7))))
                                else:
                                    v0, v1, v2, v3 = (narrowed(s0, kind), narrowed(s1, kind), narrowed(s2, kind),
                                                      narrowed(s3, kind))
                                    v4, v5, v6, v7 = (narrowed(s4, kind), narrowed(s5, kind), narrowed(s6, kind),
                                                      narrowed(s7, kind))
                                    left = joined(joined(v0, v1, apart, w), joined(v2, v3, apart, w), apart, w)
                                    right = joined(joined(v4, v5, apart, w), joined(v6, v7, apart, w), apart, w)
                                    p[r, w] = joined(left, right, apart, w)
                        size = BLOCK
                    elif t < k - k % BLOCK:
                        continue  # inside a block, summed above
                    else:
                        for r in range(ROWS):
                            x0 = a[i0 + r, t]
                            for w in range(cols):
                                p[r, w] = x0 * panel[t, w]
                        size = 1
                    while depth > 0 and sizes[depth - 1] == size:
                        depth -= 1
                        for r in range(ROWS):  # two single products are not partial sums yet
                            for w in range(cols):
                                p[r, w] = (add(stack[r, depth, w], p[r, w]) if size == 1 else
                                           merge(stack[r, depth, w], p[r, w]))
                        size *= 2
                    for r in range(ROWS):
                        for w in range(cols):
                            stack[r, depth, w] = p[r, w]
                    sizes[depth] = size
                    depth += 1
                if exact or least(apart) != 0:
                    break
                exact = True
            if depth == 0:
                for r in range(ROWS):  # (loops, not array expressions: those inside prange do not compile)
                    for w in range(cols):
                        p[r, w] = 0
            else:
                depth -= 1
                for r in range(ROWS):
                    for w in range(cols):  # k == 1: +0 + the product; else the newest partial sum
                        p[r, w] = add(a.dtype.type(0), stack[r, depth, w]) if k == 1 else stack[r, depth, w]
                raw = sizes[depth] == 1  # the newest may be a single product (only it)
                while depth > 0:
                    depth -= 1
                    for r in range(ROWS):
                        for w in range(cols):
                            older = stack[r, depth, w]
                            p[r, w] = add(older, p[r, w]) if raw else merge(older, p[r, w])
                    raw = False
            for r in range(ROWS):
                for w in range(cols):
                    out[i0 + r, q * cols + w] = _stored(p[r, w], nan[0])
            if saved >= 0:
                swap_mxcsr(saved)
        return good.all()
    return kernel


def pairwise_gemm(a: np.ndarray, b: np.ndarray, parallel: bool = False, mode: int = RNE,
                  nan: int | None = None, spec: tuple = PLAIN, b_columns: int = 0,
                  checked: bool = False, out_dtype=None) -> np.ndarray | None:
    """The pairwise order's sums of the products a[i, t] * b[t, j] (float32 arrays whose products
    are all binary32 values) on the host's binary32 arithmetic, every + rounded as ``mode`` says
    (or, with a ``spec`` of _kernels.twosum, as it says: finite operands), every NaN the pattern
    ``nan``; None where a thread's environment could not be made so (hardware.make_fma_gemm).
    ``b`` may come packed already (hardware.panels, hardware.row_panels: ``columns(dtype,
    "pairwise")`` wide), its ``b_columns`` columns given. ``checked``: make_pairwise_gemm's;
    ``out_dtype``: hardware.gemm's."""
    m, n = a.shape[0], b.shape[1] if b.ndim == 2 else b_columns
    cols = PAIRWISE_COLS[a.dtype]
    ap = padded(a, ROWS, 1)
    out = np.empty((ap.shape[0], -(-n // cols) * cols), a.dtype if out_dtype is None else out_dtype)
    packed = panels(b, cols, parallel) if b.ndim == 2 else b
    if not make_pairwise_gemm(cols, parallel, mode, spec, checked)(ap, packed, out, PROBE, _nan(a.dtype, nan)):
        return None
    return out[:m, :n]
