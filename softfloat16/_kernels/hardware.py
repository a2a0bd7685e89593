"""The host's own fused multiply-add and sums, where they are provably the model's arithmetic.

An IEEE 754 fused multiply-add ``fma(x, y, c)`` computes ``x * y + c`` exactly and rounds once. So a
chain ``c = fma(a[t], b[t], c)`` over t in order is, bit for bit:

- the sequential order of ``linalg.matmul`` with FP32 accumulation rounded to nearest even, for
  every input format whose values are all binary32 values (the product is exact inside the FMA
  whatever its size: one that leaves binary32's range overflows or underflows when it is added,
  as the model says);
- the FP32 and FP64 fused multiply-add chains of the matrix units (softfloat16.mma).

``fma`` is LLVM's ``llvm.fma`` intrinsic: one instruction on every x86-64 CPU with FMA3 and every
AArch64 CPU, else the C library's correctly rounded ``fma``. Either is correctly rounded *in the
host's floating-point environment*, which someone else in the process may have changed: flush to
zero (FTZ), denormals are zero (DAZ) or a directed rounding mode give other bits. Every kernel
here sets the environment of each thread it runs on and checks it (_kernels/environment.py:
``env_ok`` measures it with operands the compiler cannot see, ``PROBE``, passed as an argument: a
constant would be folded at compile time, in the default environment) and reports failure; the
caller then falls back to the exact integer kernels. NaN results carry the host's payload and sign: the
kernels write the caller's NaN pattern instead.

The GEMM (:func:`make_fma_gemm`) holds a tile of ``ROWS`` x ``COLS`` accumulators while streaming k,
so each element's chain runs in k order: the same bits whatever the tiling and thread count. Under
a spec of _kernels.twosum its step, and every + of the pairwise kernel (_kernels/hardware_pairwise.py),
is instead the host's sum rounded into another accumulation format or mode (``twosum.rounded_sum``),
or for FP32 products the host's binary64 sum rounded by its conversions where _kernels.checked says
that is the one rounding.
"""
import functools

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .core import RDN, RNE, RTZ, RUP
from . import checked as checks
from .checked import narrowed, undecided
from .environment import MXCSR, NEAREST, PROBE, X86, env_ok, swap_mxcsr  # noqa: F401  (X86: hardware.X86)
from .twosum import PLAIN, rounded_sum

ROWS = 4  # rows of a tile: four accumulator rows share each loaded vector of B
# Columns of a tile by float type: 64 binary32 (four AVX-512 vectors), 32 binary64. Measured on
# AVX-512 (Zen 4), 256x256x256: 4 x 64 binary32 24.6 G MAC/s, 4 x 32 19.9, 6 x 32 18.0, 4 x 16 3.5
# (LLVM leaves that one scalar); binary64 4 x 32 11.8, 4 x 64 11.5.
COLS = {np.dtype(np.float32): 64, np.dtype(np.float64): 32}
# Columns of a pairwise tile: each row's block of BLOCK operands is set up once and its trees
# streamed over the tile's columns, so wider panels amortise the set-up. Measured (Zen 4, one
# thread, fp16 inputs): 64 columns 16.6-18.7 G MAC/s, 128 23.1-27.6, 256 21.4-27.2.
PAIRWISE_COLS = {np.dtype(np.float32): 128, np.dtype(np.float64): 64}


def columns(dtype, order: str) -> int:
    """The width of the panels B is cut into for an order's kernel (sequential or pairwise)."""
    return (PAIRWISE_COLS if order == "pairwise" else COLS)[np.dtype(dtype)]


@intrinsic
def fma(typingctx, x, y, c):
    """x * y + c rounded once (LLVM's llvm.fma) for three floats of one type."""
    if not (isinstance(x, types.Float) and x == y == c):
        return None

    def codegen(context, builder, signature, args):
        ty = context.get_value_type(signature.return_type)
        name = "llvm.fma.f32" if signature.return_type == types.float32 else "llvm.fma.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty, ty, ty]), name)
        return builder.call(fn, args)

    return x(x, y, c), codegen


# The rounding modes binary arithmetic has in hardware (core's codes).
MODES = (RNE, RTZ, RUP, RDN)



@njit(cache=True, forceinline=True, error_model="numpy")
def _stored(value, nan):
    """A result as the caller's model writes it: every NaN (the host's payload and sign) is ``nan``."""
    return value if value == value else nan


@njit(cache=True, forceinline=True, error_model="numpy")
def least(keys):
    """The smallest of a 1-D array of checked keys (a loop: an array expression inside a prange body
    does not compile)."""
    low = keys[0]
    for i in range(1, keys.shape[0]):
        low = min(low, keys[i])
    return low


