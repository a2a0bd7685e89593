"""Array-level reverse-mode autograd over bit arrays of a softfloat16 Format.

A :class:`Tensor` holds a numpy array of bit patterns and the Format they belong to. Each op below
computes its result with softfloat16 only (no host float math) and records a small backward rule.
:func:`gradients` walks the graph backwards from a root and returns gradients for chosen leaves.

Gradient formats. Normally the gradient of a tensor has the tensor's own format: an FP16 forward
gets an FP16 backward (matmuls still accumulate in FP32, then round to FP16). With
``promote_to=sf.fp32`` every gradient is computed in FP32 instead, from the very same forward
values (widened exactly): the "same backward in FP32" that the underflow diagnostic compares with.

Ops: :func:`matmul`, :func:`add_bias`, :func:`relu`, :func:`cast`, :func:`scale`, :func:`mean`
and :func:`softmax_cross_entropy` (FP32, with the emulated exp/log of :mod:`sim.fp32math`). An op
given a ``name`` is reported to a :mod:`sim.trace` tracer, if one is installed, and so is its
backward rule in the low-precision backward pass (as ``<name>.backward``).

>>> import numpy as np, softfloat16 as sf
>>> x = Tensor.from_float(np.array([[1.0, -2.0]]), sf.fp32)
>>> w = Tensor.from_float(np.array([[3.0], [4.0]]), sf.fp32, requires_grad=True)
>>> y = mean(matmul(x, w))
>>> y.value(), gradients(y, [w])[0].view(np.float32).ravel()
(array(-5.), array([ 1., -2.], dtype=float32))
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim import fp32math, trace

__all__ = [
    "Tensor",
    "add_bias",
    "cast",
    "gradients",
    "matmul",
    "mean",
    "quantized_matmul",
    "relu",
    "scale",
    "softmax_cross_entropy",
]

# A backward rule: (gradient of the output, GradContext) -> one gradient (or None) per parent.
BackwardRule = Callable[[np.ndarray, "GradContext"], tuple]


class Tensor:
    """Bit patterns of ``fmt`` plus, for results of ops, how to differentiate them.

    ``data``: numpy array of ``fmt.dtype``. ``requires_grad``: for leaves, whether gradients are
    wanted. ``grad``: filled by :meth:`backward`.

    >>> import numpy as np, softfloat16 as sf
    >>> t = Tensor.from_float(np.array([0.5, 0.1]), sf.fp16)
    >>> t, t.value()
    (Tensor(fp16, shape=(2,), op='leaf'), array([0.5       , 0.09997559]))
    """

    def __init__(
        self,
        data: np.ndarray,
        fmt: sf.Format,
        requires_grad: bool = False,
        *,
        parents: tuple[Tensor, ...] = (),
        backward_rule: BackwardRule | None = None,
        op: str = "leaf",
    ) -> None:
        data = np.asarray(data)
        if data.dtype != fmt.dtype:
            raise TypeError(f"data must hold {fmt.name} bit patterns ({np.dtype(fmt.dtype)}), got {data.dtype}")
        self.data = data
        self.fmt = fmt
        self.parents = parents
        self.backward_rule = backward_rule
        self.op = op
        self.requires_grad = bool(requires_grad) or any(p.requires_grad for p in parents)
        self.grad: np.ndarray | None = None
        # For sim.trace: the op's name, its inputs by role, and the attributes of its backward.
        self.name: str | None = None
        self.trace_inputs: dict[str, Tensor | tuple[np.ndarray, str]] = {}
        self.backward_attrs: dict[str, object] = {}

    @classmethod
    def from_float(cls, values, fmt: sf.Format, requires_grad: bool = False) -> Tensor:
        """A leaf holding ``values`` rounded (RNE) into ``fmt``."""
        return cls(np.asarray(fmt.from_float(np.asarray(values))), fmt, requires_grad)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    def value(self) -> np.ndarray:
        """The exact values as float64 (for inspection; never used for training arithmetic)."""
        return np.asarray(self.fmt.to_float(self.data))

    def backward(self, seed: np.ndarray | None = None, promote_to: sf.Format | None = None) -> None:
        """Set ``.grad`` of every tensor of the graph that requires a gradient (micrograd style).

        >>> import numpy as np, softfloat16 as sf
        >>> w = Tensor.from_float(np.array([[2.0]]), sf.fp32, requires_grad=True)
        >>> loss = mean(scale(w, np.float32(3.0)))
        >>> loss.backward()
        >>> w.grad.view(np.float32)
        array([[3.]], dtype=float32)
        """
        grads = _backward_pass(self, seed, promote_to)
        for tensor, grad in grads.values():
            tensor.grad = grad

    def __repr__(self) -> str:
        return f"Tensor({self.fmt.name}, shape={self.shape}, op={self.op!r})"


class GradContext:
    """What a backward rule needs to know: the gradient format of each tensor."""

    def __init__(self, promote_to: sf.Format | None) -> None:
        self.promote_to = promote_to

    def format_of(self, tensor: Tensor) -> sf.Format:
        """The format in which ``tensor``'s gradient is computed."""
        return tensor.fmt if self.promote_to is None else self.promote_to

    def values(self, tensor: Tensor) -> np.ndarray:
        """``tensor``'s forward values in its gradient format (exact when widening)."""
        return _convert(tensor.data, tensor.fmt, self.format_of(tensor))


