#!/usr/bin/env bash
# Sweeps `perftest --queues` at saturation: throughput and confirm latency against the
# number of queues, in-process and over TCP.
#
#     scripts/queues_sweep.sh            # then: python3 scripts/plot_queues.py
#
# For each transport (in-process, tcp) and each queue count (1, 2, 4), runs
# `perftest --rate 0 --queues N --json` RUNS times (3) for DURATION (5s); publishers and
# consumers default to one per queue (publisher and consumer i on queue i % N), the
# broker's processors to the perftest's defaults. Every run's summary is appended to
# target/queues_sweep.jsonl (emptied first); the medians, minima and maxima of each point
# are written as one JSON object to target/queues_sweep.json and to standard output.
# About 2 minutes in all.
#
# Overrides, through the environment: QUEUES ("1 2 4"), TRANSPORTS ("in-process tcp"),
# RUNS (3), DURATION (5s), OUT (target/queues_sweep.jsonl), SUMMARY
# (target/queues_sweep.json), PERFTEST_ARGS (more flags for every run, e.g.
# "--queue-processors 2"). A run whose check fails (a message lost) still has its line;
# the sweep says so at the end and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/perftest_run.sh
. scripts/perftest_run.sh

QUEUES=${QUEUES:-"1 2 4"}
TRANSPORTS=${TRANSPORTS:-"in-process tcp"}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5s}
OUT=${OUT:-target/queues_sweep.jsonl}
SUMMARY=${SUMMARY:-target/queues_sweep.json}
PERFTEST_ARGS=${PERFTEST_ARGS:-}

cargo build --release -p zerodispatch-perftest
bin=${CARGO_TARGET_DIR:-target}/release/perftest

mkdir -p "$(dirname "$OUT")" "$(dirname "$SUMMARY")"
: >"$OUT"
failed=0
for transport in $TRANSPORTS; do
    for queues in $QUEUES; do
        for run in $(seq "$RUNS"); do
            printf '%-10s queues %-3s run %s ' "$transport" "$queues" "$run" >&2
            # shellcheck disable=SC2086 # PERFTEST_ARGS is a list of flags
            perftest_run "$bin" "$OUT" --rate 0 --transport "$transport" --queues "$queues" \
                --duration "$DURATION" $PERFTEST_ARGS || failed=1
        done
    done
done

python3 - "$OUT" "$DURATION" "$(nproc)" "$PERFTEST_ARGS" >"$SUMMARY" <<'PY'
import json, statistics, sys

path, duration, cores, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = [json.loads(l) for l in open(path) if l.strip()]

def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}

points = {}
for r in runs:
    points.setdefault((r["transport"], r.get("queues", 1)), []).append(r)
out = []
for (transport, queues), rs in points.items():
    per_queue = [r.get("per_queue") or [{"confirm_rate": r["confirm_rate"]}] for r in rs]
    out.append({
        "transport": transport,
        "queues": queues,
        "publishers": rs[0]["publishers"],
        "consumers": rs[0]["consumers"],
        "confirm_rate": spread([r["confirm_rate"] for r in rs]),
        "confirm_p50_us": spread([r["confirm_latency_us"]["p50"] for r in rs]),
        "confirm_p99_us": spread([r["confirm_latency_us"]["p99"] for r in rs]),
        "consume_p50_us": spread([r["consume_latency_us"]["p50"] for r in rs]),
        "per_queue_confirm_rate_median": [
            statistics.median(q[i]["confirm_rate"] for q in per_queue)
            for i in range(len(per_queue[0]))
        ],
        "ok": all(r["ok"] for r in rs),
    })
print(json.dumps({"cores": cores, "duration": duration, "rate": 0, "perftest_args": extra,
                  "points": out}))
PY
cat "$SUMMARY"
echo "wrote $OUT ($(wc -l <"$OUT") runs) and $SUMMARY" >&2
if [ "$failed" -ne 0 ]; then
    echo "some runs failed their check: see the lines whose \"ok\" is false" >&2
    exit 2
fi
