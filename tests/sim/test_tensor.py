"""Autograd (sim.tensor) checked against central finite differences of float64 numpy code.

Each op runs on FP32 tensors (the fp32 recipe); its gradient, seeded with a random cotangent c,
must match d/dx sum(c * f(x)) computed by finite differences of an independent float64 version
of the op. FP32 rounding bounds the agreement (rtol 1e-4), so a wrong backward rule (a missing
transpose, a wrong sign, a lost term) fails by orders of magnitude.
"""
from __future__ import annotations

import numpy as np
import pytest

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim import tensor as T
from sim import trace
from sim.nn import MLP

F32 = sf.fp32


def fp32(values) -> np.ndarray:
    return np.asarray(F32.from_float(np.asarray(values, dtype=np.float64)))


def numeric_gradients(reference, inputs: list[np.ndarray], cotangent: np.ndarray) -> list[np.ndarray]:
    """d/dx_i sum(cotangent * reference(*inputs)) by central differences in float64."""
    grads = []
    for index, x in enumerate(inputs):
        grad = np.zeros_like(x)
        for position in np.ndindex(x.shape):
            h = 1e-6 * max(1.0, abs(x[position]))
            shifted = [v.copy() for v in inputs]
            shifted[index][position] = x[position] + h
            plus = np.sum(cotangent * reference(*shifted))
            shifted[index][position] = x[position] - h
            minus = np.sum(cotangent * reference(*shifted))
            grad[position] = (plus - minus) / (2 * h)
        grads.append(grad)
    return grads


def check_op(op, reference, inputs: list[np.ndarray], seed: int = 0, cotangent_format=F32, **extra) -> None:
    """Forward values and gradients of ``op`` (on FP32 tensors) against ``reference``.

    ``cotangent_format``: the random cotangent is drawn from its values (fp16 for a backward
    that passes through FP16, which would otherwise round it)."""
    rng = np.random.default_rng(seed)
    leaves = [T.Tensor(fp32(x), F32, requires_grad=True) for x in inputs]
    exact_inputs = [leaf.value() for leaf in leaves]  # the FP32-rounded inputs, as float64
    out = op(*leaves, **extra)
    expected = reference(*exact_inputs, **extra)
    np.testing.assert_allclose(out.value(), expected, rtol=1e-5, atol=1e-6)
    cotangent = cotangent_format.to_float(cotangent_format.from_float(rng.standard_normal(out.shape)))
    analytic = T.gradients(out, leaves, seed=fp32(cotangent))
    numeric = numeric_gradients(lambda *xs: reference(*xs, **extra), exact_inputs, cotangent)
    for got, want in zip(analytic, numeric):
        scale = np.max(np.abs(want)) + 1e-3
        np.testing.assert_allclose(F32.to_float(got), want, rtol=1e-4, atol=1e-4 * scale)


def softmax_ce_reference(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(labels)), labels]


def test_matmul_gradient():
    rng = np.random.default_rng(1)
    check_op(T.matmul, lambda a, b: a @ b, [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))])


def test_add_bias_gradient():
    rng = np.random.default_rng(2)
    check_op(T.add_bias, lambda x, b: x + b, [rng.standard_normal((5, 3)), rng.standard_normal(3)])


def test_relu_gradient():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5))
    x = np.where(np.abs(x) < 0.1, 0.5, x)  # finite differences need distance from the kink
    check_op(T.relu, lambda v: np.maximum(v, 0.0), [x])


def test_scale_gradient():
    rng = np.random.default_rng(4)
    check_op(lambda x: T.scale(x, np.float32(0.375)), lambda x: 0.375 * x, [rng.standard_normal((2, 3))])


def test_mean_gradient():
    rng = np.random.default_rng(5)
    check_op(T.mean, lambda x: np.mean(x), [rng.standard_normal((3, 4))])


def test_softmax_cross_entropy_gradient():
    rng = np.random.default_rng(6)
    labels = np.array([0, 3, 1, 3, 2])
    check_op(T.softmax_cross_entropy, softmax_ce_reference, [3 * rng.standard_normal((5, 4))], labels=labels)


def test_cast_gradient():
    """fp32 -> fp16 -> fp32 on FP16-representable values is the identity, gradient 1."""
    x = np.array([[0.5, -1.25, 3.0]])
    check_op(lambda v: T.cast(T.cast(v, sf.fp16), F32), lambda v: v, [x], cotangent_format=sf.fp16)


