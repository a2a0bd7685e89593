"""Batch norm and group norm (forward and backward) on the emulator.

Every arithmetic step is an FP32 operation of the machine on operands widened exactly from their
formats (:mod:`softfloat16.torch.opmath`), and each result is rounded once into its dtype:
``native_batch_norm`` / ``native_group_norm`` take the two-pass moments per channel / per
(sample, group) as layer norm does; their backwards are torch CPU's formulas in FP32 steps, with
FP32 sums in the machine's order.
"""
from __future__ import annotations

import numpy as np
import torch

from .elementwise import ONE32
from .machine import Machine
from .normalization import parameter_dtype
from .opmath import ZERO32, centered32, constant32, moments32, result32, sum32, widen32
from .registry import NotEmulated, aten_arg, implements
from .tensors import is_emulated

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


@implements("native_batch_norm", inplace=False)
def native_batch_norm(machine, func, args, kwargs):
    """Batch norm over every dimension but the channels (dim 1), in FP32 steps.

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
    return (result32(machine, y, x.dtype, x.shape), result32(machine, mean, statistics, (samples, groups)),
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
        results[0] = result32(machine, dx, x.dtype, x.shape)
    if output_mask[1]:
        terms = machine.mul(machine.sub(ds, machine.mul(db, mu)), r).reshape(samples, channels)
        results[1] = result32(machine, sum32(machine, np.ascontiguousarray(np.asarray(terms).T)), parameter,
                             (channels,))
    if output_mask[2]:
        results[2] = result32(machine, sum32(machine, np.ascontiguousarray(db.reshape(samples, channels).T)),
                             parameter, (channels,))
    return tuple(results)
