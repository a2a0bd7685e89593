#!/usr/bin/env bash
# The CUDA cross-check, in one prepared run (< 5 minutes on one GPU; most of it is compiling the
# emulator's Numba kernels on a fresh machine, about 30 s on 2 CPU cores).
#
#   bash bench/gpu_check.sh [OUT_DIR]        (default: $OUT if set, else ./gpu_check_out)
#
# Run it from a checkout of this repository. It installs nothing: it first checks that $PYTHON
# (default: python) imports torch and what `python -m sim.crosscheck` needs (numpy, numba and the
# checkout's other requirements), and if not, prints one line naming what is missing and exits 3;
# `pip install -e ".[crosscheck]"` in the checkout installs them (keeping a torch already there).
# docs/gpu.md is the whole recipe: this run on the GPU machine, the comparison back home.
# Then it runs, on CUDA, 5 training steps of the default-width MLP (64-128-128-128-10, batch 32)
# on the synthetic data (no scikit-learn):
#   1. exact mode, fp16 with dynamic loss scaling   -> must be bit-identical (exit 0)
#   2. exact mode, bf16                             -> must be bit-identical (exit 0)
#   3. library mode (cuBLAS and torch's own kernels), fp16, replayed against the emulator with the
#      H100/H200 tensor-core model for the GEMMs    -> library ops may diverge (reported, exit 0)
#   4. the same for bf16
# and writes OUT_DIR/cuda-{exact,library}-{fp16,bf16}.npz (the torch dumps, a few MB each),
# OUT_DIR/report.txt (the device, then the four reports) and OUT_DIR/summary.txt (a line a run).
# Exit status: 0 when no run found an unexpected divergence, 1 otherwise (or when a run failed),
# 2 without a GPU (torch sees no CUDA device), 3 when a requirement is missing (nothing written).
# DEVICE=cpu runs the same four checks on the CPU: a dry run of this script without a GPU.
# To keep the dumps as test fixtures, copy the .npz files to tests/data/cuda/
# (tests/sim/crosscheck/test_crosscheck_cuda_fixtures.py replays every dump found there).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu_check_out}}"
device="${DEVICE:-cuda}"
python="${PYTHON:-python}"

# Requirements first, before anything is written: one line and exit status 3 if one is missing.
missing=$("$python" - <<'PY' 2>/dev/null
import importlib, warnings
warnings.simplefilter("ignore")  # torch warns when numpy is missing: the line below says it
missing = []
for module in ("torch", "numpy", "numba", "softfloat16", "sim.crosscheck.cli", "sim.crosscheck.reference"):
    try:
        importlib.import_module(module)
    except ImportError as error:
        name = (getattr(error, "name", None) or module).split(".")[0]
        if name not in missing:
            missing.append(name)
print(", ".join(missing))
PY
)
probe=$?
if [ "$probe" -ne 0 ]; then
  echo "gpu_check.sh: \"$python\" did not run: set PYTHON to a Python >= 3.10 with this checkout's" \
       "requirements (pip install -e \".[crosscheck]\")" >&2
  exit 3
elif [ -n "$missing" ]; then
  echo "gpu_check.sh: missing: $missing (in $python); install the requirements from this checkout:" \
       "pip install -e \".[crosscheck]\"" >&2
  exit 3
fi

mkdir -p "$out"
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/softfloat16-numba-cache}"  # keep $out to the results
export CUBLAS_WORKSPACE_CONFIG="${CUBLAS_WORKSPACE_CONFIG:-:4096:8}"  # deterministic cuBLAS
export DEVICE="$device"
"$python" - <<'PY' | tee "$out/report.txt"
import os, platform, sys, torch, numpy, numba
if os.environ["DEVICE"] == "cuda":
    if not torch.cuda.is_available():
        print("gpu_check.sh: no CUDA device visible to torch (DEVICE=cpu makes a dry run on the CPU)",
              file=sys.stderr)
        sys.exit(2)
    capability = "".join(map(str, torch.cuda.get_device_capability(0)))
    name = f"{torch.cuda.get_device_name(0)} (sm_{capability})"
else:
    name = f"cpu {platform.processor() or platform.machine()} (dry run)"
print(f"device: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version()}, numpy {numpy.__version__}, numba {numba.__version__}, "
      f"{platform.platform()}")
PY
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then exit $(( rc == 2 ? 2 : 1 )); fi

common=(--device "$device" --steps 5 --data synthetic --batch-size 32)
runs=(
  "exact-fp16|--mode exact --precision fp16 --loss-scale dynamic"
  "exact-bf16|--mode exact --precision bf16"
  "library-fp16|--mode library --precision fp16 --loss-scale dynamic --replay --tensor-core h100"
  "library-bf16|--mode library --precision bf16 --replay --tensor-core h100"
)
: > "$out/summary.txt"
status=0
for run in "${runs[@]}"; do
  name="${run%%|*}"
  read -r -a flags <<< "${run#*|}"
  dump="$out/cuda-$name.npz"  # named cuda-* even in a dry run: the fixtures test globs for it
  start=$(date +%s)
  printf '\n=== %s: python -m sim.crosscheck %s %s --dump %s\n' "$name" "${common[*]}" "${flags[*]}" "$dump" \
    >> "$out/report.txt"
  timeout 150 "$python" -m sim.crosscheck "${common[@]}" "${flags[@]}" --dump "$dump" >> "$out/report.txt" 2>&1
  rc=$?
  counts=$(grep -E "^ops by status" "$out/report.txt" | tail -1)
  first=$(grep -E "^(first divergence|no divergence)" "$out/report.txt" | tail -1)
  echo "$name: exit $rc, $(( $(date +%s) - start )) s; $counts; $first" | tee -a "$out/summary.txt"
  if [ "$rc" -ne 0 ]; then status=1; fi
done
exit "$status"
