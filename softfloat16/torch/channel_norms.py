"""Batch norm and group norm (forward and backward) on the emulator.

Batch norm of float16 / bfloat16 inputs in torch CPU's two kernel layouts (contiguous NC..., and
channels-last or (N, C)) follows torch CPU's kernels step for step (:func:`_batch_norm_cpu`): their
vector-lane and per-thread partial sums, the dtype each statistic is kept in between kernels, the
float64 ``InvStd``, the c10 half-precision arithmetic of the running-statistics update, and the
fused multiply-adds the compiled kernels contain (measured on torch 2.13 CPU, x86). Other inputs
(float32, other strides) take the FP32-step definition: two-pass moments per channel as layer norm,
torch CPU's backward formulas in FP32 steps with FP32 sums in the machine's order. Group norm is
in FP32 steps throughout. Each result is rounded once into its dtype.
"""
from __future__ import annotations

import numpy as np
import torch

from .elementwise import ONE32
from .machine import FP32, Machine, scalar_bits
from .normalization import parameter_dtype
from .opmath import ZERO32, centered32, constant32, moments32, result32, sum32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, from_bits, is_emulated, laid_out

__all__ = ["native_batch_norm", "native_batch_norm_backward", "native_group_norm", "native_group_norm_backward"]


def _channel_rows(machine: Machine, x: torch.Tensor, op: str, name: str = "input") -> np.ndarray:
    """(C, N * spatial) FP32 patterns of an (N, C, ...) tensor: each channel's elements in
    (sample, position) row-major order."""
    if x.dim() < 2:
        raise NotEmulated(f"{op}: {name} of shape {tuple(x.shape)} (expected (N, C, ...))")
    values = widen32(machine, x, op, name)
    return np.ascontiguousarray(np.moveaxis(values.reshape(x.shape[0], x.shape[1], -1), 1, 0)).reshape(
        x.shape[1], -1)


def _from_channel_rows(machine: Machine, rows32, like: torch.Tensor) -> torch.Tensor:
    shape = (like.shape[1], like.shape[0], -1)
    values = np.moveaxis(np.asarray(rows32, np.uint32).reshape(shape), 0, 1)
    return result32(machine, np.ascontiguousarray(values), like.dtype, like.shape)


def _channel_parameter(machine: Machine, tensor, channels: int, op: str, name: str, fill: np.uint32):
    """A per-channel parameter as an FP32 column (``fill`` where it is None)."""
    if tensor is None:
        return np.full((channels, 1), fill, np.uint32)
    if tensor.numel() != channels:
        raise NotEmulated(f"{op}: {name} has {tensor.numel()} elements for {channels} channels")
    return widen32(machine, tensor, op, name).reshape(channels, 1)



def _inverse_std(machine: Machine, var32, eps: float):
    """``1 / sqrt(var + eps)`` in two FP32 steps (torch's InvStd: 0 when var and eps are both 0)."""
    result = np.asarray(machine.div(ONE32, machine.sqrt(machine.add(var32, constant32(eps)))))
    if eps == 0:
        result = np.where(np.asarray(var32) == ZERO32, ZERO32, result)
    return result


# -- torch CPU's batch-norm kernels for float16 / bfloat16 inputs ------------------------------------------
#: Float lanes of the contiguous statistics kernel (measured on torch 2.13 CPU, x86: its per-lane sums are
#: those of 8-lane vectors, each block of 16 inputs adding its two halves, without fused multiply-adds).
LANES = 8


def _kernel_layout(x: torch.Tensor) -> str | None:
    """Which of torch CPU's batch-norm kernels runs on ``x``: "contiguous" (NCHW with a spatial size
    above 1), "channels_last" (NHWC, NDHWC, or (N, C) / one position: rows of C channels), or None
    (other strides: the TensorIterator path, and float32 inputs, which the FP32-step model covers)."""
    if x.dtype not in (torch.float16, torch.bfloat16) or x.dim() < 2 or x.numel() == 0:
        return None
    if x.is_contiguous():
        return "channels_last" if x.numel() == x.shape[0] * x.shape[1] else "contiguous"
    if x.is_contiguous(memory_format=torch.channels_last) or (
            x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d)):
        return "channels_last"
    return None


