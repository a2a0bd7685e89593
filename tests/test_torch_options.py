"""emulate()'s options: one that would have no effect is an error naming what it needs; the
errors list only what is accepted; the report of a run without emulated dtypes says so; a
recorded trace and the CLI keep the matrix unit only where it is used."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import softfloat16 as sf  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from softfloat16.torch.__main__ import main  # noqa: E402
from softfloat16.torch.machine import Machine  # noqa: E402
from softfloat16.torch.recording import load_trace, record, save_trace  # noqa: E402
from softfloat16.torch.trace_compare import machine_from_settings  # noqa: E402


def test_seed_needs_stochastic_rounding():
    with pytest.raises(ValueError, match=r"^seed: 3 would be unused: only stochastic rounding .*rounding='sr'"):
        sft.emulate(seed=3)
    with pytest.raises(ValueError, match=r"^seed: rounding='sr' \(stochastic rounding\) needs an integer seed"):
        sft.emulate(rounding="sr")
    assert sft.emulate(rounding="sr", seed=3).machine.seed == 3


def test_tensor_core_needs_the_tensorcore_order():
    assert Machine().tensor_core is None
    with pytest.raises(ValueError, match=r"^tensor_core: 'a100' would be unused: .*order=\"tensorcore\".*'pairwise'"):
        sft.emulate(tensor_core="a100", order="pairwise")
    with pytest.raises(ValueError, match=r"^tensor_core: order=\"tensorcore\" needs a matrix unit: name one, e\.g\. "
                                         r"tensor_core=\"h100\".*softfloat16\.mma.*TensorCore"):
        sft.emulate(order="tensorcore")
    machine = sft.emulate(order="tensorcore", tensor_core="A100").machine
    assert machine.tensor_core == "a100" and machine.gemm_policy(sf.fp16) == {"order": "tensorcore",
                                                                              "tensor_core": "a100"}
    assert Machine(order="pairwise").gemm_policy(sf.fp16) == {"order": "pairwise"}


def test_accumulate_errors_list_only_the_accumulation_formats():
    for bad in ("fp64", "e4m3"):
        with pytest.raises(ValueError) as error:
            sft.emulate(accumulate=bad)
        message = str(error.value)
        assert message.startswith("accumulate: ") and message.endswith("fp32, bf16, fp16, tf32 or fp8_e5m2")
        assert "float16" not in message and "p3109" not in message
    assert sft.emulate(accumulate="tf32").machine.accumulate.name == "tf32"


def test_report_says_when_no_emulated_dtype_ran():
    model = torch.nn.Linear(3, 2).double()
    with sft.emulate() as mode:
        model(torch.ones(4, 3, dtype=torch.float64)).sum().backward()
    assert mode.report() == "no op with an emulated dtype ran"
    with sft.emulate() as mode:
        torch.ones(2, dtype=torch.bfloat16) * 3
    assert mode.report() == "every op with emulated dtypes was emulated"


def _recorded(tmp_path, name, **options):
    x = torch.ones(2, 2, dtype=torch.float16)
    with sft.emulate(**options), record(tmp_path / name):
        x @ x
    return tmp_path / name


def test_a_trace_stores_the_matrix_unit_only_under_the_tensorcore_order(tmp_path):
    plain = load_trace(_recorded(tmp_path, "plain.npz")).settings["machine"]
    assert "tensor_core" not in plain
    core = load_trace(_recorded(tmp_path, "core.npz", order="tensorcore", tensor_core="h100")).settings["machine"]
    assert core["tensor_core"] == "h100"
    assert machine_from_settings({"machine": core}).tensor_core == "h100"
    # A trace of an earlier version stored the unused default under every order: read as absent.
    old = load_trace(tmp_path / "plain.npz")
    old.settings["machine"] = {**old.settings["machine"], "tensor_core": "h100"}
    save_trace(tmp_path / "old.npz", old)
    assert "tensor_core" not in load_trace(tmp_path / "old.npz").settings["machine"]


def test_the_cli_tensor_core_flag_needs_the_tensorcore_order(tmp_path, capsys):
    plain = str(_recorded(tmp_path, "plain.npz"))
    core = str(_recorded(tmp_path, "core.npz", order="tensorcore", tensor_core="h100"))
    assert main(["compare", plain, "--replay", "--tensor-core", "a100"]) == 2
    assert "tensor_core: 'a100' would be unused" in capsys.readouterr().err
    assert main(["compare", plain, "--replay", "--order", "tensorcore"]) == 2
    assert 'order="tensorcore" needs a matrix unit' in capsys.readouterr().err
    assert main(["compare", plain, "--replay", "--order", "tensorcore", "--tensor-core", "h100"]) == 0
    assert main(["compare", core, "--replay", "--order", "pairwise"]) == 0  # the stored unit is dropped
    capsys.readouterr()