def test_whole_mlp_loss_gradient():
    """The composition the fp32 recipe trains: MLP logits -> softmax CE -> mean."""
    rng = np.random.default_rng(7)
    model = MLP((5, 4, 4, 3))
    params = [F32.to_float(p) for p in model.init_parameters(seed=3)]
    params = [p + 0.1 * rng.standard_normal(p.shape) for p in params]  # nonzero biases too
    x, labels = rng.standard_normal((6, 5)), rng.integers(0, 3, 6)
    x_tensor = T.Tensor(fp32(x), F32)

    def loss(*ps):
        return T.mean(T.softmax_cross_entropy(model.forward(x_tensor, list(ps)), labels))

    def reference(*ps):
        h = x
        for i in range(0, len(ps), 2):
            h = h @ ps[i] + ps[i + 1]
            if i + 2 < len(ps):
                h = np.maximum(h, 0.0)
        return np.mean(softmax_ce_reference(h, labels))

    check_op(loss, reference, params)


def test_tensor_used_twice_accumulates():
    rng = np.random.default_rng(8)
    check_op(lambda w: T.matmul(T.matmul(w, w), w), lambda w: w @ w @ w, [rng.standard_normal((3, 3))])


def test_promoted_backward_reuses_forward_values():
    """promote_to=fp32: the backward runs in FP32 on the FP16 forward values, widened exactly."""
    rng = np.random.default_rng(9)
    x = T.Tensor(np.asarray(sf.fp16.from_float(rng.standard_normal((4, 3)))), sf.fp16)
    w = T.Tensor(np.asarray(sf.fp16.from_float(rng.standard_normal((3, 2)))), sf.fp16, requires_grad=True)
    cotangent = fp32(rng.standard_normal((4, 2)) * 1e-6)  # mostly below FP16's normal range
    (promoted,) = T.gradients(T.matmul(x, w), [w], seed=cotangent, promote_to=F32)
    x32 = sf.convert(x.data, src=sf.fp16, dst=F32)
    np.testing.assert_array_equal(promoted, linalg.matmul(x32.T, cotangent, F32))
    (low,) = T.gradients(T.matmul(x, w), [w], seed=sf.convert(cotangent, src=F32, dst=sf.fp16))
    assert low.dtype == np.uint16


def test_backward_sets_grad_like_micrograd():
    w = T.Tensor(fp32([[1.0, 2.0]]), F32, requires_grad=True)
    x = T.Tensor(fp32([[3.0], [4.0]]), F32)
    T.mean(T.matmul(w, x)).backward()
    assert F32.to_float(w.grad).tolist() == [[3.0, 4.0]]
    assert x.grad is None


def test_errors():
    a16 = T.Tensor(np.zeros((2, 2), np.uint16), sf.fp16)
    a32 = T.Tensor(np.zeros((2, 2), np.uint32), F32)
    with pytest.raises(TypeError, match="share one format"):
        T.matmul(a16, a32)
    with pytest.raises(TypeError, match="fp32"):
        T.softmax_cross_entropy(a16, np.array([0, 1]))
    with pytest.raises(ValueError, match="labels"):
        T.softmax_cross_entropy(a32, np.array([0, 2]))
    with pytest.raises(TypeError, match="bit patterns"):
        T.Tensor(np.zeros(2, np.float32), F32)
    with pytest.raises(ValueError, match="requires a gradient"):
        T.gradients(T.mean(a32), [a32])
    with pytest.raises(ValueError, match="add_bias"):
        T.add_bias(a32, T.Tensor(np.zeros(3, np.uint32), F32))


def test_named_ops_and_their_backward_are_traced_in_the_low_precision_pass_only():
    seen = []
    w = T.Tensor.from_float(np.array([[0.5], [-1.0]]), sf.fp16, requires_grad=True)
    x = T.Tensor.from_float(np.array([[1.0, 2.0]]), sf.fp16)
    with trace.tracing(lambda kind, name, inputs, outputs, attrs: seen.append((kind, name, inputs, outputs, attrs))):
        loss = T.mean(T.cast(T.matmul(x, w, name="fc.matmul"), sf.fp32), name="loss.mean")  # cast unnamed: not traced
        T.gradients(loss, [w], promote_to=sf.fp32)  # the diagnostic's FP32 pass: not traced
        (grad,) = T.gradients(loss, [w])
    assert [(kind, name) for kind, name, *_ in seen] == [
        ("matmul", "fc.matmul"), ("mean", "loss.mean"), ("mean.backward", "loss.mean.backward"),
        ("matmul.backward", "fc.matmul.backward")]
    kind, name, inputs, outputs, attrs = seen[-1]
    assert list(inputs) == ["grad", "a", "b"] and attrs == {"requires": [False, True]}
    assert list(outputs) == ["grad_b"] and np.array_equal(outputs["grad_b"][0], grad)
    assert outputs["grad_b"][1] == "fp16" and inputs["a"][0] is x.data
    T.matmul(x, w, name="fc.matmul")  # no tracer installed: nothing reported
    assert len(seen) == 4