def _layout_values(machine: Machine, x: torch.Tensor, layout: str, op: str, name: str) -> np.ndarray:
    """FP32 patterns: (N, C, positions) for the contiguous kernel, (N * positions, C) rows for the
    channels-last one."""
    values = widen32(machine, x, op, name).reshape(x.shape[0], x.shape[1], -1)
    if layout == "contiguous":
        return values
    return np.ascontiguousarray(np.moveaxis(values, 1, 2)).reshape(-1, x.shape[1])


def _fold(machine: Machine, columns: np.ndarray) -> np.ndarray:
    """((c0 + c1) + c2) + ... over the columns of a (m, k >= 1) array: ``vec_reduce_all``'s lanes."""
    total = columns[:, 0]
    for j in range(1, columns.shape[1]):
        total = machine.add(total, columns[:, j])
    return np.asarray(total, np.uint32)


def _lane_sums(machine: Machine, terms: np.ndarray, fused_with=None, fused_tail: bool = False) -> np.ndarray:
    """Per-channel FP32 totals of (N, C, positions) terms as the contiguous kernel adds them: blocks
    of 2 * LANES positions of each sample go into LANES accumulators (lane j: the block's elements j
    and LANES + j), the rest of each sample into one scalar sum (samples in order); the total is the
    scalar sum plus the lanes added in order. With ``fused_with`` the lanes accumulate
    ``fma(terms, fused_with, acc)`` (and the scalar sum too with ``fused_tail``)."""
    samples, channels, positions = terms.shape
    body = positions - positions % (2 * LANES)

    def split(a):
        blocks = a[:, :, :body].reshape(samples, channels, body // (2 * LANES), 2, LANES)
        lanes = np.ascontiguousarray(blocks.transpose(1, 4, 0, 2, 3)).reshape(channels * LANES, -1)
        return lanes, np.ascontiguousarray(np.moveaxis(a[:, :, body:], 1, 0)).reshape(channels, -1)

    lanes, tail = split(terms)
    if fused_with is not None:
        other_lanes, other_tail = split(fused_with)
        lane_totals = _fused_sum(machine, lanes.T, other_lanes.T)
        if fused_tail:
            tail_total = _fused_sum(machine, tail.T, other_tail.T)
        else:
            tail_total = _sum_rows(machine, np.asarray(machine.mul(tail, other_tail)))
    else:
        lane_totals, tail_total = _sum_rows(machine, lanes), _sum_rows(machine, tail)
    return np.asarray(machine.add(tail_total, _fold(machine, lane_totals.reshape(channels, LANES))), np.uint32)


def _sum_rows(machine: Machine, rows: np.ndarray) -> np.ndarray:
    """sum32 of each row, +0 for empty rows."""
    return sum32(machine, rows) if rows.shape[1] else np.zeros(rows.shape[0], np.uint32)


def _parts(count: int, threads: int) -> list[slice]:
    """The rows each thread of ``at::parallel_for(0, count, 1)`` takes: ``threads`` threads (the
    machine's setting; at most ``count``), ``ceil(count / threads)`` consecutive rows each."""
    workers = max(1, min(threads, count))
    chunk = -(-count // workers)
    return [slice(start, min(start + chunk, count)) for start in range(0, count, chunk)]


def _fused_sum(machine: Machine, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``acc = fma(a[i], b[i], acc)`` from +0 down the rows of (k, C) arrays (one FP32 rounding per row)."""
    total = np.zeros(a.shape[1], np.uint32)
    for i in range(a.shape[0]):
        total = machine.fma(a[i], b[i], total)
    return np.asarray(total, np.uint32)


def _thread_sums(machine: Machine, rows: np.ndarray, fused_with=None) -> np.ndarray:
    """Per-channel totals of (R, C) rows as the channels-last kernels add them: each thread sums its
    rows into its own FP32 buffer (``fma(rows, fused_with, acc)`` with ``fused_with``), then the
    buffers of all ``machine.threads`` threads are added in order, from +0."""
    partial = np.zeros((rows.shape[1], machine.threads), np.uint32)
    for t, part in enumerate(_parts(rows.shape[0], machine.threads)):
        if fused_with is None:
            partial[:, t] = sum32(machine, np.ascontiguousarray(rows[part].T))
        else:
            partial[:, t] = _fused_sum(machine, rows[part], fused_with[part])
    return sum32(machine, partial)


def _through(machine: Machine, patterns32, dtype: torch.dtype) -> np.ndarray:
    """FP32 patterns stored into ``dtype`` (rounded by the machine) and read back."""
    fmt = DTYPE_FORMATS[dtype]
    return np.asarray(machine.widen(machine.narrow(np.asarray(patterns32, np.uint32), fmt), fmt), np.uint32)


def _from_layout(machine: Machine, y32: np.ndarray, x: torch.Tensor, layout: str) -> torch.Tensor:
    """Results in the layout's order, rounded into x's dtype, as a tensor with x's memory format."""
    fmt = DTYPE_FORMATS[x.dtype]
    patterns = machine.narrow(np.asarray(y32, np.uint32), fmt)
    if layout == "contiguous" or x.is_contiguous():
        return from_bits(patterns, x.dtype, x.shape)
    spatial = tuple(x.shape[2:])
    nhwc = from_bits(patterns, x.dtype, (x.shape[0], *spatial, x.shape[1]))
    return nhwc.permute(0, x.dim() - 1, *range(1, x.dim() - 1))


def _statistics_dtype(x: torch.Tensor, parameters: torch.dtype) -> torch.dtype:
    """The dtype torch CPU keeps a channel's mean and sum of squared deviations in between its
    kernels (measured on torch 2.13): bfloat16 for a bfloat16 input with bfloat16 parameters, float32
    otherwise (float16 inputs, float32 parameters)."""
    return torch.bfloat16 if x.dtype == parameters == torch.bfloat16 else torch.float32


def _collect_stats(machine: Machine, values: np.ndarray, layout: str, statistics: torch.dtype):
    """(mean, sum of squared deviations) per channel, FP32 patterns of values stored in ``statistics``.

    Contiguous kernel: lane sums (:func:`_lane_sums`) of x, ``mean = sum / n`` in FP32, then lane
    sums of ``(x - mean)**2`` (FP32 mean, squares rounded). Channels-last kernel: thread sums
    (:func:`_thread_sums`), the mean stored, then ``fma(x - mean, x - mean, acc)`` from the stored
    mean; with no more rows than threads, one sequential loop adding the rounded squares."""
    if layout == "contiguous":
        count = values.shape[0] * values.shape[2]
        mean = np.asarray(machine.div(_lane_sums(machine, values), constant32(count)))
        deviations = machine.sub(values, mean[None, :, None])
        return _through(machine, mean, statistics), _through(
            machine, _lane_sums(machine, np.asarray(machine.mul(deviations, deviations))), statistics)
    count = values.shape[0]
    if count > machine.threads:
        mean = _through(machine, machine.div(_thread_sums(machine, values), constant32(count)), statistics)
        deviations = np.asarray(machine.sub(values, mean[None, :]))
        return mean, _through(machine, _thread_sums(machine, deviations, deviations), statistics)
    mean = _through(machine, machine.div(sum32(machine, np.ascontiguousarray(values.T)), constant32(count)),
                    statistics)
    deviations = np.asarray(machine.sub(values, mean[None, :]))
    squares = np.asarray(machine.mul(deviations, deviations))
    return mean, _through(machine, sum32(machine, np.ascontiguousarray(squares.T)), statistics)


def _divided(machine: Machine, total32, count: int, statistics: torch.dtype) -> np.ndarray:
    """``total / count`` as torch CPU divides a statistic by an int64: in FP32, or for a bfloat16
    statistic in c10::BFloat16 arithmetic (the count rounded into BF16, the quotient into BF16)."""
    if statistics == torch.float32:
        return np.asarray(machine.div(total32, constant32(count)))
    fmt = DTYPE_FORMATS[statistics]
    divisor = machine.widen(scalar_bits(count, fmt), fmt)
    return _through(machine, machine.div(total32, divisor), statistics)


def _inverse_std64(machine: Machine, var32, eps: float) -> np.ndarray:
    """torch's ``InvStd``: ``1 / sqrt(var + eps)`` in float64 (eps a double), rounded once into
    FP32 (by the machine's step rounding); 0 when var and eps are both 0."""
    var = FP32.to_float(np.asarray(var32, np.uint32)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = 1.0 / np.sqrt(var + float(eps))
    result = np.asarray(FP32.from_float(inverse, **machine.step), np.uint32)
    return np.where((var == 0) & (eps == 0), ZERO32, result)


def _update_running(machine: Machine, stored: torch.Tensor, batch32, momentum: float, statistics: torch.dtype,
                    is_mean: bool):
    """``stored = momentum * batch + (1 - momentum) * stored`` as torch CPU computes it, rounded
    into the running statistic's dtype. With bfloat16 statistics (c10::BFloat16 arithmetic):
    ``momentum``, ``1 - momentum`` and ``(1 - momentum) * stored`` are BF16 values, and so is
    ``momentum * mean`` (``momentum * unbiased_var`` stays FP32); otherwise every step is FP32
    (measured on torch 2.13: float16 inputs too). The final addition is FP32."""
    previous = widen32(machine, stored, "native_batch_norm", "running statistics").reshape(-1)
    if statistics == torch.bfloat16:
        fmt = DTYPE_FORMATS[statistics]
        factor = machine.widen(scalar_bits(momentum, fmt), fmt)
        rest = _through(machine, machine.sub(ONE32, factor), statistics)
        kept = _through(machine, machine.mul(rest, previous), statistics)
        product = machine.mul(factor, batch32)
        if is_mean:
            product = _through(machine, product, statistics)
    else:
        factor = constant32(momentum)
        kept = machine.mul(machine.sub(ONE32, factor), previous)
        product = machine.mul(factor, batch32)
    stored.copy_(result32(machine, machine.add(product, kept), stored.dtype, stored.shape))


def _batch_norm_cpu(machine: Machine, x, weight, bias, running_mean, running_var, training, momentum, eps,
                    layout: str):
    """torch CPU's ``native_batch_norm`` of a float16 / bfloat16 input. Training: the statistics
    (:func:`_collect_stats`) in their between-kernels dtype, ``var = sum_sq / n``
    (:func:`_divided`), ``invstd`` by :func:`_inverse_std64`; the saved mean and invstd in the
    parameters' dtype (float32 beside float32 parameters) are what the output reads; running
    statistics by :func:`_update_running` (unbiased ``sum_sq / (n - 1)``). Evaluation: ``invstd =
    1 / sqrt(running_var + eps)`` in FP32 steps. Output: ``alpha = invstd * weight``, ``beta =
    bias - mean * alpha`` (one fused multiply-add with float32 parameters), ``y = fma(x, alpha,
    beta)``, in x's memory format."""
    op = "native_batch_norm"
    channels = x.shape[1]
    parameters = parameter_dtype(x, weight, bias, running_mean, running_var)
    values = _layout_values(machine, x, layout, op, "input")
    if training:
        statistics = _statistics_dtype(x, parameters)
        mean, squares = _collect_stats(machine, values, layout, statistics)
        count = x.numel() // channels
        invstd = _inverse_std64(machine, _divided(machine, squares, count, statistics), eps)
        saved = (result32(machine, mean, parameters, (channels,)), result32(machine, invstd, parameters, (channels,)))
        if running_mean is not None:
            _update_running(machine, running_mean, mean, momentum, statistics, is_mean=True)
        if running_var is not None:
            _update_running(machine, running_var, _divided(machine, squares, count - 1, statistics), momentum,
                            statistics, is_mean=False)
        mean, invstd = (widen32(machine, t, op) for t in saved)
    else:
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1)
        var = widen32(machine, running_var, op, "running_var").reshape(-1)
        invstd = np.asarray(machine.div(ONE32, machine.sqrt(machine.add(var, constant32(eps)))))
        saved = (torch.empty(0, dtype=parameters), torch.empty(0, dtype=parameters))
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32).reshape(-1)
    b32 = _channel_parameter(machine, bias, channels, op, "bias", ZERO32).reshape(-1)
    alpha = np.asarray(machine.mul(invstd, w32))
    if parameters == torch.float32:  # float arithmetic: one fused multiply-add (measured)
        beta = np.asarray(machine.fma(machine.neg(mean), alpha, b32))
    else:  # c10 half-precision operators: the product rounded first
        beta = np.asarray(machine.sub(b32, machine.mul(mean, alpha)))
    if layout == "contiguous":
        y = machine.fma(values, alpha[None, :, None], beta[None, :, None])
    else:
        y = machine.fma(values, alpha[None, :], beta[None, :])
    return (_from_layout(machine, y, x, layout),) + saved


def _backward_layout(x: torch.Tensor, grad: torch.Tensor) -> str | None:
    """The kernel torch CPU's batch-norm backward runs: x's (:func:`_kernel_layout`) when grad_out
    has the same memory format, else None (the TensorIterator path)."""
    layout = _kernel_layout(x)
    if layout is None or grad.shape != x.shape or grad.dtype != x.dtype:
        return None
    if x.is_contiguous():
        return layout if grad.is_contiguous() else None
    return layout if _kernel_layout(grad) == "channels_last" and not grad.is_contiguous() else None


def _batch_norm_backward_cpu(machine: Machine, grad, x, weight, running_mean, running_var, save_mean, save_invstd,
                             train, eps, output_mask, layout: str):
    """torch CPU's ``native_batch_norm_backward`` of float16 / bfloat16 tensors: ``sum(dy)`` and
    ``dotp = sum((x - mean) * dy)`` as the kernel adds them (contiguous: lane sums, the products
    fused into the lanes, and into the scalar tail for float16; channels-last: fused thread sums);
    evaluation's ``invstd = 1 / sqrt(running_var + eps)`` in float64, rounded to FP32; training's
    ``dx = (dy - sum / n - (x - mean) * k) * invstd * w`` with ``k = dotp * invstd * invstd / n``
    (the product fused into the subtraction for float16, and in the channels-last scalar tail);
    evaluation's ``dx = dy * invstd * w``; ``dweight = dotp * invstd``, ``dbias = sum(dy)``."""
    op = "native_batch_norm_backward"
    channels = x.shape[1]
    count = x.numel() // channels
    parameters = parameter_dtype(x, weight, running_mean, running_var, save_mean, save_invstd)
    if train:
        mean = widen32(machine, save_mean, op, "save_mean").reshape(-1)
        invstd = widen32(machine, save_invstd, op, "save_invstd").reshape(-1)
    else:
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1)
        var = FP32.to_float(widen32(machine, running_var, op, "running_var").reshape(-1)).astype(np.float64)
        with np.errstate(divide="ignore"):
            invstd = np.asarray(FP32.from_float(1.0 / np.sqrt(var + float(eps)), **machine.step), np.uint32)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32).reshape(-1)
    values = _layout_values(machine, x, layout, op, "input")
    dy = _layout_values(machine, grad, layout, op, "grad_out")
    shape = (1, channels, 1) if layout == "contiguous" else (1, channels)
    centered = np.asarray(machine.sub(values, mean.reshape(shape)))
    half = x.dtype == torch.float16  # measured: float16's conversions let the compiler fuse more
    if layout == "contiguous":
        grad_sum = _lane_sums(machine, dy)
        dotp = _lane_sums(machine, centered, dy, fused_tail=half)
    else:
        grad_sum = _thread_sums(machine, dy)
        dotp = _thread_sums(machine, centered, dy)
    results = [None, None, None]
    if output_mask[0]:
        if train:
            k = machine.div(machine.mul(machine.mul(dotp, invstd), invstd), constant32(count))
            grad_mean = machine.div(grad_sum, constant32(count))
            dx = np.asarray(machine.sub(dy, grad_mean.reshape(shape)))
            if half:  # measured: one fused multiply-add
                dx = np.asarray(machine.fma(machine.neg(centered), k.reshape(shape), dx))
            else:  # bfloat16: the product rounded first, but fused in the channels-last kernel's scalar tail
                fused = np.asarray(machine.fma(machine.neg(centered), k.reshape(shape), dx))
                dx = np.asarray(machine.sub(dx, machine.mul(centered, k.reshape(shape))))
                if layout == "channels_last":
                    vectors = channels - channels % (2 * LANES)
                    dx[:, vectors:] = fused[:, vectors:]
            dx = machine.mul(machine.mul(dx, invstd.reshape(shape)), w32.reshape(shape))
        else:
            dx = machine.mul(machine.mul(dy, invstd.reshape(shape)), w32.reshape(shape))
        results[0] = _from_layout(machine, dx, x, layout)
    if output_mask[1]:
        results[1] = result32(machine, machine.mul(dotp, invstd), parameters, (channels,))
    if output_mask[2]:
        results[2] = result32(machine, grad_sum, parameters, (channels,))
    return tuple(results)


