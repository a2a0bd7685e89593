"""softfloat16.torch.record (op traces of any torch run) and `python -m softfloat16.torch compare`.

Oracles: native torch's own tensors (a native trace must hold exactly the bits torch computed),
numpy / ml_dtypes bit patterns of known values, and hand-made one-ulp changes whose position and
size the comparison must report.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

import softfloat16.torch as sft  # noqa: E402
from softfloat16.npzfile import load_npz, save_npz  # noqa: E402
from softfloat16.torch.__main__ import main  # noqa: E402
from softfloat16.torch.recording import (  # noqa: E402
    TRACE_KIND, TraceError, load_trace, record, save_trace, tensor_from_value, tensor_value,
)
from softfloat16.torch.trace_compare import (  # noqa: E402
    TraceMismatch, compare_traces, machine_from_settings, replay_traces,
)
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# The ops of one forward + backward of Linear-ReLU-Linear with cross-entropy (views left out),
# with the module each runs in and its phase.
EXPECTED_OPS = [
    ("aten.addmm.default", "0", "forward"),
    ("aten.relu.default", "1", "forward"),
    ("aten.addmm.default", "2", "forward"),
    ("aten._log_softmax.default", None, "forward"),
    ("aten.nll_loss_forward.default", None, "forward"),
    ("aten.ones_like.default", None, "forward"),  # backward()'s seed, made before the engine runs
    ("aten.nll_loss_backward.default", None, "backward"),
    ("aten._log_softmax_backward_data.default", None, "backward"),
    ("aten.mm.default", "2", "backward"),
    ("aten.mm.default", "2", "backward"),
    ("aten.sum.dim_IntList", "2", "backward"),
    ("aten.threshold_backward.default", "1", "backward"),
    ("aten.mm.default", "0", "backward"),
    ("aten.sum.dim_IntList", "0", "backward"),
]
RELU = 1  # position of the relu op


def make_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).half()
    x = torch.randn(5, 4).half()
    labels = torch.tensor([0, 2, 1, 1, 0])
    return model, x, labels


def step(model, x, labels):
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    return loss


def int_bits(tensor):
    return tensor.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


class PerturbRelu(TorchDispatchMode):
    """Adds one to the bit pattern of element (0, column) of every relu result: a 1-ulp error in
    one op, which the ops after it inherit."""

    def __init__(self, column):
        super().__init__()
        self.column = column

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.relu.default:
            with _disable_current_modes():
                result.view(torch.int16)[0, self.column] += 1
        return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Traces of the same step: native twice, emulated, and emulated with a 1-ulp error in relu."""
    folder = tmp_path_factory.mktemp("traces")
    model, x, labels = make_model()
    paths = {name: folder / f"{name}.npz" for name in ("native", "native2", "emulated", "perturbed")}
    with record(paths["native"], model=model) as recorder:
        loss = step(model, x, labels)
    reference = {"loss": loss, "model": model, "x": x, "recorder": recorder,
                 "grads": [p.grad.clone() for p in model.parameters()], "out0": model[0](x).detach()}
    with record(paths["native2"], model=model):
        step(model, x, labels)
    with sft.emulate(), record(paths["emulated"], model=model) as emulated:
        reference["emulated_loss"] = step(model, x, labels)
    reference["emulated_recorder"] = emulated
    # A positive relu output to perturb: relu(0) + 1 would be a subnormal where 0 was.
    column = int(torch.nonzero(torch.relu(model[0](x))[0])[0])
    with sft.emulate(), PerturbRelu(column), record(paths["perturbed"], model=model):
        step(model, x, labels)
    reference["column"] = column
    return paths, reference