def _convert(bits: np.ndarray, src: sf.Format, dst: sf.Format) -> np.ndarray:
    if src is dst:
        return bits
    return np.asarray(sf.convert(bits, src=src, dst=dst))


def _zeros(shape: tuple[int, ...], fmt: sf.Format) -> np.ndarray:
    return np.zeros(shape, dtype=fmt.dtype)  # +0 is all-zero bits in every format


def _ones(shape: tuple[int, ...], fmt: sf.Format) -> np.ndarray:
    return np.full(shape, fmt.from_float(1.0), dtype=fmt.dtype)


def _same_format(op: str, *tensors: Tensor) -> sf.Format:
    fmt = tensors[0].fmt
    for t in tensors[1:]:
        if t.fmt is not fmt:
            names = ", ".join(x.fmt.name for x in tensors)
            raise TypeError(f"{op}: operands must share one format, got {names}; cast first")
    return fmt


def _column_sums(grad: np.ndarray, fmt: sf.Format) -> np.ndarray:
    """Sum over axis 0 with FP32 accumulation in order, rounded once to ``fmt`` (ones @ grad)."""
    ones = _ones((1, grad.shape[0]), fmt)
    return linalg.matmul(ones, grad, fmt, accumulate=sf.fp32, out_format=fmt)[0]


def _traced_values(inputs: dict[str, Tensor | tuple[np.ndarray, str]]) -> trace.Values:
    return {role: (v.data, v.fmt.name) if isinstance(v, Tensor) else v for role, v in inputs.items()}


def _result(data: np.ndarray, fmt: sf.Format, parents: tuple[Tensor, ...], backward: BackwardRule, op: str,
            name: str | None, inputs: dict[str, Tensor | tuple[np.ndarray, str]],
            attrs: dict[str, object] | None = None, backward_attrs: dict[str, object] | None = None) -> Tensor:
    """An op's output tensor, reported to the tracer as op ``name`` (``inputs``: by role, the
    parents in order and any constants as (bits, format name))."""
    out = Tensor(data, fmt, parents=parents, backward_rule=backward, op=op)
    out.name, out.trace_inputs = name, inputs
    out.backward_attrs = {**(attrs or {}), **(backward_attrs or {})}
    if name is not None and trace.active():
        trace.op(op, name, _traced_values(inputs), {"out": (out.data, fmt.name)}, **(attrs or {}))
    return out


# --- ops -------------------------------------------------------------------------------------


def matmul(a: Tensor, b: Tensor, name: str | None = None, accumulation: Any = None) -> Tensor:
    """``a @ b`` (2-D) in their common format: exact products, sequential FP32 accumulation,
    one rounding to the format. The backward pass uses the same kernel for both gradients.
    ``accumulation``: a :class:`sim.gemm.Accumulation` to sum the products another way (the
    tensor-core model) in all three products.

    >>> import numpy as np, softfloat16 as sf
    >>> a = Tensor.from_float(np.array([[1.0, 2.0]]), sf.fp16)
    >>> b = Tensor.from_float(np.array([[3.0], [4.0]]), sf.fp16)
    >>> matmul(a, b).value()
    array([[11.]])
    """
    fmt = _same_format("matmul", a, b)

    def product(x: np.ndarray, y: np.ndarray, f: sf.Format) -> np.ndarray:
        if accumulation is None:
            return linalg.matmul(x, y, f, accumulate=sf.fp32, out_format=f)
        return accumulation.matmul(np.ascontiguousarray(x), np.ascontiguousarray(y), f, f)

    data = product(a.data, b.data, fmt)

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        grad_fmt = ctx.format_of(a)
        grad_a = grad_b = None
        if a.requires_grad:  # dA = dY @ B^T
            grad_a = product(grad, ctx.values(b).T, grad_fmt)
        if b.requires_grad:  # dB = A^T @ dY
            grad_b = product(ctx.values(a).T, grad, grad_fmt)
        return grad_a, grad_b

    attrs = {} if accumulation is None else accumulation.describe()
    return _result(data, fmt, (a, b), backward, "matmul", name, {"a": a, "b": b}, attrs,
                   backward_attrs={"requires": [a.requires_grad, b.requires_grad]})


