#!/usr/bin/env bash
# Puts a CUDA compiler (nvcc, its front end and headers) in DIR from NVIDIA's
# PyPI wheels, for building `--features cuda` on a machine without a GPU or a
# CUDA install, and prints the environment that build needs.
#
#   eval "$(bash .ci/cuda-toolkit.sh target/cuda-toolkit)"
#   cargo check --locked --features cuda
#
# The version is pinned to one cudarc 0.19 knows (it reads `nvcc --version`
# and refuses a newer toolkit); the kernels are built for sm_90 (H100/H200)
# unless CUDA_COMPUTE_CAP says otherwise, since no GPU is there to ask.
# Linking a binary also needs the driver and cuBLAS/cuRAND/NVRTC libraries,
# which these wheels do not hold: this is enough to compile and check.
set -euo pipefail
DIR=${1:?usage: cuda-toolkit.sh DIR}
VERSION=13.4.92
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ ! -x "$DIR/site/nvidia/cu13/bin/nvcc" ]; then
  python3 -m pip --version >/dev/null 2>&1 || {
    echo "cuda-toolkit.sh: needs python3 with pip to fetch NVIDIA's wheels" >&2
    exit 1
  }
  wheels=$DIR/wheels
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
    "nvidia-cuda-nvcc==$VERSION" "nvidia-cuda-crt==$VERSION" "nvidia-nvvm==$VERSION" \
    "nvidia-cuda-runtime==13.4.49" "nvidia-cuda-cccl==13.3.5.0.6" >&2
  python3 -m pip install -q --no-deps --no-compile --no-index --target "$DIR/site" "$wheels"/*.whl >&2
  rm -rf "$wheels"
fi
CUDA=$DIR/site/nvidia/cu13
"$CUDA/bin/nvcc" --version >/dev/null
echo "export PATH=\"$CUDA/bin:\$PATH\" CUDA_HOME=\"$CUDA\" CUDA_PATH=\"$CUDA\" CUDA_COMPUTE_CAP=\"${CUDA_COMPUTE_CAP:-90}\""
