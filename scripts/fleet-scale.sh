#!/usr/bin/env bash
# The fleet-scale figures of docs/performance.md: `bench`'s scenario (Llama-3.1-8B
# on H100-SXM, least-outstanding routing, 16 req/s per replica) as `simulate`
# runs it, every file written, over REPLICAS replicas (default 10,000) and
# REQUESTS requests (default 10 M), with `/usr/bin/time -v`'s wall time, CPU
# time and peak resident memory.
#
#   scripts/fleet-scale.sh                      # 10 M requests over 10,000 replicas
#   REPLICAS=1000 scripts/fleet-scale.sh        # the 1,000-replica fleet10m run
#   ONE_CORE=1 scripts/fleet-scale.sh           # under `taskset -c 0` (no writer thread)
#   CALLGRIND=1 REQUESTS=200000 scripts/fleet-scale.sh   # instruction count instead
#
# SERVESIM names the binary (default target/release/servesim; build it with
# `cargo build --release`). OUT is the folder for the scenario and the runs'
# outputs (default a fresh one under /tmp); the 10 M-request run writes a
# `requests.csv` of about 2.2 GB there, so each run gets a fresh subfolder.
# Wall time moves with the machine's load; instructions and peak memory do
# not (see docs/performance.md).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SERVESIM=${SERVESIM:-$ROOT/target/release/servesim}
REPLICAS=${REPLICAS:-10000}
REQUESTS=${REQUESTS:-10000000}
OUT=${OUT:-$(mktemp -d /tmp/fleet-scale.XXXXXX)}
mkdir -p "$OUT"

[ -x "$SERVESIM" ] || { echo "error: no servesim binary at $SERVESIM (cargo build --release)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time not found (GNU time: apt-get install time)" >&2; exit 1; }

RATE=$((16 * REPLICAS))
SCENARIO="$OUT/fleet-$REPLICAS.toml"
cat > "$SCENARIO" <<EOF
name = "fleet-$REPLICAS"
seed = 1
[horizon]
requests = $REQUESTS
[model]
preset = "llama-3.1-8b"
[hardware]
preset = "h100-sxm"
[fleet]
replicas = $REPLICAS
router = "least-outstanding"
[engine]
max_model_len = 16384
[workload]
arrival = { process = "poisson", rate = $RATE.0 }
prompt_tokens = { dist = "lognormal", mean = 1000, cv = 1.0, max = 8192 }
output_tokens = { dist = "lognormal", mean = 250, cv = 1.0, max = 4096 }
[slo]
ttft_ms = 500
tpot_ms = 50
[metrics]
timeseries_interval_s = 10.0
EOF

RUN="$OUT/run-$(date +%s)-$$"
PREFIX=()
[ "${ONE_CORE:-0}" = 1 ] && PREFIX=(taskset -c 0)
if [ "${CALLGRIND:-0}" = 1 ]; then
    command -v valgrind >/dev/null || { echo "error: valgrind not found" >&2; exit 1; }
    "${PREFIX[@]}" valgrind --tool=callgrind --callgrind-out-file="$RUN.callgrind" \
        "$SERVESIM" simulate "$SCENARIO" --out "$RUN" 2>&1 | grep -E "Collected|simulated"
    echo "profile: $RUN.callgrind (callgrind_annotate $RUN.callgrind)"
else
    "${PREFIX[@]}" /usr/bin/time -v "$SERVESIM" simulate "$SCENARIO" --out "$RUN" 2>&1 |
        grep -E "simulated|Elapsed|User time|System time|Maximum resident"
fi
echo "outputs: $RUN"
