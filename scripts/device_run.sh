#!/usr/bin/env bash
# The figures of docs/benchmarks.md's "16-core machine" section, in one go: the hop bench,
# the perftest at 50 msg/s and at saturation (in-process and over TCP), and a scaling
# sweep of publishers. Runs prebuilt binaries, so that the machine needs no toolchain:
#
#   cargo build --release -p zerodispatch-perftest
#   cargo bench --bench hop --no-run          # prints the bench binary's path
#   mkdir -p devrun && cp target/release/perftest <hop binary> devrun/ && strip devrun/*
#   OUT=/tmp/out scripts/device_run.sh devrun
#
# Every result lands under $OUT (criterion's raw samples in $OUT/criterion, the perftest's
# JSON lines in $OUT/*.jsonl).
set -uo pipefail
BIN=${1:-devrun}
OUT=${OUT:-/tmp/zd-device}
mkdir -p "$OUT"
perftest="$BIN/perftest"
hop=$(ls "$BIN"/hop-* | head -1)

{ nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|MHz'; } > "$OUT/machine.txt" 2>&1

run() { # name, args...
    local name=$1; shift
    "$perftest" "$@" --json -q 2>/dev/null >> "$OUT/$name.jsonl" || echo "{\"failed\": \"$*\"}" >> "$OUT/$name.jsonl"
}

# 1. Rate 50, dynamic send, three runs each: in-process unpinned and pinned, over TCP.
for i in 1 2 3; do
    run rate50_inproc --rate 50 --duration 5s
    run rate50_inproc_pinned --rate 50 --duration 5s --pin
    run rate50_tcp --rate 50 --duration 5s --transport tcp
done
# 2. The seed's comparison over TCP (dynamic against timer:100ms).
"$perftest" --compare --transport tcp --json -q 2>/dev/null > "$OUT/compare_tcp.json"
"$perftest" --compare --json -q 2>/dev/null > "$OUT/compare_inproc.json"
# 3. Saturation, one publisher and one consumer: dynamic against timer:100ms.
for t in in-process tcp; do
    for f in dynamic timer:100ms; do
        run "saturation_${t}" --rate 0 --duration 3s --transport "$t" --flush "$f"
    done
done
# 4. Scaling: N publishers, N consumers, N session processors (one queue).
for n in 1 2 4 8; do
    run scaling_inproc --rate 0 --duration 3s --publishers "$n" --consumers "$n" --session-processors "$n"
    run scaling_tcp --rate 0 --duration 3s --transport tcp --publishers "$n" --consumers "$n" \
        --session-processors "$n" --io-threads "$(( n < 4 ? 2 : n / 2 ))"
done
# 5. The hop: every subject, unpinned and pinned (producer core 0, consumer core 1).
"$hop" --bench > "$OUT/hop.txt" 2>&1
mkdir -p "$OUT/criterion" && cp -r target/criterion/dispatch_hop "$OUT/criterion/"
echo done >> "$OUT/machine.txt"
