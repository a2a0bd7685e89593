"""One compiled interpreter for straight-line FP32 programs: the step programs of
:mod:`softfloat16.fp32math` (exp, log, tanh, ...) as traced by :mod:`softfloat16.fp32compiled`.

A program is a table of instructions ``(opcode, destination, a, b, c)`` over numbered registers
(int64 rows: FP32 bit patterns, integers and 0/1 truth values alike) and a table of constants
``(register, value)``. :func:`run` executes it over blocks of BLOCK elements: each instruction is
one loop over the block, so an arithmetic instruction is the same two-pass loop as loops.py's
(fast.py's branch-free kernel over the block, the general kernel of arith.py on the elements it
declined), and the dispatch on the opcode costs once per block, not per element. The arithmetic is
the core's own kernels with the options of ``sf.fp32.add`` and friends at their defaults (folded
in as compile-time constants); the ``STEP_*`` opcodes use a second options record at run time
(the torch mode's machine steps, fused into a program). One compiled function serves every
program: programs are data, so adding one compiles nothing.
"""
import numpy as np
from numba import njit

from . import arith, convert, fast
from .core import IEEE, Options
from .environment import NEAREST, swap_mxcsr
from .loops import with_constants

BLOCK = 256

# Opcodes. Arithmetic on FP32 patterns (default options), then with the step options.
ADD, SUB, MUL, DIV, FMA = 0, 1, 2, 3, 4
STEP_ADD, STEP_SUB, STEP_MUL, STEP_DIV, STEP_FMA = 5, 6, 7, 8, 9
# Comparisons and bit operations on FP32 patterns.
LT, ISNAN, FROM_INT, FROM_BITS, NEG = 10, 11, 12, 13, 14
WHERE = 15
# Integer operations (int64, as numpy's on int64 arrays; shift counts in [0, 63], as the programs'
# are); truth values are 0 or 1.
IADD, ISUB, SHR, SHL, AND, OR, XOR, INOT, NOT = 16, 17, 18, 19, 20, 21, 22, 23, 24
IEQ, INE, ILT, ILE = 25, 26, 27, 28
# Moving data: the block of input ``a`` (a number, not a register) into a register; a register into
# the output block.
LOAD, STORE = 29, 30
OPCODES = 31

_SIGN = 0x80000000
_WORD = 0xFFFFFFFF


@njit(cache=True, forceinline=True, error_model="numpy")
def _two_pass(fast_kernel, kernel, a, b, d, ok, n, options):
    """d[:n] = a op b: fast.py's kernel over the block (vectorised), arith.py's where it declined."""
    for i in range(n):
        bits, _, good = fast_kernel(a[i], b[i], options, 0)
        d[i] = bits
        ok[i] = good
    for i in range(n):
        if not ok[i]:
            d[i] = kernel(a[i], b[i], options, 0)[0]


@njit(cache=True, forceinline=True, error_model="numpy")
def _binary(kind, a, b, d, ok, n, options):
    if kind == ADD:
        _two_pass(fast.add, arith.add, a, b, d, ok, n, options)
    elif kind == SUB:
        _two_pass(fast.sub, arith.sub, a, b, d, ok, n, options)
    elif kind == MUL:
        _two_pass(fast.mul, arith.mul, a, b, d, ok, n, options)
    else:
        _two_pass(fast.div, arith.div, a, b, d, ok, n, options)


@njit(cache=True, forceinline=True, error_model="numpy")
def _fma(a, b, c, d, ok, n, options):
    for i in range(n):
        bits, _, good = fast.fma(a[i], b[i], c[i], options, 0)
        d[i] = bits
        ok[i] = good
    for i in range(n):
        if not ok[i]:
            d[i] = arith.fma(a[i], b[i], c[i], options, 0)[0]


@njit(cache=True, forceinline=True, error_model="numpy")
def _step(kind, a, b, c, d, n, options):
    """The STEP_* instructions: the general kernels with run-time options (a few per program)."""
    for i in range(n):
        if kind == STEP_ADD:
            d[i] = arith.add(a[i], b[i], options, 0)[0]
        elif kind == STEP_SUB:
            d[i] = arith.sub(a[i], b[i], options, 0)[0]
        elif kind == STEP_MUL:
            d[i] = arith.mul(a[i], b[i], options, 0)[0]
        elif kind == STEP_DIV:
            d[i] = arith.div(a[i], b[i], options, 0)[0]
        else:
            d[i] = arith.fma(a[i], b[i], c[i], options, 0)[0]