@implements("native_batch_norm", inplace=False)
def native_batch_norm(machine, func, args, kwargs):
    """Batch norm over every dimension but the channels (dim 1). Float16 / bfloat16 inputs in a
    kernel layout: torch CPU's kernels (:func:`_batch_norm_cpu`). Otherwise in FP32 steps:

    Training: per channel ``mean = sum(x) / n``, ``var = sum((x - mean)**2) / n`` (two passes,
    FP32 sums), ``invstd = 1 / sqrt(var + eps)`` (0 when both are 0, as torch); mean and invstd are
    rounded into the statistics' dtype (torch CPU's: the input's, or float32 beside float32
    parameters) and, as in torch CPU, those rounded values make ``y = (x - mean) * invstd * weight
    + bias``; running statistics, if given, become ``momentum * mean + (1 - momentum) *
    running_mean`` and the same with the unbiased ``sum((x - mean)**2) / (n - 1)`` (momentum and
    1 - momentum as float32s), each rounded once into its tensor. Evaluation: the running
    statistics in place of the batch's, ``invstd`` in FP32. Returns (y, saved mean, saved
    invstd), the saved ones empty in evaluation, as torch CPU."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_batch_norm"
    weight, bias = aten_arg(args, kwargs, 1, "weight"), aten_arg(args, kwargs, 2, "bias")
    running_mean, running_var = aten_arg(args, kwargs, 3, "running_mean"), aten_arg(args, kwargs, 4, "running_var")
    training, momentum = aten_arg(args, kwargs, 5, "training"), aten_arg(args, kwargs, 6, "momentum")
    eps = aten_arg(args, kwargs, 7, "eps")
    layout = _kernel_layout(x)
    if layout is not None and (training or (running_mean is not None and running_var is not None)):
        return _batch_norm_cpu(machine, x, weight, bias, running_mean, running_var, training, momentum, eps, layout)
    rows = _channel_rows(machine, x, op)
    channels, count = rows.shape
    if count == 0:
        return func(*args, **kwargs)
    statistics = parameter_dtype(x, weight, bias)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)
    b32 = _channel_parameter(machine, bias, channels, op, "bias", ZERO32)
    if training:
        mean, _, squares = centered32(machine, rows)
        invstd = _inverse_std(machine, machine.div(squares, constant32(count)), eps)
        saved = (result32(machine, mean, statistics, (channels,)), result32(machine, invstd, statistics, (channels,)))
        # As torch CPU: the statistics, once stored in their dtype, are what the rest reads.
        mean, invstd = (widen32(machine, t, op) for t in saved)
        for stored, batch in ((running_mean, mean), (running_var, machine.div(squares, constant32(count - 1)))):
            if stored is not None:
                previous = widen32(machine, stored, op, "running statistics").reshape(-1)
                update = machine.add(machine.mul(constant32(momentum), batch),
                                     machine.mul(constant32(1 - momentum), previous))
                stored.copy_(result32(machine, update, stored.dtype, stored.shape))
        deviations = machine.sub(rows, mean[:, None])
    else:
        if running_mean is None or running_var is None:
            raise NotEmulated(f"{op}: evaluation without running statistics")
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1)
        invstd = _inverse_std(machine, widen32(machine, running_var, op, "running_var").reshape(-1), eps)
        deviations = machine.sub(rows, mean[:, None])
        saved = (torch.empty(0, dtype=statistics), torch.empty(0, dtype=statistics))
    y = machine.add(machine.mul(machine.mul(deviations, np.asarray(invstd)[:, None]), w32), b32)
    return (_from_channel_rows(machine, y, x),) + saved


@implements("native_batch_norm_backward", inplace=False)
def native_batch_norm_backward(machine, func, args, kwargs):
    """torch CPU's batch-norm gradient in FP32 steps, per channel, with ``dotp = sum((x - mean) *
    dy)`` and ``sum(dy)`` (FP32 sums): training: ``k = dotp * invstd * invstd / n``, ``dx = ((dy -
    sum(dy) / n) - (x - mean) * k) * invstd * weight``; evaluation (running statistics,
    ``invstd = 1 / sqrt(running_var + eps)``): ``dx = dy * invstd * weight``; ``dweight = dotp *
    invstd``, ``dbias = sum(dy)``; each rounded once."""
    grad, x = args[0], args[1]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_batch_norm_backward"
    weight = aten_arg(args, kwargs, 2, "weight")
    running_mean, running_var = aten_arg(args, kwargs, 3, "running_mean"), aten_arg(args, kwargs, 4, "running_var")
    save_mean, save_invstd = aten_arg(args, kwargs, 5, "save_mean"), aten_arg(args, kwargs, 6, "save_invstd")
    train, eps = aten_arg(args, kwargs, 7, "train"), aten_arg(args, kwargs, 8, "eps")
    output_mask = aten_arg(args, kwargs, 9, "output_mask")
    layout = _backward_layout(x, grad)
    statistics = (save_mean, save_invstd) if train else (running_mean, running_var)
    if layout is not None and all(t is not None for t in statistics):
        return _batch_norm_backward_cpu(machine, grad, x, weight, running_mean, running_var, save_mean, save_invstd,
                                        train, eps, output_mask, layout)
    rows, dy = _channel_rows(machine, x, op), _channel_rows(machine, grad, op, "grad_out")
    channels, count = rows.shape
    if count == 0:
        return func(*args, **kwargs)
    if train:
        mean = widen32(machine, save_mean, op, "save_mean").reshape(-1, 1)
        invstd = widen32(machine, save_invstd, op, "save_invstd").reshape(-1, 1)
    else:
        mean = widen32(machine, running_mean, op, "running_mean").reshape(-1, 1)
        invstd = _inverse_std(machine, widen32(machine, running_var, op, "running_var"), eps).reshape(-1, 1)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)
    centered = machine.sub(rows, mean)
    dotp = sum32(machine, machine.mul(centered, dy))[:, None]
    grad_sum = sum32(machine, dy)[:, None]
    parameter = x.dtype if weight is None else weight.dtype
    results = [None, None, None]
    if output_mask[0]:
        if train:
            k = machine.div(machine.mul(machine.mul(dotp, invstd), invstd), constant32(count))
            grad_mean = machine.div(grad_sum, constant32(count))
            dx = machine.mul(machine.mul(machine.sub(machine.sub(dy, grad_mean), machine.mul(centered, k)), invstd),
                             w32)
        else:
            dx = machine.mul(machine.mul(dy, invstd), w32)
        results[0] = _from_channel_rows(machine, dx, x)
    if output_mask[1]:
        results[1] = result32(machine, machine.mul(dotp, invstd), parameter, (channels,))
    if output_mask[2]:
        results[2] = result32(machine, grad_sum, parameter, (channels,))
    return tuple(results)


def _memory_format(x: torch.Tensor):
    """x's shape, laid out as torch lays out a normalization's result (``empty_like(x,
    x.suggest_memory_format())``): channels-last for a channels-last x, else contiguous."""
    channels_last = (x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)) or (
        x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d))
    return laid_out(x.shape, x.stride()) if channels_last and not x.is_contiguous() else x.shape


def _group_args(args, kwargs, first: int):
    return tuple(int(aten_arg(args, kwargs, first + i, name)) for i, name in enumerate(("N", "C", "HxW", "group")))


@implements("native_group_norm", inplace=False)
def native_group_norm(machine, func, args, kwargs):
    """Group norm: per sample and group of ``C / group`` channels, ``mean``, ``var`` (divisor
    n), ``rstd = 1 / sqrt(var + eps)`` as layer norm computes them, ``y = (x - mean) * rstd *
    weight[c] + bias[c]`` in FP32 steps; y, mean (N, group) and rstd rounded once (statistics in
    torch CPU's dtype)."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_group_norm"
    weight, bias = aten_arg(args, kwargs, 1, "weight"), aten_arg(args, kwargs, 2, "bias")
    samples, channels, positions, groups = _group_args(args, kwargs, 3)
    eps = aten_arg(args, kwargs, 7, "eps")
    if x.numel() == 0 or channels % groups:
        return func(*args, **kwargs)
    rows = widen32(machine, x, op, "input").reshape(samples * groups, -1)
    mean, var, deviations = moments32(machine, rows)
    rstd = machine.div(ONE32, machine.sqrt(machine.add(var, constant32(eps))))
    y = machine.mul(deviations, np.asarray(rstd)[:, None]).reshape(samples, channels, positions)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32)[None]
    b32 = _channel_parameter(machine, bias, channels, op, "bias", ZERO32)[None]
    y = machine.add(machine.mul(y, w32), b32)
    statistics = parameter_dtype(x, weight, bias)
    return (result32(machine, y, x.dtype, _memory_format(x)), result32(machine, mean, statistics, (samples, groups)),
            result32(machine, rstd, statistics, (samples, groups)))


