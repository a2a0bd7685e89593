"""The PyTorch reference: every op kind of :mod:`sim.crosscheck.record`, computed by torch.

Two modes:

- ``exact``: each op is written so that its result is defined to the bit (eager elementwise ops,
  explicit k-loops for matmuls and sums, exp/log by fp32math's own steps; see
  :mod:`sim.crosscheck.torch_exact`). On a correct device it must equal the emulator everywhere.
- ``library``: what a user's torch code would call (``torch.matmul`` on oneDNN/cuBLAS,
  ``torch.nn.functional.cross_entropy``, ``torch.mean``, ``torch.relu``, ``torch.optim.SGD`` /
  ``Adam``). Those ops are recorded with ``impl="library:..."``: their divergences are expected,
  and the report names them.

Both modes share what has one obvious definition: conversions (``Tensor.to``), bias add,
gradient widening, and torch.amp.GradScaler's own kernels for unscaling
(``torch._amp_foreach_non_finite_check_and_unscale_``, with GradScaler's reciprocal
``scale.double().reciprocal().float()``) and for the scale update (``torch._amp_update_scale_``).
Hyperparameters and counts enter as tensors holding the format's bits of the value (rounded once,
by softfloat16, from the double), as the emulator uses them.

:func:`torch_settings` fixes the global switches a bit-exact run needs (TF32 off, reduced-precision
reductions off, deterministic algorithms, no flush-to-zero) and restores them afterwards.
"""
from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

import softfloat16 as sf
from sim.crosscheck import torch_exact
from sim.crosscheck.record import DATA_FORMATS, FLOAT_FORMATS, Val
from softfloat16.optrace import VALUE_FORMATS, storage_dtype

__all__ = ["MODES", "TorchBackend", "device_info", "require_torch", "torch_settings"]

MODES = ("exact", "library")


def require_torch():
    """The torch module, or ImportError saying how to install it (torch is an optional extra)."""
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            "the cross-check's reference needs PyTorch: pip install -e '.[crosscheck]' "
            "(or pip install torch)"
        ) from error
    return torch


def _dtypes(torch) -> dict[str, tuple[Any, Any]]:
    """format name -> (torch dtype of the values, torch dtype its arrays are read through: the
    integer of the same width for bit patterns), for the formats a dump holds (names and dtypes
    from the op-trace table, softfloat16.optrace.VALUE_FORMATS)."""
    views = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    table = {}
    for fmt in (*FLOAT_FORMATS, *DATA_FORMATS):
        value = VALUE_FORMATS[fmt]
        dtype = getattr(torch, value.dtype_name)
        table[fmt] = (dtype, views[value.storage.itemsize] if value.bits else dtype)
    return table


@contextlib.contextmanager
def torch_settings(device: str) -> Iterator[dict[str, Any]]:
    """Set the switches for defined arithmetic; yields them as a dict for the dump's settings."""
    torch = require_torch()
    if device == "cuda":
        # cuBLAS needs this before its first handle for deterministic algorithms to be allowed.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    matmul_backend = torch.backends.cuda.matmul
    saved = {
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cuda_tf32": matmul_backend.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "fp16_reduction": matmul_backend.allow_fp16_reduced_precision_reduction,
        "bf16_reduction": matmul_backend.allow_bf16_reduced_precision_reduction,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    try:
        torch.use_deterministic_algorithms(True)
        matmul_backend.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        matmul_backend.allow_fp16_reduced_precision_reduction = False
        matmul_backend.allow_bf16_reduced_precision_reduction = False
        torch.set_float32_matmul_precision("highest")
        torch.set_flush_denormal(False)
        yield {
            "deterministic_algorithms": True,
            "tf32": False,
            "reduced_precision_reduction": False,
            "flush_denormal": False,
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG") if device == "cuda" else None,
        }
    finally:
        torch.use_deterministic_algorithms(saved["deterministic"])
        matmul_backend.allow_tf32 = saved["cuda_tf32"]
        torch.backends.cudnn.allow_tf32 = saved["cudnn_tf32"]
        matmul_backend.allow_fp16_reduced_precision_reduction = saved["fp16_reduction"]
        matmul_backend.allow_bf16_reduced_precision_reduction = saved["bf16_reduction"]
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])