@njit(cache=True, forceinline=True, error_model="numpy")
def _other(kind, a, b, c, d, n, options):
    """Every instruction but the arithmetic and the moves."""
    if kind == LT:
        for i in range(n):
            d[i] = convert.lt(a[i], b[i], options, 0)[0]
    elif kind == ISNAN:
        for i in range(n):
            d[i] = 1 - convert.eq(a[i], a[i], options, 0)[0]
    elif kind == FROM_INT:
        for i in range(n):
            d[i] = convert.from_int(a[i], options, 0)[0]
    elif kind == FROM_BITS:
        for i in range(n):
            d[i] = a[i] & _WORD
    elif kind == NEG:
        for i in range(n):
            d[i] = a[i] ^ _SIGN
    elif kind == WHERE:
        for i in range(n):
            d[i] = b[i] if a[i] != 0 else c[i]
    elif kind == IADD:
        for i in range(n):
            d[i] = a[i] + b[i]
    elif kind == ISUB:
        for i in range(n):
            d[i] = a[i] - b[i]
    elif kind == SHR:
        for i in range(n):
            d[i] = a[i] >> b[i]
    elif kind == SHL:
        for i in range(n):
            d[i] = a[i] << b[i]
    elif kind == AND:
        for i in range(n):
            d[i] = a[i] & b[i]
    elif kind == OR:
        for i in range(n):
            d[i] = a[i] | b[i]
    elif kind == XOR:
        for i in range(n):
            d[i] = a[i] ^ b[i]
    elif kind == INOT:
        for i in range(n):
            d[i] = ~a[i]
    elif kind == NOT:
        for i in range(n):
            d[i] = 1 - a[i]
    elif kind == IEQ:
        for i in range(n):
            d[i] = int(a[i] == b[i])
    elif kind == INE:
        for i in range(n):
            d[i] = int(a[i] != b[i])
    elif kind == ILT:
        for i in range(n):
            d[i] = int(a[i] < b[i])
    else:  # ILE
        for i in range(n):
            d[i] = int(a[i] <= b[i])


@njit(cache=True, forceinline=True, error_model="numpy")
def options_from(settings, row):
    """The ``core.Options`` record whose fields are ``settings[row]`` (an int64 array: numpy's
    arrays cross into a compiled call several times faster than a namedtuple does)."""
    f = settings[row]
    return Options(
        exponent_bits=f[0], fraction_bits=f[1], encoding=f[2], rounding=f[3], stochastic=f[4], ftz=f[5], daz=f[6],
        tininess_before=f[7], saturate=f[8], sr_bits=f[9], nan_propagate=f[10], invalid_nan=f[11],
        canonical_nan=f[12], src_exponent_bits=f[13], src_fraction_bits=f[14], src_encoding=f[15])


@njit(cache=True, nogil=True, error_model="numpy")
def run(code, constants, registers, inputs, out, settings):
    """Run the program ``code`` (rows ``(opcode, destination, a, b, c)``) with ``constants`` (rows
    ``(register, value)``) on the FP32 patterns ``inputs`` (a row per input, each of ``out``'s
    size) into ``out``: ``registers`` rows of (up to) BLOCK int64.
    ``settings``: two rows of ``core.Options`` fields, the FP32 defaults (``ops._config(fp32)``:
    rne, no ftz, daz or saturation, folded in here as constants) and the STEP_* options."""
    options = with_constants(options_from(settings, 0), 8, 23, IEEE, 0, 0, 0, True, False)
    step_options = options_from(settings, 1)
    width = max(1, min(BLOCK, out.size))  # a small array touches only its own columns
    regs = np.zeros((registers, width), np.int64)
    ok = np.empty(width, np.bool_)
    for j in range(constants.shape[0]):
        regs[constants[j, 0], :] = constants[j, 1]
    saved = swap_mxcsr(NEAREST)  # fast.fma's TwoSum needs rounding to nearest even (fast.fma)
    for start in range(0, out.size, BLOCK):
        n = min(BLOCK, out.size - start)
        for k in range(code.shape[0]):
            kind = code[k, 0]
            if kind == LOAD:
                d, source = regs[code[k, 1]], inputs[code[k, 2]]
                for i in range(n):
                    d[i] = source[start + i]
                continue
            d, a, b, c = regs[code[k, 1]], regs[code[k, 2]], regs[code[k, 3]], regs[code[k, 4]]
            if kind <= DIV:
                _binary(kind, a, b, d, ok, n, options)
            elif kind == FMA:
                _fma(a, b, c, d, ok, n, options)
            elif kind <= STEP_FMA:
                _step(kind, a, b, c, d, n, step_options)
            elif kind == STORE:
                for i in range(n):
                    out[start + i] = np.uint32(a[i])
            else:
                _other(kind, a, b, c, d, n, options)
    if saved >= 0:
        swap_mxcsr(saved)
