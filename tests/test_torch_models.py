"""Whole models under ``emulate(strict=True)``: Hugging Face ``transformers`` models built from tiny
configs with random weights (no downloads) and torch.nn layers, in FP16 and BF16, one forward, one
backward and one optimizer step each, every aten op emulated or native by design.

Every case runs strictly: an op the mode lacks fails its case, naming the op. GPT-2's logits are
compared with native torch CPU's bit for bit.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import softfloat16.torch as sft  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
VOCAB, HIDDEN, SEQ, BATCH = 64, 32, 8, 2

def _tokens(generator):
    return torch.randint(1, VOCAB, (BATCH, SEQ), generator=generator)


def _causal_lm(config_class, model_class, **config):
    def build(generator):
        model = model_class(config_class(**config))
        ids = _tokens(generator)
        return model, lambda m: m(input_ids=ids, labels=ids).loss
    return build


def gpt2(generator):
    from transformers import GPT2Config, GPT2LMHeadModel
    return _causal_lm(GPT2Config, GPT2LMHeadModel, vocab_size=VOCAB, n_positions=SEQ, n_embd=HIDDEN, n_layer=2,
                      n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)(generator)


def llama(generator):
    from transformers import LlamaConfig, LlamaForCausalLM
    return _causal_lm(LlamaConfig, LlamaForCausalLM, vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=SEQ)(generator)


def _mixtral(experts):
    def build(generator):
        from transformers import MixtralConfig, MixtralForCausalLM
        return _causal_lm(MixtralConfig, MixtralForCausalLM, vocab_size=VOCAB, hidden_size=HIDDEN,
                          intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                          num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=SEQ,
                          experts_implementation=experts)(generator)
    return build


def bert(generator):
    from transformers import BertConfig, BertForMaskedLM
    model = BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, max_position_embeddings=SEQ))
    ids = _tokens(generator)
    return model, lambda m: m(input_ids=ids, labels=ids).loss


def t5(generator):
    from transformers import T5Config, T5ForConditionalGeneration
    model = T5ForConditionalGeneration(T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0,
        pad_token_id=0))
    ids, labels = _tokens(generator), _tokens(generator)
    return model, lambda m: m(input_ids=ids, labels=labels).loss


def vit(generator):
    from transformers import ViTConfig, ViTForImageClassification
    model = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, num_channels=3, hidden_size=HIDDEN,
                                                num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                                num_labels=3))
    pixels = torch.randn(BATCH, 3, 8, 8, generator=generator)
    labels = torch.randint(0, 3, (BATCH,), generator=generator)
    return model, lambda m: m(pixel_values=pixels.to(m.dtype), labels=labels).loss


def _recurrent(layer_class, layers):
    def build(generator):
        model = layer_class(8, 16, num_layers=layers, bidirectional=True, batch_first=True)
        x = torch.randn(BATCH, SEQ, 8, generator=generator)
        return model, lambda m: m(x.to(next(m.parameters()).dtype))[0].pow(2).mean()
    return build


def cnn(generator):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))
    x = torch.randn(BATCH, 3, 8, 8, generator=generator)
    labels = torch.randint(0, 10, (BATCH,), generator=generator)
    return model, lambda m: torch.nn.functional.cross_entropy(m(x.to(m[0].weight.dtype)), labels)


# case -> (builder, optimizer: "adamw" or "sgd")
CASES = {
    "gpt2": (gpt2, "adamw"),
    "llama": (llama, "adamw"),
    "mixtral-eager": (_mixtral("eager"), "adamw"),
    "mixtral-grouped_mm": (_mixtral("grouped_mm"), "adamw"),
    "bert": (bert, "adamw"),
    "t5": (t5, "adamw"),
    "vit": (vit, "adamw"),
    "lstm": (_recurrent(torch.nn.LSTM, 2), "sgd"),
    "gru": (_recurrent(torch.nn.GRU, 1), "sgd"),
    "cnn": (cnn, "sgd"),
}


def _optimizer(kind, parameters):
    if kind == "adamw":  # eps representable in FP16 (1e-8 is 0 there: 0 / 0 for a parameter without gradient)
        return torch.optim.AdamW(parameters, lr=1e-2, eps=1e-3, foreach=False, fused=False)
    return torch.optim.SGD(parameters, lr=0.1, momentum=0.9, foreach=False)


def _train_step(case, dtype):
    """(model, loss, parameters, their values before the step, mode) after one strict step."""
    builder, kind = CASES[case]
    torch.manual_seed(0)
    model, loss_of = builder(torch.Generator().manual_seed(1))
    model = model.to(dtype).train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in parameters]
    optimizer = _optimizer(kind, parameters)
    with sft.emulate(strict=True) as mode:
        loss = loss_of(model)
        loss.backward()
        optimizer.step()
    return loss, parameters, before, mode


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_train_step_strict(case, dtype_name):
    dtype = DTYPES[dtype_name]
    loss, parameters, before, mode = _train_step(case, dtype)  # NotEmulatedError names a missing op
    assert mode.fallbacks == {}
    assert loss.dtype in (dtype, torch.float32)  # transformers' losses upcast the logits to float32
    assert torch.isfinite(loss), loss
    for parameter in parameters:
        assert parameter.dtype == dtype
        assert parameter.grad is not None and parameter.grad.dtype == dtype
        assert torch.isfinite(parameter.grad).all() and torch.isfinite(parameter).all()
    # Every parameter with a gradient of some size moved (an attention key's bias has none: softmax
    # does not see a constant added to a row, its gradient is rounding noise, 1e-7 against 1e-1).
    largest = max(p.grad.abs().max().item() for p in parameters)
    stuck = [index for index, (p, old) in enumerate(zip(parameters, before))
             if p.grad.abs().max().item() > 1e-3 * largest and torch.equal(p.detach(), old)]
    assert stuck == [], f"parameters {stuck} of {len(parameters)} have gradients but did not change"
    assert sum(not torch.equal(p.detach(), old) for p, old in zip(parameters, before)) >= 0.9 * len(parameters)


# Share of GPT-2 logits bit-identical to native torch CPU's (eval, no dropout), measured on this
# model (2 layers, hidden 32, seeds 0 to 2): FP16 0.886 to 1.0, BF16 1.0.
IDENTICAL_LOGITS = {"fp16": 0.85, "bf16": 0.99}


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_gpt2_logits_match_native_torch(dtype_name):
    dtype = DTYPES[dtype_name]
    torch.manual_seed(0)
    model, _ = gpt2(torch.Generator())
    model = model.to(dtype).eval()
    ids = _tokens(torch.Generator().manual_seed(1))
    with torch.no_grad():
        native = model(input_ids=ids).logits
        with sft.emulate(strict=True):
            emulated = model(input_ids=ids).logits
    assert emulated.dtype == native.dtype == dtype and emulated.shape == (BATCH, SEQ, VOCAB)
    identical = (emulated.view(torch.int16) == native.view(torch.int16)).double().mean().item()
    assert identical >= IDENTICAL_LOGITS[dtype_name], identical
    assert (emulated.float() - native.float()).abs().max() <= 0.02 * native.float().abs().max()
