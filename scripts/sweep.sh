#!/usr/bin/env bash
# Sweeps the perftest over publish rates and flush strategies, one JSON line per run.
#
#     scripts/sweep.sh                 # then: python3 scripts/plot_sweep.py
#
# For each flush strategy (dynamic, timer:1ms, timer:10ms, timer:100ms) and each rate
# (10, 50, 1000, 10000, 100000 msg/s, and 0: as fast as possible, the saturation point),
# runs `perftest --json` for 2 s (one publisher, one consumer) and appends its summary to
# target/sweep.jsonl (emptied first). About a minute in all.
#
# Overrides, through the environment: DURATION (2s), RATES, FLUSHES (space-separated),
# OUT (target/sweep.jsonl), and PERFTEST_ARGS (more flags for every run, e.g.
# "--callbacks typed"). A run whose check fails (a message lost) still has its line; the
# sweep says so at the end and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/perftest_run.sh
. scripts/perftest_run.sh

DURATION=${DURATION:-2s}
RATES=${RATES:-"10 50 1000 10000 100000 0"}
FLUSHES=${FLUSHES:-"dynamic timer:1ms timer:10ms timer:100ms"}
OUT=${OUT:-target/sweep.jsonl}
PERFTEST_ARGS=${PERFTEST_ARGS:-}

cargo build --release -p zerodispatch-perftest
bin=target/release/perftest

mkdir -p "$(dirname "$OUT")"
: >"$OUT"
failed=0
for flush in $FLUSHES; do
    for rate in $RATES; do
        printf 'flush %-12s rate %-7s ' "$flush" "$rate" >&2
        # shellcheck disable=SC2086 # PERFTEST_ARGS is a list of flags
        perftest_run "$bin" "$OUT" --flush "$flush" --rate "$rate" --duration "$DURATION" \
            $PERFTEST_ARGS || failed=1
    done
done
echo "wrote $OUT ($(wc -l <"$OUT") runs)" >&2
if [ "$failed" -ne 0 ]; then
    echo "some runs failed their check: see the lines whose \"ok\" is false" >&2
    exit 2
fi