@functools.cache
def make_fma_gemm(cols, parallel, mode=RNE, spec=PLAIN, checked=False):
    """A compiled ``kernel(a, panels, c, has_c, out, probe, nan) -> bool``: out[i, j] = the chain
    acc = fma(a[i, t], b[t, j], acc) over t in order, from c[i, j] (+0 without ``has_c``), a NaN
    written as ``nan[0]`` (the caller's NaN). With a ``spec`` of _kernels.twosum (``mode`` RNE,
    finite operands whose products are values of their float): acc = rounded_sum(acc, a[i, t] *
    b[t, j]), each step's exact sum rounded as the spec says.

    ``checked`` (binary32 operands in binary64, a spec of a _kernels.checked kind; for BINARY32
    every product a multiple of 2**-149): each step is the host's binary64 fused multiply-add
    rounded into the accumulator by checked.narrowed; a panel of a tile where checked.undecided is
    zero is computed again with rounded_sum's steps.

    ``a`` (m, k), ``c`` and ``out`` (m, n): arrays of one float type, m a multiple of ROWS;
    ``panels`` (n // cols, k, cols): B cut into panels of ``cols`` columns (:func:`panels`). A tile
    of ROWS rows x ``cols`` columns keeps its accumulators while k streams; ``parallel`` spreads
    tiles of rows over threads (the same bits). Every + rounds as ``mode`` says: on x86 each tile
    sets its thread's MXCSR to that mode without FTZ or DAZ and restores it after; elsewhere the
    environment is only checked. Returns False when a tile's environment was not the one asked
    for (then ``out`` is meaningless)."""
    rows = prange if parallel else range  # in the closure, hence in the cache key (see matmul.make_matmul)
    control = MXCSR[mode]
    rounding, precision, emin_field, max_bits = spec  # compile-time constants (closure variables)
    fused = rounding < 0
    kind = checks.kind_of(spec) if checked else checks.BINARY32  # (unchecked: compiled, never run)
    if checked and kind == checks.NONE:
        raise ValueError(f"no checked rounding for the spec {spec}")

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def kernel(a, panels, c, has_c, out, probe, nan):
        def step(acc, x, y):
            if fused:
                return fma(x, y, acc)
            return rounded_sum(acc, x * y, rounding, precision, emin_field, max_bits)

        k = a.shape[1]
        tiles = a.shape[0] // ROWS
        good = np.ones(tiles, np.bool_)
        for tile in rows(tiles):
            saved = swap_mxcsr(control)
            good[tile] = env_ok(probe, mode)
            i0, i1, i2, i3 = tile * ROWS, tile * ROWS + 1, tile * ROWS + 2, tile * ROWS + 3
            apart = np.ones(cols, np.uint64)  # (checked: zero in a lane where a sum was undecided)
            for p in range(panels.shape[0]):
                j0 = p * cols
                panel = panels[p]
                exact = not checked
                while True:  # (checked: once more with exact steps where a sum was undecided)
                    if has_c:
                        acc0, acc1 = c[i0, j0:j0 + cols].copy(), c[i1, j0:j0 + cols].copy()
                        acc2, acc3 = c[i2, j0:j0 + cols].copy(), c[i3, j0:j0 + cols].copy()
                    else:  # +0
                        acc0, acc1 = np.zeros(cols, a.dtype), np.zeros(cols, a.dtype)
                        acc2, acc3 = np.zeros(cols, a.dtype), np.zeros(cols, a.dtype)
                    for t in range(k):
                        x0, x1, x2, x3 = a[i0, t], a[i1, t], a[i2, t], a[i3, t]
                        if exact:
                            for w in range(cols):
                                y = panel[t, w]
                                acc0[w] = step(acc0[w], x0, y)
                                acc1[w] = step(acc1[w], x1, y)
                                acc2[w] = step(acc2[w], x2, y)
                                acc3[w] = step(acc3[w], x3, y)
                        else:
                            for w in range(cols):
                                y = panel[t, w]
                                s0, s1 = fma(x0, y, acc0[w]), fma(x1, y, acc1[w])
                                s2, s3 = fma(x2, y, acc2[w]), fma(x3, y, acc3[w])
                                apart[w] = min(apart[w], min(min(undecided(s0, kind), undecided(s1, kind)),
                                                             min(undecided(s2, kind), undecided(s3, kind))))
                                acc0[w], acc1[w] = narrowed(s0, kind), narrowed(s1, kind)
                                acc2[w], acc3[w] = narrowed(s2, kind), narrowed(s3, kind)
                    if exact or least(apart) != 0:
                        break
                    exact = True
                    for w in range(cols):
                        apart[w] = 1
                for w in range(cols):
                    out[i0, j0 + w] = _stored(acc0[w], nan[0])
                    out[i1, j0 + w] = _stored(acc1[w], nan[0])
                    out[i2, j0 + w] = _stored(acc2[w], nan[0])
                    out[i3, j0 + w] = _stored(acc3[w], nan[0])
            if saved >= 0:
                swap_mxcsr(saved)
        return good.all()
    return kernel