def quantized_matmul(x: Tensor, w: Tensor, products: Any, layer: str) -> Tensor:
    """``x @ w`` of FP32 tensors through a quantised recipe (:class:`sim.gemm.Fp8Products` or
    :class:`sim.gemm.BlockProducts`): the recipe quantises the operands of the forward product
    and of both backward products, and traces them under ``layer``. The FP32 reference backward
    (``promote_to``) multiplies the unquantised FP32 operands instead (sequential FP32 sums).

    >>> import numpy as np, softfloat16 as sf
    >>> from sim.gemm import Accumulation, Fp8Products
    >>> fp8 = Fp8Products(Accumulation(), ["fc1"], "current", None, 0, "rne", seed=0)
    >>> x = Tensor.from_float(np.array([[1.0, 0.3]]), sf.fp32)
    >>> w = Tensor.from_float(np.array([[1.0], [1.0]]), sf.fp32, requires_grad=True)
    >>> quantized_matmul(x, w, fp8, "fc1").value()   # scale 2**8: 0.3 * 256 = 76.8 -> E4M3 80 -> 0.3125
    array([[1.3125]])
    """
    for role, t in (("x", x), ("w", w)):
        if t.fmt is not sf.fp32 or t.data.ndim != 2:
            raise TypeError(f"quantized_matmul: {role} must be a 2-D fp32 tensor, got {t.fmt.name} {t.shape}")
    data, saved = products.forward(layer, x.data, w.data)

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        if ctx.promote_to is not None:  # the reference: the same forward values, no quantisation
            f32 = sf.fp32
            grad_x = linalg.matmul(grad, w.data.T, f32, out_format=f32) if x.requires_grad else None
            grad_w = linalg.matmul(x.data.T, grad, f32, out_format=f32) if w.requires_grad else None
            return grad_x, grad_w
        return products.backward(layer, grad, saved, x.requires_grad, w.requires_grad)

    # Traced by the recipe itself (its quantisations and products), not as one op.
    return _result(np.asarray(data), sf.fp32, (x, w), backward, "quantized_matmul", None, {"x": x, "w": w})


def add_bias(x: Tensor, bias: Tensor, name: str | None = None) -> Tensor:
    """``x + bias`` for x (batch, n) and bias (n,), one rounding per element.

    The bias gradient sums the output gradient over the batch (FP32 accumulation in order).

    >>> import numpy as np, softfloat16 as sf
    >>> x = Tensor.from_float(np.array([[1.0, 2.0]]), sf.fp16)
    >>> add_bias(x, Tensor.from_float(np.array([0.5, -2.0]), sf.fp16)).value()
    array([[1.5, 0. ]])
    """
    fmt = _same_format("add_bias", x, bias)
    if x.data.ndim != 2 or bias.shape != (x.shape[1],):
        raise ValueError(f"add_bias: expected x (batch, n) and bias (n,), got {x.shape} and {bias.shape}")
    data = fmt.add(x.data, bias.data[None, :])

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        grad_bias = _column_sums(grad, ctx.format_of(bias)) if bias.requires_grad else None
        return (grad if x.requires_grad else None), grad_bias

    return _result(data, fmt, (x, bias), backward, "add_bias", name, {"x": x, "bias": bias},
                   backward_attrs={"requires": [x.requires_grad, bias.requires_grad]})


def relu(x: Tensor, name: str | None = None) -> Tensor:
    """max(x, 0) elementwise; NaN stays NaN (as in torch); -0 becomes +0. The gradient passes
    where x > 0.

    >>> import numpy as np, softfloat16 as sf
    >>> relu(Tensor.from_float(np.array([-1.0, 0.0, 2.0, np.nan]), sf.fp16)).value()
    array([ 0.,  0.,  2., nan])
    """
    fmt = x.fmt
    positive = fmt.lt(_zeros((), fmt), x.data)
    keep = positive | ~fmt.eq(x.data, x.data)
    data = np.where(keep, x.data, fmt.dtype(0)).astype(fmt.dtype)

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        return (np.where(positive, grad, grad.dtype.type(0)).astype(grad.dtype),)

    return _result(data, fmt, (x,), backward, "relu", name, {"x": x})