def test_a_native_trace_holds_every_op_its_module_and_torchs_own_bits(runs):
    paths, ref = runs
    trace = load_trace(paths["native"])
    assert [(op.name, op.module, op.phase) for op in trace.ops] == EXPECTED_OPS
    assert (trace.side, trace.mode, trace.device["devices"], trace.config["model"]) == (
        "torch", "native", ["cpu"], "Sequential")
    assert trace.device["torch"] == torch.__version__ and "machine" not in trace.settings
    assert all(op.impl == "torch-cpu" and op.kind == "aten" for op in trace.ops)
    assert trace.ops[8].attrs["node"] == "AddmmBackward0"
    first = trace.ops[0]
    assert dict((role, fmt) for role, fmt, _ in first.inputs) == {"self": "fp16", "mat1": "fp16", "mat2": "fp16"}
    np.testing.assert_array_equal(first.inputs[1][2], int_bits(ref["x"]))
    np.testing.assert_array_equal(first.outputs[0][2], int_bits(ref["out0"]))
    # The weight and bias gradients of the first layer are the last two ops' results.
    weight_grad, bias_grad = ref["grads"][:2]
    np.testing.assert_array_equal(trace.ops[12].outputs[0][2], int_bits(weight_grad))
    np.testing.assert_array_equal(trace.ops[13].outputs[0][2].reshape(-1), int_bits(bias_grad))
    loss_op = trace.ops[4]
    assert loss_op.inputs[1][1] == "int64" and loss_op.attrs["args"][3:] == [1, -100]
    np.testing.assert_array_equal(loss_op.outputs[0][2], int_bits(ref["loss"]))
    assert ref["recorder"].views_skipped > 0 and trace.settings["views_skipped"] == ref["recorder"].views_skipped


def test_the_file_is_the_crosscheck_container_round_trips_exactly_and_stores_each_array_once(runs, tmp_path):
    paths, _ = runs
    with np.load(paths["native"], allow_pickle=False) as npz:  # an ordinary .npz, no pickle
        meta = json.loads(npz["__meta__"].tobytes())
        arrays = {name: npz[name] for name in npz.files if not name.startswith("__")}
    assert meta["kind"] == TRACE_KIND and meta["schema_version"] == 1 and meta["steps"] == len(EXPECTED_OPS)
    assert set(meta["ops"][0]) == {"step", "name", "kind", "impl", "attrs", "inputs", "outputs"}
    contents = {(a.dtype.str, a.shape, a.tobytes()) for a in arrays.values()}
    assert len(contents) == len(arrays)  # no array stored twice
    # relu reads addmm's result: one array for both
    assert meta["ops"][0]["outputs"][0][2] == meta["ops"][1]["inputs"][0][2]
    from sim.checkpoint import load_checkpoint  # sim's checkpoints: the same container

    assert load_checkpoint(paths["native"])[1]["kind"] == TRACE_KIND
    copy = tmp_path / "copy.npz"
    save_trace(copy, load_trace(paths["native"]))
    assert copy.read_bytes() == paths["native"].read_bytes()


SPECIALS = [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), 1e-40, 3.0e38, 5.9604645e-08]


@pytest.mark.parametrize(("dtype", "fmt", "numpy_dtype", "width"), [
    (torch.float16, "fp16", np.float16, np.uint16),
    (torch.bfloat16, "bf16", ml_dtypes.bfloat16, np.uint16),
    (torch.float32, "fp32", np.float32, np.uint32),
    (torch.float64, "fp64", np.float64, np.uint64),
    (torch.float8_e4m3fn, "fp8_e4m3fn", ml_dtypes.float8_e4m3fn, np.uint8),
    (torch.float8_e5m2, "fp8_e5m2", ml_dtypes.float8_e5m2, np.uint8),
])
def test_values_are_stored_as_their_bit_patterns(dtype, fmt, numpy_dtype, width):
    with np.errstate(over="ignore"):  # 3e38 overflows the narrow formats: inf (or NaN), as intended
        patterns = np.array(SPECIALS, np.float64).astype(numpy_dtype).view(width)
    patterns = np.concatenate([patterns, np.array([1, patterns[6] | width(1)], width)])  # min subnormal, NaN payload
    tensor = tensor_from_value(fmt, patterns.reshape(3, 4))
    assert tensor.dtype == dtype
    stored_fmt, stored = tensor_value(tensor.t())  # a non-contiguous view: stored in row-major order
    assert stored_fmt == fmt
    np.testing.assert_array_equal(stored, patterns.reshape(3, 4).T)


