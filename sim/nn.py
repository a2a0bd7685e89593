"""A multilayer perceptron on :mod:`sim.tensor`: Linear -> ReLU -> ... -> Linear.

The model holds no arrays: :meth:`MLP.init_parameters` makes the parameter bit arrays and
:meth:`MLP.forward` takes them as tensors, so the training step decides their format (FP32 master
weights cast to the compute format, or weights kept in the compute format).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
from sim.tensor import Tensor, add_bias, matmul, quantized_matmul, relu

__all__ = ["DEFAULT_SIZES", "MLP"]

DEFAULT_SIZES = (64, 128, 128, 128, 10)
_INIT_STREAM = 3  # distinct from sim.data's stream tags, so init and data order are independent


class MLP:
    """Fully connected layers ``sizes[0] -> sizes[1] -> ... -> sizes[-1]`` with ReLU between.

    Layer ``i`` computes ``x @ W_i + b_i`` with ``W_i`` of shape (fan_in, fan_out). Parameters
    come in the order ``W_1, b_1, W_2, b_2, ...`` and are named ``fc1.weight``, ``fc1.bias``, ...

    >>> import numpy as np, softfloat16 as sf
    >>> model = MLP((4, 8, 3))
    >>> params = [Tensor(p, sf.fp32) for p in model.init_parameters(seed=0)]
    >>> model.parameter_names, model.forward(Tensor.from_float(np.ones((2, 4)), sf.fp32), params).shape
    (['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'], (2, 3))
    """

    def __init__(self, sizes: Sequence[int] = DEFAULT_SIZES) -> None:
        sizes = tuple(sizes)
        if len(sizes) < 2:
            raise ValueError(f"sizes needs at least an input and an output size, got {sizes!r}")
        for size in sizes:
            if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
                raise ValueError(f"sizes must be positive integers, got {sizes!r}")
        self.sizes = tuple(int(s) for s in sizes)

    @property
    def layer_names(self) -> list[str]:
        return [f"fc{i + 1}" for i in range(len(self.sizes) - 1)]

    @property
    def parameter_names(self) -> list[str]:
        return [f"{layer}.{kind}" for layer in self.layer_names for kind in ("weight", "bias")]

    @property
    def parameter_shapes(self) -> list[tuple[int, ...]]:
        pairs = zip(self.sizes[:-1], self.sizes[1:])
        return [shape for n_in, n_out in pairs for shape in ((n_in, n_out), (n_out,))]

    def init_parameters(self, seed: int = 0, fmt: sf.Format = sf.fp32, gain: float = 1.0) -> list[np.ndarray]:
        """He-uniform weights, ``U(-b, b)`` with ``b = gain * sqrt(6/fan_in)``, and zero biases, as
        bits of ``fmt``; a pure function of ``seed`` (and ``gain``) on every machine.

        Each uniform number is ``k * 2**-23 - 1`` for the top 24 bits ``k`` of a raw PCG64 word
        (exact in FP32), multiplied by the FP32 bound with one emulated rounding.

        >>> import softfloat16 as sf
        >>> w, b = MLP((2, 1)).init_parameters(seed=1)
        >>> w.dtype, bool(abs(sf.fp32.to_float(w)).max() <= 3 ** 0.5), b.tolist()
        (dtype('uint32'), True, [0])
        """
        params = []
        for index, (n_in, n_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            words = np.random.PCG64(np.random.SeedSequence([seed, _INIT_STREAM, index]))
            top24 = (words.random_raw(n_in * n_out) >> np.uint64(40)).astype(np.int64)
            unit = sf.fp32.mul(sf.fp32.from_float(top24 - (1 << 23)), sf.fp32.from_float(2.0**-23))
            bound = sf.fp32.from_float(gain * math.sqrt(6.0 / n_in))  # gain 1: exactly the plain bound
            weight = sf.fp32.mul(unit, bound).reshape(n_in, n_out)
            bias = np.zeros(n_out, dtype=np.uint32)
            for array in (weight, bias):
                params.append(array if fmt is sf.fp32 else sf.convert(array, src=sf.fp32, dst=fmt))
        return params

    def forward(self, x: Tensor, params: Sequence[Tensor], products: Any = None) -> Tensor:
        """Logits for a batch ``x`` (batch, sizes[0]), all in the parameters' format.
        ``products``: a :class:`sim.gemm.Products` computing the matrix products (default:
        sequential FP32 accumulation in the parameters' format)."""
        if len(params) != 2 * (len(self.sizes) - 1):
            raise ValueError(f"expected {2 * (len(self.sizes) - 1)} parameter tensors, got {len(params)}")
        for name, shape, param in zip(self.parameter_names, self.parameter_shapes, params):
            if param.shape != shape:
                raise ValueError(f"{name}: expected shape {shape}, got {param.shape}")
        h = x
        for layer, i in zip(self.layer_names, range(0, len(params), 2)):  # ops named for sim.trace
            if products is not None and products.quantized:
                product = quantized_matmul(h, params[i], products, layer)
            else:
                accumulation = None if products is None or products.accumulation.order == "sequential" else (
                    products.accumulation)
                product = matmul(h, params[i], name=f"{layer}.matmul", accumulation=accumulation)
            h = add_bias(product, params[i + 1], name=f"{layer}.add_bias")
            if i + 2 < len(params):
                h = relu(h, name=f"{layer}.relu")
        return h
