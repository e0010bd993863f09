#!/usr/bin/env bash
# The first calibration on an NVIDIA GPU, as one command on a machine with a
# GPU and no Rust toolchain: a prebuilt servesim (built elsewhere with
# `--features cuda`) calibrates a Llama-3.2-1B-shaped model with random
# weights on cuda:0, validates the profile by serving a small workload live
# on the same GPU, and writes everything to one folder. The profile's
# `measurement.host` holds the host time apart from the device's, read from
# CUDA events around each step's forward pass.
#
# Build the binary on a machine with Rust (no GPU needed there):
#
#   eval "$(bash .ci/cuda-toolkit.sh target/cuda-toolkit)"   # nvcc, or use an installed toolkit
#   cargo build --release --locked --features cuda
#   strip -o servesim-cuda target/release/servesim
#
# Linking needs libcuda, cuBLAS, cuBLASLt, cuRAND and NVRTC (an installed CUDA
# toolkit, or the nvidia-cublas, nvidia-curand and nvidia-cuda-nvrtc wheels
# with their lib folders in LIBRARY_PATH); the GPU machine needs the same
# libraries at run time (LD_LIBRARY_PATH). Then, on the GPU machine, from a
# checkout of this repository (for scenarios/):
#
#   SERVESIM=./servesim-cuda scripts/gpu-check.sh [OUT_DIR]
#
# MODEL (default llama-3.2-1b), DTYPE (bf16) and DEVICE (cuda:0) override the
# defaults. It takes under 10 minutes on an H100: the full calibration grid
# (contexts to 2,048) and 150 requests served live.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SERVESIM=${SERVESIM:-$ROOT/servesim-cuda}
OUT_DIR=${1:-$ROOT/out/gpu-check}
MODEL=${MODEL:-llama-3.2-1b}
DTYPE=${DTYPE:-bf16}
DEVICE=${DEVICE:-cuda:0}
mkdir -p "$OUT_DIR"

[ -x "$SERVESIM" ] || { echo "error: no servesim binary at $SERVESIM (see the build steps at the top of $0)" >&2; exit 1; }
command -v nvidia-smi >/dev/null || { echo "error: nvidia-smi not found: this script needs an NVIDIA GPU and its driver" >&2; exit 1; }

log() { echo "== $*" | tee -a "$OUT_DIR/gpu-check.log"; }
started=$(date +%s)
log "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i "${DEVICE#cuda:}")"
nvidia-smi >"$OUT_DIR/nvidia-smi.txt" 2>&1 || true
"$SERVESIM" --version >"$OUT_DIR/servesim-version.txt"

# 1. The profile: the full grid, CUDA events around each forward pass.
log "calibrate $MODEL ($DTYPE, random weights) on $DEVICE"
"$SERVESIM" calibrate --device "$DEVICE" --model "$MODEL" --dtype "$DTYPE" \
  --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/calibrate.txt"

# 2. The profile against a live run of the same model on the same GPU: the
# CPU validation workload at a rate a GPU keeps busy.
sed -e 's/^name = .*/name = "validate-gpu"/' \
  -e 's/rate = 1.5/rate = 8.0/' \
  -e 's|^profile = .*|profile = "profile.toml"|' \
  "$ROOT/scenarios/validate/cpu.toml" >"$OUT_DIR/validate-gpu.toml"
log "validate on $DEVICE"
"$SERVESIM" validate "$OUT_DIR/validate-gpu.toml" --profile "$OUT_DIR/profile.toml" \
  --out "$OUT_DIR/validate" 2>&1 | tee "$OUT_DIR/validate.txt" ||
  # Status 1 when batched and alone greedy tokens differ (bf16 kernels may
  # reduce in another order by batch size): the table is still written.
  log "validate exited non-zero: see validate.txt"

# 3. What the profile prices, with its host and device parts.
log "cost with the profile"
"$SERVESIM" cost "$OUT_DIR/validate-gpu.toml" --prefill 512 --decode 32@1024 2>&1 \
  | tee "$OUT_DIR/cost.txt"

log "done in $(( $(date +%s) - started )) s: $OUT_DIR/{calibrate.txt,profile.toml,validate.txt,validate/validation.json,cost.txt}"