def test_integers_booleans_meta_and_in_place_inputs(tmp_path):
    path = tmp_path / "t.npz"
    y = torch.tensor([1.5, -0.0, 65504.0], dtype=torch.float16)
    with record(path):
        y.add_(1.0)                                   # in place: its input is the value before
        mask = y > 2
        counts = mask.to(torch.int32).sum()
        torch.empty(3, device="meta").mul_(2)         # no values to keep: the op still runs
    ops = load_trace(path).ops
    assert [op.name for op in ops] == ["aten.add_.Tensor", "aten.gt.Scalar", "aten._to_copy.default",
                                       "aten.sum.default", "aten.empty.memory_format", "aten.mul_.Tensor"]
    np.testing.assert_array_equal(ops[0].inputs[0][2], np.array([0x3E00, 0x8000, 0x7BFF], np.uint16))
    np.testing.assert_array_equal(ops[0].outputs[0][2], np.array([0x4100, 0x3C00, 0x7BFF], np.uint16))
    assert ops[0].attrs["args"] == [{"tensor": "self"}, 1.0]
    assert ops[1].outputs[0][1] == "bool" and ops[1].outputs[0][2].tolist() == [True, False, True]
    assert ops[2].attrs["kwargs"]["dtype"] == {"dtype": "int32"} and ops[3].outputs[0][2] == counts.item() == 2
    assert ops[5].inputs == [] and ops[5].attrs["args"][0]["device"] == "meta"


def test_views_are_skipped_unless_asked(tmp_path):
    x = torch.ones(2, 3, dtype=torch.bfloat16)
    with record(tmp_path / "a.npz") as without, record(tmp_path / "b.npz", views=True) as with_views:
        x.t().sum()
    assert [op.name for op in without.trace.ops] == ["aten.sum.default"] and without.views_skipped == 1
    assert [op.name for op in with_views.trace.ops] == ["aten.t.default", "aten.sum.default"]


def test_an_emulated_trace_holds_the_emulated_values_and_the_machine(runs):
    paths, ref = runs
    trace = load_trace(paths["emulated"])
    assert [(op.name, op.module, op.phase) for op in trace.ops] == EXPECTED_OPS
    assert (trace.side, trace.mode) == ("emulator", "emulated")
    assert trace.settings["machine"] == {"rounding": "rne", "accumulate": "fp32", "order": "sequential",
                                         "nan": "x86", "ftz": False, "seed": None, "strict": True}
    assert trace.ops[0].impl == "softfloat16" and trace.ops[5].impl == "torch-cpu"  # ones_like: native
    np.testing.assert_array_equal(trace.ops[4].outputs[0][2], int_bits(ref["emulated_loss"]))
    machine = machine_from_settings(trace.settings, rounding="rtz")
    assert (machine.rounding, machine.order, machine.nan) == ("rtz", "sequential", "x86")


def test_record_outside_emulate_sees_what_the_mode_hands_to_torch(tmp_path):
    model, x, labels = make_model()
    with record(tmp_path / "outer.npz", model=model) as recorder, sft.emulate():
        step(model, x, labels)
    names = {op.name for op in recorder.trace.ops}
    assert recorder.trace.mode == "native" and "aten.relu.default" not in names  # emulated: not torch's
    assert load_trace(tmp_path / "outer.npz").ops  # still a valid trace


def test_two_identical_runs_compare_equal(runs, capsys):
    paths, _ = runs
    assert main(["compare", str(paths["native"]), str(paths["native2"])]) == 0
    out = capsys.readouterr().out
    assert "no divergence" in out and "14 ops" in out


def inject_one_ulp(source: Path, target: Path, position: int, index: tuple[int, ...]) -> tuple[int, int]:
    """Copy a trace, adding one to the bit pattern of one element of one op's first output (a new
    array: the ops that read that value keep theirs). Returns (old, new) bit patterns."""
    arrays, meta = load_npz(source)
    output = meta["ops"][position]["outputs"][0]
    changed = arrays[output[2]].copy()
    old = int(changed[index])
    changed[index] += 1
    arrays["injected"], old_name, output[2] = changed, output[2], "injected"
    if not any(value[2] == old_name for op in meta["ops"] for value in op["inputs"] + op["outputs"]):
        del arrays[old_name]  # a trace refers to every array it holds
    save_npz(target, arrays, meta)
    return old, old + 1


