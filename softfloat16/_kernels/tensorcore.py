"""Tensor-core matrix multiply: blocks of exact products, aligned, truncated, summed, normalised once.

The model (Fasi et al. 2021 for Volta/Turing/Ampere; later measurements for Hopper, see
``softfloat16.linalg.TensorCore``) of one multiply-accumulate instruction ``d = c + sum p_t``
over a block of ``block`` products:

1. every product ``p_t = a_t * b_t`` is exact;
2. the largest exponent ``E`` among the nonzero terms is found; the running accumulator ``c`` is a
   term too (it enters the same multi-operand adder);
3. every term is truncated (toward zero, on its magnitude) to a multiple of ``2**(E - frac_bits)``:
   the adder keeps ``frac_bits`` bits below the leading bit of the largest term and no guard bits;
4. the truncated terms are summed exactly (the adder's carry bits never overflow);
5. the sum is normalised once and rounded toward zero into the accumulation format.

Blocks follow each other in k order, each one's result feeding the next as ``c``; the first ``c``
is +0. The finished accumulator is rounded once more, to the output format, with the caller's
rounding mode (the epilogue's conversion). Specials follow IEEE: a NaN term, inf - inf or
inf * 0 give NaN, an infinite term gives that infinity; a block that sums to exactly zero gives
+0 (-0 only when every term is -0); an overflowing block follows round-toward-zero (largest
finite value). ``tensorcore_row`` runs in matmul.py's kernels (``make_matmul``), on its operand layout.
"""
from numba import njit

from .core import FINITE, IEEE, INF, NAN, RTZ, ZERO, msb_index, round_pack, unpack
from .unpacked import pack_result, product


@njit(cache=True, inline="always")
def _term_top(cls, exp, sig):
    """Exponent of the leading bit of a finite nonzero term; a very small number otherwise."""
    if cls == FINITE:
        return exp + msb_index(sig)
    return -(1 << 30)


@njit(cache=True, inline="always")
def _truncated(exp, sig, quantum_exp):
    """|term| / 2**quantum_exp, truncated to an integer."""
    if exp >= quantum_exp:
        return sig << (exp - quantum_exp)
    shift = quantum_exp - exp
    if shift > 62:
        return 0
    return sig >> shift


@njit(cache=True, inline="always")
def block_fma(c_cls, c_sign, c_exp, c_sig, a, bt, i, j, start, stop, frac_bits, acc_ebits, acc_fbits):
    """c + sum of the products a[i, t] * b[t, j] for start <= t < stop, as the model says."""
    cls_a, sign_a, exp_a, sig_a = a
    cls_b, sign_b, exp_b, sig_b = bt
    # Pass 1: specials and the largest exponent (c included).
    any_nan = c_cls == NAN
    pos_inf = c_cls == INF and c_sign == 0
    neg_inf = c_cls == INF and c_sign == 1
    all_negative_zero = c_cls == ZERO and c_sign == 1
    top = _term_top(c_cls, c_exp, c_sig)
    for t in range(start, stop):
        pc, ps, pe, pg = product(
            cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t],
            cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t],
        )
        any_nan = any_nan or pc == NAN
        pos_inf = pos_inf or (pc == INF and ps == 0)
        neg_inf = neg_inf or (pc == INF and ps == 1)
        all_negative_zero = all_negative_zero and pc == ZERO and ps == 1
        top = max(top, _term_top(pc, pe, pg))
    if any_nan or (pos_inf and neg_inf):
        return NAN, 0, 0, 0
    if pos_inf or neg_inf:
        return INF, int(neg_inf), 0, 0
    if top == -(1 << 30):  # every term is a zero
        return ZERO, int(all_negative_zero), 0, 0
    # Pass 2: truncate every term to the block's quantum and add them exactly.
    quantum_exp = top - frac_bits
    total = 0
    if c_cls == FINITE:
        term = _truncated(c_exp, c_sig, quantum_exp)
        total += -term if c_sign else term
    for t in range(start, stop):
        pc, ps, pe, pg = product(
            cls_a[i, t], sign_a[i, t], exp_a[i, t], sig_a[i, t],
            cls_b[j, t], sign_b[j, t], exp_b[j, t], sig_b[j, t],
        )
        if pc == FINITE:
            term = _truncated(pe, pg, quantum_exp)
            total += -term if ps else term
    if total == 0:
        return ZERO, 0, 0, 0  # exact cancellation: +0, as round-toward-zero gives
    sign = 1 if total < 0 else 0
    bits, _ = round_pack(sign, quantum_exp, abs(total), acc_ebits, acc_fbits, IEEE, RTZ, False, False, False, 0, 32)
    return unpack(bits, acc_ebits, acc_fbits, IEEE, False)


@njit(cache=True, inline="always")
def tensorcore_cell(a, bt, i, j, params):
    """C[i, j]: the blocks of products folded into an accumulator, then one rounding (see
    tensorcore_row for ``params``)."""
    block, frac_bits, acc_ebits, acc_fbits, out_ebits, out_fbits, rounding = params
    k = a[0].shape[1]
    cls, sign, exp, sig = ZERO, 0, 0, 0
    for start in range(0, k, block):
        cls, sign, exp, sig = block_fma(
            cls, sign, exp, sig, a, bt, i, j, start, min(start + block, k), frac_bits, acc_ebits, acc_fbits
        )
    return pack_result(cls, sign, exp, sig, out_ebits, out_fbits, rounding)


@njit(cache=True, error_model="numpy")
def tensorcore_row(a, bt, out, i, params):
    """Row i: out[i, j] = the blocks of products folded into an accumulator, then one rounding.

    The kernel is ``matmul.MATMUL["tensorcore"]``; ``params`` are (block size, fraction bits the
    adder keeps, accumulation and output formats' widths, rounding-mode code)."""
    for j in range(bt[0].shape[0]):
        out[i, j] = tensorcore_cell(a, bt, i, j, params)
