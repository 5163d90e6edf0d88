#!/usr/bin/env bash
# The low-rate path over TCP: `examples/tcp_ring 0` (loopback and two tokio tasks, no
# broker) beside `perftest --transport tcp --rate 50` with the queues on their own
# processor (`--queue-processors 1`) and on the session processors (`0`, and `0` driven:
# `--driven`), ROUNDS rounds
# of 10 s each, in turn. Prints the percentiles, the context switches a message (the
# perftest's threads, `voluntary_ctxt_switches`) and the CPU the perftest reports. With
# ONE_CORE=1 each round also runs the ring and the driven perftest with the whole process on
# core 0 (`taskset -c 0`): what the path costs without the wake-ups across cores
# (`docs/benchmarks.md`, "Target 6 again").
#
#   cargo build --release -p zerodispatch-perftest && cargo build --release --example tcp_ring
#   ROUNDS=3 scripts/lowrate.sh
set -u
cd "$(git rev-parse --show-toplevel)"
perftest=./target/release/perftest
ring=./target/release/examples/tcp_ring
rounds=${ROUNDS:-3}
one_core=${ONE_CORE:-0}
pin=()

run_perftest() {
    local queue_processors=$1 out
    shift
    out=$(mktemp)
    "${pin[@]}" "$perftest" --transport tcp --rate 50 --duration 10s \
        --queue-processors "$queue_processors" "$@" --json >"$out" 2>/dev/null &
    local pid=$! switches=0 now
    while kill -0 "$pid" 2>/dev/null; do
        now=$(cat /proc/"$pid"/task/*/status 2>/dev/null |
            awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }')
        [ "$now" -gt "$switches" ] && switches=$now
        sleep 0.5
    done
    wait "$pid"
    python3 - "$queue_processors $*" "$switches" "$out" <<'PY'
import json, sys
queue_processors, switches, path = sys.argv[1].strip(), int(sys.argv[2]), sys.argv[3]
run = json.load(open(path))
c, n = run["confirm_latency_us"], run["published"]
print(f"perftest --queue-processors {queue_processors}: p50 {c['p50']} p90 {c['p90']} "
      f"p99 {c['p99']} us; {switches / max(n, 1):.1f} context switches a message; "
      f"CPU {run['cpu']['process_s']} s")
PY
    rm -f "$out"
}

for round in $(seq 1 "$rounds"); do
    echo "round $round"
    "$ring" 0 500 | tail -1
    run_perftest 1
    run_perftest 0
    run_perftest 0 --driven
    if [ "$one_core" = 1 ]; then
        echo "one core (taskset -c 0):"
        pin=(taskset -c 0)
        "${pin[@]}" "$ring" 0 500 | tail -1
        run_perftest 0 --driven
        pin=()
    fi
done