@njit(cache=True, error_model="numpy")
def exponent_range(bits):
    """(smallest, largest) exponent field of the finite nonzero binary32 patterns in ``bits``
    (uint32, any shape; (256, -1) when there are none): integer work, no host rounding. Branch-free,
    so it vectorises: 590k patterns in 48 us, against 456 us with a branch per pattern."""
    flat = bits.ravel()
    low, high = np.int32(256), np.int32(-1)
    for i in range(flat.shape[0]):
        x = flat[i]
        field = np.int32((x >> np.uint32(23)) & np.uint32(0xFF))
        counted = (x & np.uint32(0x7FFFFFFF)) != 0 and field != 0xFF
        low = min(low, field if counted else np.int32(256))
        high = max(high, field if counted else np.int32(-1))
    return low, high


def padded(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """x as a C-contiguous array with its dimensions rounded up to multiples of rows and cols, zeros
    in the padding (zero products add +0: the padded results are discarded); x itself if it is one."""
    m, n = x.shape
    shape = (-(-m // rows) * rows, -(-n // cols) * cols)
    if shape == x.shape and x.flags.c_contiguous:
        return x
    out = np.zeros(shape, x.dtype)
    out[:m, :n] = x
    return out


@njit(cache=True, parallel=True, error_model="numpy")
def _pack(b, table, out):
    """out[p, t, w] = b[t, p * cols + w], or its value table[...] (``table`` an array; None compiles
    without it), zero past b's last column (threads over panels)."""
    k, n, cols = b.shape[0], b.shape[1], out.shape[2]
    for p in prange(out.shape[0]):
        for t in range(k):
            for w in range(cols):
                j = p * cols + w
                if table is None:
                    out[p, t, w] = b[t, j] if j < n else 0
                else:
                    out[p, t, w] = table[b[t, j]] if j < n else 0


def table_panels(b: np.ndarray, table: np.ndarray, cols: int) -> np.ndarray:
    """The panels (:func:`panels`) of B's values: its patterns (k, n) read through ``table``
    (float32, indexed by pattern) in the same pass."""
    out = np.empty((-(-b.shape[1] // cols), b.shape[0], cols), np.float32)
    _pack(np.ascontiguousarray(b), table, out)
    return out


def panels(b: np.ndarray, cols: int, parallel: bool = False) -> np.ndarray:
    """B (k, n) padded to whole panels and cut into them: (n // cols, k, cols), each contiguous; on
    Numba's threads with ``parallel`` (a small GEMM's B is packed by numpy: waking the threads
    costs more than the copy, 1 to 2 ms on a loaded two-core host against microseconds)."""
    k, n = b.shape
    count = -(-n // cols)
    out = np.empty((count, k, cols), b.dtype)
    if parallel:
        _pack(b, None, out)
    else:
        wide = np.zeros((k, count * cols), b.dtype)
        wide[:, :n] = b
        out[:] = wide.reshape(k, count, cols).transpose(1, 0, 2)
    return out


# Rows of x read into panels TRANSPOSE_BLOCK terms at a time: the block's part of a panel stays in
# the L1 cache while every row is read. Measured (Zen 4, one thread, 1024 x 1024 FP16 patterns into
# panels of 128 columns): 0.97 ms, against 1.78 ms a row at a time.
TRANSPOSE_BLOCK = 16


@njit(cache=True, parallel=True, error_model="numpy")
def _pack_rows(x, table, out):
    """out[p, t, w] = x[p * cols + w, t], or its value table[...] (``table`` an array; None compiles
    without it), zero past x's last row (threads over panels)."""
    m, k, cols = x.shape[0], x.shape[1], out.shape[2]
    for p in prange(out.shape[0]):
        for t0 in range(0, k, TRANSPOSE_BLOCK):
            t1 = min(t0 + TRANSPOSE_BLOCK, k)
            for w in range(cols):
                j = p * cols + w
                for t in range(t0, t1):
                    if table is None:
                        out[p, t, w] = x[j, t] if j < m else 0
                    else:
                        out[p, t, w] = table[x[j, t]] if j < m else 0


def row_panels(x: np.ndarray, table: np.ndarray | None, cols: int) -> np.ndarray:
    """The panels (:func:`panels`) of the (k, m) matrix x.T, from x (m, k) itself in one pass (no
    transposed copy first): its patterns' values by ``table`` (float32, indexed by pattern), or
    x's own float32 values (``table`` None)."""
    x = np.ascontiguousarray(x)
    out = np.empty((-(-x.shape[0] // cols), x.shape[1], cols), np.float32)
    _pack_rows(x, table, out)
    return out


@njit(cache=True, error_model="numpy")
def _products(a, b, out, probe):
    saved = swap_mxcsr(NEAREST)
    ok = env_ok(probe, RNE)
    for i in range(out.shape[0]):
        out[i] = a[i] * b[i]
    if saved >= 0:
        swap_mxcsr(saved)
    return ok


@njit(cache=True, error_model="numpy")
def _widen(x, out, probe):
    saved = swap_mxcsr(NEAREST)
    ok = env_ok(probe, RNE)
    for i in range(x.shape[0]):
        out[i] = np.float64(x[i])
    if saved >= 0:
        swap_mxcsr(saved)
    return ok


def widened(x: np.ndarray) -> np.ndarray | None:
    """A float32 array as float64 (exact), converted with DAZ off (numpy's conversion would read a
    subnormal as zero under the caller's DAZ); None where the environment could not be made so."""
    out = np.empty(x.size, np.float64)
    if not _widen(np.ascontiguousarray(x).ravel(), out, PROBE):
        return None
    return out.reshape(x.shape)


def products(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a * b elementwise for two float arrays of one shape whose products are all values of their
    float (exact: no rounding), with FTZ and DAZ off (MXCSR set on x86, checked elsewhere); None
    where the environment could not be made so."""
    out = np.empty(a.size, a.dtype)
    if not _products(np.ascontiguousarray(a).ravel(), np.ascontiguousarray(b).ravel(), out, PROBE):
        return None
    return out.reshape(a.shape)


def _make_gather(parallel):
    steps = prange if parallel else range  # (in the closure: the cache key)

    @njit(cache=True, parallel=parallel, error_model="numpy")
    def gather(codes, table, out):
        for i in steps(codes.shape[0]):
            out[i] = table[codes[i]]
    return gather


_GATHER = {parallel: _make_gather(parallel) for parallel in (False, True)}


def gather(codes: np.ndarray, table: np.ndarray, out: np.ndarray, parallel: bool = True) -> None:
    """out[i] = table[codes[i]] over flat arrays (with ``parallel``, threads over chunks): patterns
    widened exactly by a table of their values. One thread reads 65,536 FP16 patterns in 22 us,
    against numpy's indexing 93 us."""
    _GATHER[parallel](codes, table, out)


def _nan(dtype, nan: int | None) -> np.ndarray:
    """The NaN pattern ``nan`` (default: the format's quiet NaN) as a one-element float array."""
    bits = np.dtype(np.uint32 if dtype == np.float32 else np.uint64)
    default = 0x7FC00000 if dtype == np.float32 else 0x7FF8000000000000
    return np.array([default if nan is None else nan], bits).view(dtype)


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, parallel: bool = False,
         mode: int = RNE, nan: int | None = None, spec: tuple = PLAIN, b_columns: int = 0,
         checked: bool = False, out_dtype=None) -> np.ndarray | None:
    """The chain of fused multiply-adds ``c = a[i, t] * b[t, j] + c`` over t in order for every
    (i, j), from ``c`` (+0 when None), on the host's FMA rounding as ``mode`` says, every NaN the
    pattern ``nan`` (default: the format's quiet NaN): float32 or float64 arrays of one dtype.
    With a ``spec`` of _kernels.twosum (float32, finite, products that are binary32 values):
    ``c = rounded_sum(c, a[i, t] * b[t, j])``, each step rounded as the spec says. None where a
    thread's environment could not be made so. ``b`` may come packed already, as for
    hardware_pairwise.pairwise_gemm. ``checked``: make_fma_gemm's. ``out_dtype`` (default a's):
    float32 for binary64 sums whose results are binary32 values, converted inside the kernel, in
    the environment it sets (numpy's conversion afterwards would flush a subnormal under the
    caller's FTZ)."""
    m, n = a.shape[0], b.shape[1] if b.ndim == 2 else b_columns
    cols = COLS[a.dtype]
    ap = padded(a, ROWS, 1)
    out = np.empty((ap.shape[0], -(-n // cols) * cols), a.dtype if out_dtype is None else out_dtype)
    cp = np.empty((0, 0), a.dtype) if c is None else padded(c, ROWS, cols)  # (not read without c)
    packed = panels(b, cols, parallel) if b.ndim == 2 else b
    if not make_fma_gemm(cols, parallel, mode, spec, checked)(ap, packed, cp, c is not None, out, PROBE,
                                                              _nan(a.dtype, nan)):
        return None
    return out[:m, :n]