def cast(x: Tensor, fmt: sf.Format, name: str | None = None) -> Tensor:
    """``x`` converted to ``fmt`` (one rounding, RNE). The gradient is converted back.

    >>> import numpy as np, softfloat16 as sf
    >>> cast(Tensor.from_float(np.array([1.0 + 2.0**-12]), sf.fp32), sf.fp16).value()
    array([1.])
    """
    data = _convert(x.data, x.fmt, fmt)
    out_fmt = fmt

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        return (_convert(grad, ctx.promote_to or out_fmt, ctx.format_of(x)),)

    return _result(data, fmt, (x,), backward, "cast", name, {"x": x}, {"dst": fmt.name})


def scale(x: Tensor, factor: np.floating, name: str | None = None) -> Tensor:
    """``x * factor`` for a constant ``factor`` (a numpy float of x's width, or bits).

    Used to scale the loss: the backward multiplies the incoming gradient by the same factor.

    >>> import numpy as np, softfloat16 as sf
    >>> scale(Tensor.from_float(np.array(1.5), sf.fp32), np.float32(1024.0)).value()
    array(1536.)
    """
    factor_bits = sf.as_bits(factor, x.fmt, "factor")
    data = x.fmt.mul(x.data, factor_bits)

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        grad_fmt = ctx.format_of(x)
        return (grad_fmt.mul(grad, _convert(factor_bits, x.fmt, grad_fmt)),)

    return _result(np.asarray(data), x.fmt, (x,), backward, "scale", name,
                   {"x": x, "factor": (np.asarray(factor_bits), x.fmt.name)})


def mean(x: Tensor, name: str | None = None) -> Tensor:
    """Mean of all elements: an in-order sum with FP32 accumulation rounded to x's format, then
    one division by the count (as torch's CPU mean of half does). Returns a 0-d tensor.

    >>> import numpy as np, softfloat16 as sf
    >>> mean(Tensor.from_float(np.array([1.0, 2.0, 4.0]), sf.fp32)).value()
    array(2.33333325)
    """
    fmt = x.fmt
    count = x.data.size
    flat = x.data.reshape(1, count)
    total = linalg.matmul(flat, _ones((count, 1), fmt), fmt, accumulate=sf.fp32, out_format=fmt)
    data = np.asarray(fmt.div(total.reshape(()), fmt.from_float(count)))

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        grad_fmt = ctx.format_of(x)
        share = grad_fmt.div(grad, grad_fmt.from_float(count))
        return (np.full(x.shape, share, dtype=grad_fmt.dtype),)

    return _result(data, fmt, (x,), backward, "mean", name, {"x": x})