def test_an_injected_one_ulp_change_is_found_and_named(runs, tmp_path, capsys):
    paths, _ = runs
    copy = tmp_path / "injected.npz"
    position, index = 8, (2, 5)  # the first mm of backward, in module "2"
    old, new = inject_one_ulp(paths["native"], copy, position, index)
    result = compare_traces(load_trace(paths["native"]), load_trace(copy))
    assert len(result.divergent) == 1
    first = result.first
    assert (first.op.step, first.op.name, first.op.module, first.role) == (position, "aten.mm.default", "2", "out")
    assert [(e.index, int(e.a), int(e.b), e.ulp) for e in first.elements] == [(index, old, new, 1)]
    assert (first.differing, first.total, first.max_ulp, first.inputs_identical) == (1, 40, 1, True)
    assert main(["compare", str(paths["native"]), str(copy)]) == 1
    out = capsys.readouterr().out
    assert "first divergence: op 8 aten.mm.default [module 2, backward (AddmmBackward0)], output out" in out
    assert f"element (2, 5): A 0x{old:04x} (" in out and f"B 0x{new:04x} (" in out and "; 1 ulp apart" in out
    assert "1 of 40 output elements differ" in out and "local to this op" in out


def test_replay_separates_the_local_divergence_from_what_it_causes(runs):
    paths, ref = runs
    emulated, perturbed = load_trace(paths["emulated"]), load_trace(paths["perturbed"])
    cascade = compare_traces(emulated, perturbed)
    assert cascade.first.op.step == RELU and cascade.first.inputs_identical
    assert cascade.first.elements[0].index == (0, ref["column"]) and cascade.first.elements[0].ulp == 1
    assert len(cascade.divergent) > 3  # every op after relu that reads it differs
    assert all(not diff.inputs_identical for diff in cascade.divergent[1:])
    # Each op of the perturbed run recomputed from its own inputs: only relu disagrees.
    machine = machine_from_settings(perturbed.settings)
    alone = replay_traces(perturbed, perturbed, machine)
    assert [diff.op.step for diff in alone.divergent] == [RELU]
    assert alone.first.elements[0].ulp == 1 and not alone.not_replayed and not alone.native


def test_replay_from_the_command_line_and_its_machine_flags(runs, capsys):
    paths, _ = runs
    assert main(["compare", str(paths["perturbed"]), "--replay"]) == 1
    out = capsys.readouterr().out
    assert "first divergence: op 1 aten.relu.default [module 1, forward]" in out
    assert "divergent ops: 1 of 14" in out and "replayed 0x" in out
    assert main(["compare", str(paths["emulated"]), "--replay"]) == 0  # the emulator reproduces itself
    assert "no divergence" in capsys.readouterr().out


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_op_lists_that_differ_are_named_at_the_first_mismatch(runs, tmp_path, capsys):
    paths, _ = runs
    model, x, labels = make_model()
    model[1] = torch.nn.Sigmoid()
    other = tmp_path / "other.npz"
    with record(other, model=model):
        step(model, x, labels)
    with pytest.raises(TraceMismatch, match=r"at op 1: A has aten.relu.default \[module 1, forward\], "
                                            r"B has aten.sigmoid.default \[module 1, forward\]"):
        compare_traces(load_trace(paths["native"]), load_trace(other))
    forward_only = tmp_path / "forward.npz"
    with record(forward_only):
        model(x)
    assert main(["compare", str(paths["native"]), str(forward_only)]) == 2
    assert "op lists differ at op 1" in one_line_error(capsys)
    shorter = tmp_path / "shorter.npz"
    trace = load_trace(paths["native"])
    trace.ops = trace.ops[:-1]
    save_trace(shorter, trace)
    assert main(["compare", str(paths["native"]), str(shorter)]) == 2
    assert "A has 14 ops, B has 13; A continues with op 13 aten.sum.dim_IntList" in one_line_error(capsys)