@implements("native_group_norm_backward", inplace=False)
def native_group_norm_backward(machine, func, args, kwargs):
    """torch CPU's group-norm gradient in FP32 steps: per (sample, channel) ``ds = sum(dy * x)``,
    ``db = sum(dy)`` over positions; per (sample, group) ``ds_g = sum_c ds * w``, ``db_g = sum_c db *
    w``, ``b = (db_g * mean - ds_g) * rstd * rstd * rstd * s``, ``c = -b * mean - db_g * rstd * s``
    (``s = 1 / (channels per group * positions)``), ``dx = rstd * w * dy + b * x + c``;
    ``dweight[c] = sum_n (ds - db * mean) * rstd``, ``dbias[c] = sum_n db``; sums FP32, each
    gradient rounded once."""
    grad, x = args[0], args[1]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: the out= overload is not emulated")
    op = "native_group_norm_backward"
    mean, rstd, weight = args[2], args[3], aten_arg(args, kwargs, 4, "weight")
    samples, channels, positions, groups = _group_args(args, kwargs, 5)
    output_mask = aten_arg(args, kwargs, 9, "output_mask")
    if x.numel() == 0:
        return func(*args, **kwargs)
    per_group = channels // groups
    xs = widen32(machine, x, op, "input").reshape(samples * channels, positions)
    dy = widen32(machine, grad, op, "grad_out").reshape(samples * channels, positions)
    mu = widen32(machine, mean, op, "mean").reshape(samples, groups, 1)
    r = widen32(machine, rstd, op, "rstd").reshape(samples, groups, 1)
    w32 = _channel_parameter(machine, weight, channels, op, "weight", ONE32).reshape(1, groups, per_group)
    ds = sum32(machine, machine.mul(dy, xs)).reshape(samples, groups, per_group)
    db = sum32(machine, dy).reshape(samples, groups, per_group)
    parameter = x.dtype if weight is None else weight.dtype
    results = [None, None, None]
    if output_mask[0]:
        ds_g = sum32(machine, machine.mul(ds, w32).reshape(-1, per_group)).reshape(samples, groups, 1)
        db_g = sum32(machine, machine.mul(db, w32).reshape(-1, per_group)).reshape(samples, groups, 1)
        s = machine.div(ONE32, constant32(per_group * positions))
        b = machine.mul(machine.mul(machine.mul(machine.mul(machine.sub(machine.mul(db_g, mu), ds_g), r), r), r), s)
        c = machine.sub(machine.mul(machine.neg(b), mu), machine.mul(machine.mul(db_g, r), s))
        shape = (samples, groups, per_group, positions)
        first = machine.mul(machine.mul(r[..., None], w32[..., None]), dy.reshape(shape))
        dx = machine.add(machine.add(first, machine.mul(b[..., None], xs.reshape(shape))), c[..., None])
        results[0] = result32(machine, dx, x.dtype, _memory_format(x))
    if output_mask[1]:
        terms = machine.mul(machine.sub(ds, machine.mul(db, mu)), r).reshape(samples, channels)
        results[1] = result32(machine, sum32(machine, np.ascontiguousarray(np.asarray(terms).T)), parameter,
                             (channels,))
    if output_mask[2]:
        results[2] = result32(machine, sum32(machine, np.ascontiguousarray(db.reshape(samples, channels).T)),
                             parameter, (channels,))
    return tuple(results)