def softmax_cross_entropy(logits: Tensor, labels: np.ndarray, name: str | None = None) -> Tensor:
    """Per-sample cross-entropy of softmax(logits) against integer ``labels``, in FP32.

    ``loss_i = log(sum_j exp(z_ij - m_i)) - (z_i,y_i - m_i)`` with ``m_i = max_j z_ij``; the sum
    accumulates in order in FP32. The gradient is ``(softmax - onehot) * upstream``. NaN logits
    give a NaN loss.

    >>> import numpy as np, softfloat16 as sf
    >>> z = Tensor.from_float(np.array([[0.0, 0.0]]), sf.fp32)
    >>> softmax_cross_entropy(z, np.array([1])).value()  # log 2
    array([0.69314718])
    """
    if logits.fmt is not sf.fp32:
        raise TypeError(f"softmax_cross_entropy: logits must be fp32 (cast them), got {logits.fmt.name}")
    if logits.data.ndim != 2:
        raise ValueError(f"softmax_cross_entropy: logits must be (batch, classes), got {logits.shape}")
    batch, classes = logits.shape
    labels = np.asarray(labels)
    if labels.shape != (batch,) or labels.dtype.kind not in "iu":
        raise ValueError(f"softmax_cross_entropy: labels must be {batch} integers, got {labels.dtype} {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"softmax_cross_entropy: labels must lie in [0, {classes})")
    f32, z = sf.fp32, logits.data
    rows = np.arange(batch)
    top = z[:, 0]
    for j in range(1, classes):  # row maximum by comparisons (a NaN logit poisons exp below)
        top = np.where(f32.lt(top, z[:, j]), z[:, j], top)
    shifted = f32.sub(z, top[:, None])
    exps = fp32math.exp(shifted)
    sums = linalg.matmul(exps, _ones((classes, 1), f32), f32, accumulate=f32, out_format=f32)[:, 0]
    data = f32.sub(fp32math.log(sums), shifted[rows, labels])
    probabilities = f32.div(exps, sums[:, None])
    onehot = np.zeros_like(z)
    onehot[rows, labels] = f32.from_float(1.0)

    def backward(grad: np.ndarray, ctx: GradContext) -> tuple:
        # The loss is FP32 and so are its gradients, whatever promote_to says.
        return (f32.mul(f32.sub(probabilities, onehot), grad[:, None]),)

    return _result(np.asarray(data), f32, (logits,), backward, "softmax_cross_entropy", name,
                   {"logits": logits, "labels": (np.asarray(labels, dtype=np.int64), "int64")})


# --- the backward pass -------------------------------------------------------------------------


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors that lead to ``root`` and require gradients, each after all its parents."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:  # iterative depth-first search: no recursion limit on deep graphs
        tensor, expanded = stack.pop()
        if expanded:
            order.append(tensor)
            continue
        if id(tensor) in seen or not tensor.requires_grad:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        stack.extend((parent, False) for parent in reversed(tensor.parents))
    return order


def _backward_pass(
    root: Tensor, seed: np.ndarray | None, promote_to: sf.Format | None
) -> dict[int, tuple[Tensor, np.ndarray]]:
    if not root.requires_grad:
        raise ValueError("backward: the root does not depend on any tensor that requires a gradient")
    if promote_to is not None and promote_to is not sf.fp32:
        raise ValueError(f"promote_to: only fp32 (the widest format) is supported, got {promote_to!r}")
    ctx = GradContext(promote_to)
    if seed is None:
        if root.data.size != 1:
            raise ValueError(f"backward: a seed gradient is needed for a non-scalar root {root.shape}")
        seed = _ones(root.shape, ctx.format_of(root))
    grads: dict[int, tuple[Tensor, np.ndarray]] = {id(root): (root, np.asarray(seed))}
    for tensor in reversed(_topological_order(root)):
        if tensor.backward_rule is None or id(tensor) not in grads:
            continue
        parent_grads = tensor.backward_rule(grads[id(tensor)][1], ctx)
        if promote_to is None and tensor.name is not None and trace.active():
            _trace_backward(tensor, grads[id(tensor)][1], parent_grads)
        for parent, grad in zip(tensor.parents, parent_grads):
            if grad is None or not parent.requires_grad:
                continue
            grad = np.asarray(grad)
            if id(parent) in grads:  # used twice: gradients add up (in the gradient format)
                grad = ctx.format_of(parent).add(grads[id(parent)][1], grad)
            grads[id(parent)] = (parent, grad)
    return grads


def _trace_backward(tensor: Tensor, grad: np.ndarray, parent_grads: tuple) -> None:
    """Report ``tensor``'s backward rule: the forward inputs and the incoming gradient in, a
    ``grad_<role>`` out for each parent that got one (the low-precision pass only)."""
    roles = [role for role, value in tensor.trace_inputs.items() if isinstance(value, Tensor)]
    outputs = {f"grad_{role}": (np.asarray(g), parent.fmt.name)
               for role, parent, g in zip(roles, tensor.parents, parent_grads) if g is not None}
    inputs = {"grad": (np.asarray(grad), tensor.fmt.name), **_traced_values(tensor.trace_inputs)}
    trace.op(f"{tensor.op}.backward", f"{tensor.name}.backward", inputs, outputs, **tensor.backward_attrs)


def gradients(
    root: Tensor,
    wrt: Sequence[Tensor],
    seed: np.ndarray | None = None,
    promote_to: sf.Format | None = None,
) -> list[np.ndarray]:
    """Gradients of ``root`` with respect to each tensor of ``wrt`` (bit arrays), leaving
    ``.grad`` untouched. ``seed``: the gradient of the root (default 1 for a scalar root).
    ``promote_to``: compute every gradient in this format (see the module docstring); a tensor the
    root does not depend on gets zeros.

    >>> import numpy as np, softfloat16 as sf
    >>> x = Tensor.from_float(np.array([[1.0]]), sf.fp16)
    >>> w = Tensor.from_float(np.array([[1.0]]), sf.fp16, requires_grad=True)
    >>> loss = scale(mean(cast(matmul(x, w), sf.fp32)), np.float32(2.0**-30))
    >>> gradients(loss, [w])[0], gradients(loss, [w], promote_to=sf.fp32)[0].view(np.float32)
    (array([[0]], dtype=uint16), array([[9.313226e-10]], dtype=float32))
    """
    ctx = GradContext(promote_to)
    grads = _backward_pass(root, seed, promote_to)
    return [grads[id(t)][1] if id(t) in grads else _zeros(t.shape, ctx.format_of(t)) for t in wrt]