def test_missing_corrupt_and_foreign_files_give_one_line_and_status_2(runs, tmp_path, capsys):
    paths, _ = runs
    data = paths["native"].read_bytes()
    truncated, flipped, foreign = tmp_path / "truncated.npz", tmp_path / "flipped.npz", tmp_path / "foreign.npz"
    truncated.write_bytes(data[: len(data) // 2])
    middle = len(data) // 2
    flipped.write_bytes(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:])
    save_npz(foreign, {"w": np.arange(3)}, {"kind": "softfloat16-crosscheck-dump"})
    cases = [(tmp_path / "absent.npz", "no such file"), (truncated, "truncated or corrupt"),
             (flipped, "corrupt"), (foreign, "not a torch trace of softfloat16.torch.record: a cross-check dump")]
    for path, message in cases:
        assert main(["compare", str(paths["native"]), str(path)]) == 2
        assert message in one_line_error(capsys), path
    with pytest.raises(TraceError, match="cannot read the trace: .*corrupt"):
        load_trace(flipped)
    assert main(["compare", str(paths["native"])]) == 2
    assert "needs two traces" in one_line_error(capsys)
    assert main(["compare", str(paths["native"]), str(paths["native"]), "--nan", "cuda"]) == 2
    assert "use it with --replay" in one_line_error(capsys)


def test_bad_arguments_of_record_are_named(tmp_path):
    with pytest.raises(ValueError, match="path: the directory"):
        record(tmp_path / "missing" / "trace.npz")
    with pytest.raises(TypeError, match="model: expected a torch.nn.Module"):
        record(tmp_path / "t.npz", model="net")


def test_the_command_line_entry_point(runs, tmp_path):
    paths, _ = runs
    copy = tmp_path / "injected.npz"
    inject_one_ulp(paths["native"], copy, 0, (0, 0))
    done = subprocess.run([sys.executable, "-m", "softfloat16.torch", "compare", str(paths["native"]), str(copy)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "first divergence: op 0 aten.addmm.default [module 0, forward], output out" in done.stdout


def test_arguments_an_op_only_writes_are_no_inputs(tmp_path):
    x, y = torch.tensor([1.0, 2.0], dtype=torch.float16), torch.tensor([0.5, 0.25], dtype=torch.float16)
    paths = [tmp_path / "zeros.npz", tmp_path / "ones.npz"]
    for path, old in zip(paths, (torch.zeros(2, dtype=torch.float16), torch.ones(2, dtype=torch.float16))):
        with record(path):
            torch.add(x, y, out=old)
    changed = tmp_path / "changed.npz"
    inject_one_ulp(paths[1], changed, 0, (1,))
    a, b = load_trace(paths[0]), load_trace(changed)
    assert a.ops[0].attrs["write_only"] == ["out"]
    assert [role for role, _, _ in a.ops[0].inputs] == ["self", "other", "out"]
    result = compare_traces(a, b)
    assert result.first.inputs_identical  # the buffers' old contents differ, the values read do not
    assert result.first.elements[0].index == (1,) and result.first.elements[0].ulp == 1


def test_a_torch_trace_and_a_crosscheck_dump_go_through_the_same_reader(runs, tmp_path, capsys):
    from sim.crosscheck import cli
    from sim.crosscheck.dump import Dump, DumpError, load_dump, save_dump
    from sim.crosscheck.record import OpRecord
    from softfloat16.optrace import DUMP_KIND, OpTraceError, load_op_trace

    paths, _ = runs
    dump_path = tmp_path / "dump.npz"
    relu = OpRecord(0, "fc1.relu", "relu", "sim", {}, [("x", "fp16", np.array([0xBC00, 0x3C00], np.uint16))],
                    [("out", "fp16", np.array([0, 0x3C00], np.uint16))])
    save_dump(dump_path, [relu], side="emulator", mode="exact", config={"precision": "fp16"}, steps=1)
    dump, trace = load_op_trace(dump_path), load_op_trace(paths["native"])
    assert (dump.kind, trace.kind) == (DUMP_KIND, TRACE_KIND)
    assert [op.name for op in trace.ops] == [name for name, _, _ in EXPECTED_OPS]
    (op,) = dump.ops
    assert (op.step, op.name, op.kind, op.impl, op.inputs[0][:2]) == (0, "fc1.relu", "relu", "sim", ("x", "fp16"))
    np.testing.assert_array_equal(op.outputs[0][2], relu.outputs[0][2])
    assert isinstance(load_dump(dump_path), Dump) and load_dump(dump_path).records[0].label() == "step 0 fc1.relu"
    assert [op.label() for op in load_trace(paths["native"]).ops][0] == "op 0 aten.addmm.default [module 0, forward]"
    assert DumpError is TraceError is OpTraceError  # one reader, one error
    with pytest.raises(TraceError, match=f"^{dump_path}: not a torch trace .*: a cross-check dump"):
        load_trace(dump_path)
    with pytest.raises(DumpError, match=f"^{paths['native']}: not a cross-check dump .*: a torch trace"):
        load_dump(paths["native"])
    assert cli.main(["--against", str(paths["native"])]) == 2
    assert "a torch trace of softfloat16.torch.record" in one_line_error(capsys)
    assert main(["compare", str(dump_path), str(paths["native"])]) == 2
    assert "not a torch trace of softfloat16.torch.record: a cross-check dump" in one_line_error(capsys)


def test_every_torch_dtype_of_the_one_table_round_trips(tmp_path):
    from sim.crosscheck.reference import _dtypes
    from softfloat16.optrace import VALUE_FORMATS, format_of_dtype
    from softfloat16.torch.tensors import DTYPE_FORMATS, TRACE_DTYPES, trace_format

    assert set(TRACE_DTYPES) == set(VALUE_FORMATS) - ({"e8m0"} if not hasattr(torch, "float8_e8m0fnu") else set())
    for fmt, dtype in TRACE_DTYPES.items():
        assert trace_format(dtype) == format_of_dtype(dtype) == fmt
        value = torch.arange(4).to(dtype) if dtype != torch.bool else torch.tensor([True, False, True, True])
        stored_fmt, array = tensor_value(value)
        assert stored_fmt == fmt and array.dtype == VALUE_FORMATS[fmt].storage
        again = tensor_from_value(fmt, array)
        assert again.dtype == dtype and torch.equal(again.view(torch.uint8), value.view(torch.uint8))
    assert {dtype: fmt.name for dtype, fmt in DTYPE_FORMATS.items()} == {
        dtype: fmt for fmt, dtype in TRACE_DTYPES.items() if VALUE_FORMATS[fmt].format is not None}
    for fmt, (dtype, view) in _dtypes(torch).items():  # sim's cross-check reference: the same names
        assert TRACE_DTYPES[fmt] == dtype and view.itemsize == dtype.itemsize
    assert trace_format(torch.quint8) is None
    if hasattr(torch, "uint16"):  # torch >= 2.3: a dtype the table does not hold gives no value
        assert tensor_value(torch.zeros(2, dtype=torch.uint16)) is None


def test_random_ops_whose_arguments_switch_the_randomness_off_are_replayed(tmp_path):
    aten = torch.ops.aten
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=generator).to(torch.bfloat16) for _ in range(3))
    x = torch.randn(4, 6, generator=generator).to(torch.bfloat16)
    path = tmp_path / "attention.npz"
    with record(path):
        attention = aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0)[0]
        kept = aten.native_dropout.default(x, 0.5, False)[0]      # train=False: the identity
        aten.native_dropout.default(x, 0.5, True)                 # draws a mask: not replayable
        aten.native_dropout.default(x, 0.0, True)                 # p = 0: keeps every element
    trace = load_trace(path)
    assert [op.name for op in trace.ops] == ["aten._scaled_dot_product_flash_attention_for_cpu.default"] + [
        "aten.native_dropout.default"] * 3
    result = replay_traces(trace, trace, machine_from_settings(trace.settings))
    assert [(op.step, reason) for op, reason in result.not_replayed] == [(2, "random numbers")]
    assert not result.native
    # The replayed attention is the emulator's: judged against torch's output, not skipped.
    with sft.emulate():
        emulated = aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0)[0]
    differs = not torch.equal(emulated.view(torch.int16), attention.view(torch.int16))
    assert any(diff.op.step == 0 for diff in result.divergent) == differs
    assert all(diff.op.step == 0 for diff in result.divergent)
    assert torch.equal(kept, x)