def device_info(device: str) -> dict[str, Any]:
    """Versions and hardware of the torch side, for the dump."""
    torch = require_torch()
    info: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    if device == "cuda":
        major, minor = torch.cuda.get_device_capability(0)
        info.update({
            "gpu": torch.cuda.get_device_name(0),
            "compute_capability": f"{major}.{minor}",
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        })
    return info


class TorchBackend:
    """torch's side of every op kind, on ``device`` ("cpu" or "cuda"), in ``mode``.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> import numpy as np, softfloat16 as sf
    >>> from sim.crosscheck.record import Recorder
    >>> ops = Recorder(TorchBackend("cpu", "exact"))
    >>> a = ops.constant(sf.fp16.from_float(np.array([[1.0, 2.0**-11]])), "fp16")
    >>> b = ops.constant(sf.fp16.from_float(np.array([[1.0], [1.0]])), "fp16")
    >>> ops.run("matmul", "demo", {"a": a, "b": b})["out"].data    # 1 + 2**-11 in FP32, then a tie to even
    tensor([[1.]], dtype=torch.float16)
    >>> ops.records[0].impl
    'exact:k-loop'
    """

    name = "torch"

    def __init__(self, device: str = "cpu", mode: str = "exact") -> None:
        torch = require_torch()
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device cuda: no CUDA device is available to torch {torch.__version__}")
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device: expected cpu or cuda, got {device!r}")
        self.torch, self.device, self.mode = torch, torch.device(device), mode
        self.dtypes = _dtypes(torch)

    # --- bits <-> tensors -----------------------------------------------------------------------

    def from_bits(self, bits: np.ndarray, fmt: str) -> Any:
        value_dtype, int_dtype = self.dtypes[fmt]
        array = np.array(bits, dtype=storage_dtype(fmt), order="C")  # a copy, 0-d kept 0-d
        if fmt in FLOAT_FORMATS:
            array = array.view({1: np.uint8, 2: np.int16, 4: np.int32}[array.itemsize])
        return self.torch.from_numpy(array).view(value_dtype).to(self.device)

    def to_bits(self, data: Any, fmt: str) -> np.ndarray:
        value_dtype, int_dtype = self.dtypes[fmt]
        if data.dtype != value_dtype:
            raise TypeError(f"expected a {value_dtype} tensor for {fmt}, got {data.dtype}")
        array = np.array(data.detach().view(int_dtype).cpu().numpy())
        return array.view(storage_dtype(fmt)) if fmt in FLOAT_FORMATS else array

    def _constant(self, value: float, fmt: str) -> Any:
        """A hyperparameter or count as the format's bits of it (softfloat16's one rounding)."""
        return self.from_bits(np.asarray(FLOAT_FORMATS[fmt].from_float(np.float64(value))), fmt)

    def _zero_like(self, x: Any) -> Any:
        return self.torch.zeros((), dtype=x.dtype, device=x.device)

    # --- ops -------------------------------------------------------------------------------------

    def run(self, kind: str, inputs: dict[str, Val], attrs: dict[str, Any]) -> tuple[dict[str, Val], str]:
        method = getattr(self, "_" + kind.replace(".", "_"), None)
        if method is None:
            raise ValueError(f"unknown op kind {kind!r}")
        outputs, impl = method({role: v.data for role, v in inputs.items()},
                               {role: v.fmt for role, v in inputs.items()}, attrs)
        return outputs, impl

    @property
    def _exact(self) -> bool:
        return self.mode == "exact"

    def _library(self, what: str) -> str:
        return f"library:{what} ({self.device.type})"

    def _from_float32(self, x, fmts, attrs):
        dst = attrs["dst"]
        return {"out": Val(x["x"].view(self.torch.float32).to(self.dtypes[dst][0]), dst)}, "exact"

    def _convert(self, x, fmts, attrs):
        dst = attrs["dst"]
        return {"out": Val(x["x"].to(self.dtypes[dst][0]), dst)}, "exact"

    def _matmul(self, x, fmts, attrs):
        a, b = x["a"], x["b"]
        if self._exact:
            return {"out": Val(torch_exact.matmul(a, b, a.dtype), fmts["a"])}, "exact:k-loop"
        return {"out": Val(self.torch.matmul(a, b), fmts["a"])}, self._library("torch.matmul")

    def _matmul_backward(self, x, fmts, attrs):
        grad, a, b = x["grad"], x["a"], x["b"]
        requires_a, requires_b = attrs["requires"]
        gemm = (lambda p, q: torch_exact.matmul(p, q, p.dtype)) if self._exact else self.torch.matmul
        out = {}
        if requires_a:
            out["grad_a"] = Val(gemm(grad, b.t()), fmts["a"])
        if requires_b:
            out["grad_b"] = Val(gemm(a.t(), grad), fmts["b"])
        return out, ("exact:k-loop" if self._exact else self._library("torch.matmul"))

    # --- the fp8 recipe (sim.gemm.Fp8Products) ------------------------------------------------------

    def _fp8_scale(self, x, fmts, attrs):
        """One use's amax, its scale 2**(floor(log2(fmax / amax')) - margin) clamped to 2**+-127,
        where amax' is this amax (current) or the largest of the history (delayed; a NaN is the
        largest); while amax' is 0 or not finite the previous scale stays. Then the new history."""
        torch = self.torch
        value, history, previous = x["x"], x["history"], x["previous"]
        amax = value.abs().max()  # torch.max propagates NaN
        mode = attrs["mode"]
        if mode == "none":
            scale = torch.ones((), dtype=torch.float32, device=value.device)
        else:
            basis = amax if mode == "current" else (history.max() if history.numel() else None)
            usable = basis is not None and bool(torch.isfinite(basis) & (basis > 0))
            fmax = torch.finfo(self.dtypes[attrs["format"]][0]).max
            scale = self._power_of_two_scale(basis, fmax, attrs["margin"]) if usable else previous
        if mode == "delayed":
            history = torch.cat([history, amax.reshape(1)])[-attrs["length"]:]
        one = torch.ones((), dtype=torch.float32, device=value.device)
        impl = "exact:frexp" if self._exact else self._library("torch.log2")
        return {"amax": Val(amax, "fp32"), "scale": Val(scale, "fp32"), "scale_inv": Val(one / scale, "fp32"),
                "history": Val(history, "fp32")}, impl

    def _power_of_two_scale(self, amax, fmax: float, margin: int):
        torch = self.torch
        if not self._exact:  # the usual torch spelling: the log2 of a rounded quotient, rounded
            exponent = torch.floor(torch.log2(fmax / amax)) - margin
            return torch.pow(2.0, exponent.clamp(-127, 127)).to(torch.float32)
        # The largest k with amax * 2**k <= fmax, from the binary exponents (FP64 holds every FP32
        # value and these products exactly): amax = m * 2**e, fmax = f * 2**g, m, f in [0.5, 1),
        # so k = g - e, or g - e - 1 where m > f.
        wide = amax.double()
        _, e = torch.frexp(wide)
        _, g = torch.frexp(torch.tensor(fmax, dtype=torch.float64))
        k = int(g) - int(e)
        if bool(wide * 2.0**k > fmax):
            k -= 1
        k = max(-127, min(127, k - margin))
        return torch.tensor(2.0**k, dtype=torch.float64).to(torch.float32).to(amax.device)  # exact: |k| <= 127

    def _fp8_quantize(self, x, fmts, attrs):
        """``x * scale`` in FP32, then the saturating RNE cast: torch's E4M3FN cast saturates, its
        E5M2 cast overflows to inf, so both are clamped to the format's largest value first
        (exact, and NaN passes through the clamp). Library mode casts without the clamp.
        Stochastic rounding (``rounding="sr"``): :func:`torch_exact.stochastic_round_fp8` with the
        op seed's words of softfloat16's Philox stream (the one thing taken from softfloat16)."""
        torch = self.torch
        dst = attrs["dst"]
        dtype = self.dtypes[dst][0]
        scaled = x["x"] * x["scale"]
        if attrs["rounding"] == "sr":  # torch has no stochastic cast: both modes use the defined rule
            words = np.asarray(sf.stochastic.random_words(attrs["seed"], tuple(scaled.shape)), dtype=np.int64)
            out = torch_exact.stochastic_round_fp8(scaled, dtype, torch.from_numpy(words).to(scaled.device))
            return {"out": Val(out, dst)}, "exact:sr"
        if attrs["rounding"] != "rne":
            raise ValueError(f"fp8_quantize: unknown rounding {attrs['rounding']!r}")
        if not self._exact:
            return {"out": Val(scaled.to(dtype), dst)}, self._library(f"Tensor.to({dtype})")
        fmax = torch.finfo(dtype).max
        return {"out": Val(scaled.clamp(-fmax, fmax).to(dtype), dst)}, "exact"

    def _scaled_matmul(self, x, fmts, attrs):
        a, b, a_inv, b_inv = x["a"], x["b"], x["a_scale_inv"], x["b_scale_inv"]
        if not self._exact:
            try:  # b column-major, as cuBLASLt needs it (the CPU kernel takes either)
                out = self.torch._scaled_mm(a, b.t().contiguous().t(), scale_a=a_inv, scale_b=b_inv,
                                            out_dtype=self.torch.float32)
                return {"out": Val(out, "fp32")}, self._library("torch._scaled_mm")
            except RuntimeError:  # e.g. CUDA's sizes that are not multiples of 16: dequantise instead
                out = self.torch.matmul(a.float() * a_inv, b.float() * b_inv)
                return {"out": Val(out, "fp32")}, self._library("torch.matmul of dequantised FP32")
        # FP8 products are exact in FP32: the k-loop of FP32 adds, then the two inverse scales
        return {"out": Val(torch_exact.matmul(a, b, self.torch.float32) * a_inv * b_inv, "fp32")}, "exact:k-loop"

    def _add_bias(self, x, fmts, attrs):
        return {"out": Val(x["x"] + x["bias"][None, :], fmts["x"])}, "exact"

    def _add_bias_backward(self, x, fmts, attrs):
        grad = x["grad"]
        requires_x, requires_bias = attrs["requires"]
        out = {}
        if requires_x:
            out["grad_x"] = Val(grad, fmts["x"])
        if requires_bias:
            if self._exact:  # ones @ grad: FP32 accumulation over the batch, one rounding
                ones = self.torch.ones(1, grad.shape[0], dtype=grad.dtype, device=grad.device)
                column_sums = torch_exact.matmul(ones, grad, grad.dtype)[0]
            else:
                column_sums = grad.sum(0)
            out["grad_bias"] = Val(column_sums, fmts["bias"])
        return out, ("exact:k-loop" if self._exact else self._library("torch.sum"))

    def _relu(self, x, fmts, attrs):
        value = x["x"]
        if self._exact:  # max(x, 0) with NaN kept and -0 -> +0, spelled out
            keep = (value > 0) | (value != value)
            return {"out": Val(self.torch.where(keep, value, self._zero_like(value)), fmts["x"])}, "exact"
        return {"out": Val(self.torch.relu(value), fmts["x"])}, self._library("torch.relu")

    def _relu_backward(self, x, fmts, attrs):
        grad, value = x["grad"], x["x"]
        return {"grad_x": Val(self.torch.where(value > 0, grad, self._zero_like(grad)), fmts["x"])}, "exact"

    def _cast(self, x, fmts, attrs):
        dst = attrs["dst"]
        return {"out": Val(x["x"].to(self.dtypes[dst][0]), dst)}, "exact"

    def _cast_backward(self, x, fmts, attrs):
        return {"grad_x": Val(x["grad"].to(self.dtypes[fmts["x"]][0]), fmts["x"])}, "exact"

    def _softmax_parts(self, logits, labels):
        """(per-sample loss, softmax probabilities) as the emulator computes them, or by torch."""
        torch = self.torch
        rows = torch.arange(logits.shape[0], device=logits.device)
        if not self._exact:
            losses = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
            return losses, torch.softmax(logits, dim=1)
        top = logits[:, 0]
        for j in range(1, logits.shape[1]):  # row maximum by comparisons, in order
            top = torch.where(top < logits[:, j], logits[:, j], top)
        shifted = logits - top[:, None]
        exps = torch_exact.exp32(shifted)
        sums = torch_exact.sequential_sum(exps, 1)
        losses = torch_exact.log32(sums) - shifted[rows, labels]
        return losses, exps / sums[:, None]

    def _softmax_cross_entropy(self, x, fmts, attrs):
        losses, _ = self._softmax_parts(x["logits"], x["labels"])
        impl = "exact:fp32math" if self._exact else self._library("torch.nn.functional.cross_entropy")
        return {"out": Val(losses, "fp32")}, impl

    def _softmax_cross_entropy_backward(self, x, fmts, attrs):
        logits, labels, grad = x["logits"], x["labels"], x["grad"]
        _, probabilities = self._softmax_parts(logits, labels)
        # one_hot, not an indexed store: deterministic on CUDA too (exact: 0 and 1)
        onehot = self.torch.nn.functional.one_hot(labels, logits.shape[1]).to(logits.dtype)
        impl = "exact:fp32math" if self._exact else self._library("torch.softmax")
        return {"grad_logits": Val((probabilities - onehot) * grad[:, None], "fp32")}, impl

    def _mean(self, x, fmts, attrs):
        value, fmt = x["x"], fmts["x"]
        if not self._exact:
            return {"out": Val(value.mean(), fmt)}, self._library("torch.mean")
        flat = value.reshape(1, -1)
        ones = self.torch.ones(flat.shape[1], 1, dtype=value.dtype, device=value.device)
        total = torch_exact.matmul(flat, ones, value.dtype).reshape(())
        return {"out": Val(total / self._constant(value.numel(), fmt), fmt)}, "exact:k-loop"

    def _mean_backward(self, x, fmts, attrs):
        value, fmt = x["x"], fmts["x"]
        share = x["grad"] / self._constant(value.numel(), fmt)
        return {"grad_x": Val(share.expand(value.shape).contiguous(), fmt)}, "exact"

    def _scale(self, x, fmts, attrs):
        return {"out": Val(x["x"] * x["factor"], fmts["x"])}, "exact"

    def _scale_backward(self, x, fmts, attrs):
        return {"grad_x": Val(x["grad"] * x["factor"], fmts["x"])}, "exact"

    def _inv_scale(self, x, fmts, attrs):
        # GradScaler.unscale_: the reciprocal in double, rounded to float32.
        return {"inv": Val(x["scale"].double().reciprocal().float(), "fp32")}, "exact:GradScaler"

    def _unscale(self, x, fmts, attrs):
        torch = self.torch
        names = [role for role in x if role != "inv_scale"]
        grads = [x[name].clone() for name in names]
        found_inf = torch.zeros(1, dtype=torch.float32, device=self.device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, x["inv_scale"].reshape(1))
        out = {name: Val(g, fmts[name]) for name, g in zip(names, grads)}
        out["found_inf"] = Val(found_inf[0] != 0, "bool")
        return out, "exact:GradScaler"

    def _scaler_update(self, x, fmts, attrs):
        scale, tracker = x["scale"].clone().reshape(1), x["growth_tracker"].clone().reshape(1)
        found_inf = x["found_inf"].to(self.torch.float32).reshape(1)
        self.torch._amp_update_scale_(scale, tracker, found_inf, attrs["growth_factor"], attrs["backoff_factor"],
                                      attrs["growth_interval"])
        return {"scale": Val(scale[0], "fp32"), "growth_tracker": Val(tracker[0], "int32")}, "exact:GradScaler"

    def _sgd_step(self, x, fmts, attrs):
        fmt = fmts["param"]
        param, grad = x["param"], x["grad"]
        if not self._exact:
            return self._library_step(self.torch.optim.SGD, x, fmt, {"momentum_buffer": "buffer"}, attrs,
                                      lr=attrs["lr"], momentum=attrs["momentum"],
                                      weight_decay=attrs["weight_decay"])
        c = lambda name: self._constant(attrs[name], fmt)  # noqa: E731
        direction = grad if attrs["weight_decay"] == 0.0 else grad + c("weight_decay") * param
        out = {}
        if attrs["momentum"] != 0.0:
            if "buffer" in x:
                direction = c("momentum") * x["buffer"] + direction
            out["buffer"] = Val(direction, fmt)
        update = c("lr") * direction
        out["param"] = Val(param - update, fmt)
        return out, "exact"

    def _adam_step(self, x, fmts, attrs):
        fmt, torch = fmts["param"], self.torch
        param, grad, m, v = x["param"], x["grad"], x["exp_avg"], x["exp_avg_sq"]
        c = lambda name: self._constant(attrs[name], fmt)  # noqa: E731
        one = self._constant(1.0, fmt)
        power1, power2 = x["beta1_power"] * c("beta1"), x["beta2_power"] * c("beta2")
        if not self._exact:
            out, impl = self._library_step(torch.optim.Adam, x, fmt, {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"},
                                           attrs, lr=attrs["lr"], betas=(attrs["beta1"], attrs["beta2"]),
                                           eps=attrs["eps"], weight_decay=attrs["weight_decay"])
            out.update(beta1_power=Val(power1, fmt), beta2_power=Val(power2, fmt), step=Val(x["step"] + 1, "int64"))
            return out, impl
        grad = grad if attrs["weight_decay"] == 0.0 else grad + c("weight_decay") * param
        step_size = c("lr") / (one - power1)
        correction2 = torch_exact.sqrt(one - power2)
        m = m + (one - c("beta1")) * (grad - m)
        v = c("beta2") * v + ((one - c("beta2")) * grad) * grad
        denom = torch_exact.sqrt(v) / correction2 + c("eps")
        update = step_size * (m / denom)
        return {"param": Val(param - update, fmt), "exp_avg": Val(m, fmt), "exp_avg_sq": Val(v, fmt),
                "beta1_power": Val(power1, fmt), "beta2_power": Val(power2, fmt),
                "step": Val(x["step"] + 1, "int64")}, "exact"

    def _library_step(self, optimizer_class, x, fmt, state_roles, attrs, **hyper):
        """One step of a torch.optim optimizer (single-tensor code path) on one parameter."""
        torch = self.torch
        param = x["param"].clone()
        param.grad = x["grad"].clone()
        optimizer = optimizer_class([param], foreach=False, **hyper)
        state = {key: x[role].clone() for key, role in state_roles.items() if role in x}
        if optimizer_class is torch.optim.Adam:
            state["step"] = x["step"].to(torch.float32).cpu()  # torch keeps its step count on the CPU
        if state:
            optimizer.state[param] = state
        with torch.no_grad():
            optimizer.step()
        out = {"param": Val(param.detach(), fmt)}
        for key, role in state_roles.items():
            if key in optimizer.state[param]:
                out[role] = Val(optimizer.state[param][key], fmt)
        return out, self._library(f"torch.optim.{optimizer_class.__name__}(foreach=False)")

