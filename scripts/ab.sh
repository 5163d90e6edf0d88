#!/usr/bin/env bash
# The A/B to run before merging a change to the core's hot path (push, gate, runner,
# delivery, event): the hop bench (and the perftest at 50 msg/s) of two commits, built side
# by side in worktrees and run interleaved, rounds alternating which tree goes first, so
# that a phase of a noisy machine falls on both. Prints each subject's median per round and
# tree, and NEW/OLD of the medians of the rounds.
#
#   scripts/ab.sh OLD NEW
#
# Settings (environment):
#   ROUNDS=3            interleaved rounds
#   FILTER=<regex>      criterion filter of the hop bench's subjects (default: the headline
#                       subjects of dispatch_hop, unpinned and pinned)
#   MEASURE=2           criterion measurement seconds per subject (10 samples each)
#   PERFTEST=5s         perftest --rate 50 duration per round and tree; 0 to skip
#
# Worktrees, builds and raw results go under target/ab/ (kept for a second look; remove the
# worktrees with `git worktree prune` after deleting the folder).
set -euo pipefail

if [ $# -ne 2 ]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
top=$(git rev-parse --show-toplevel)
cd "$top"
ab="$top/target/ab"
rounds=${ROUNDS:-3}
filter=${FILTER:-'^dispatch_hop/(unpinned|pinned)/(raw_array_queue|dispatch_typed|dispatch_inline|dispatch_batch16|crossbeam_channel_boxed|disruptor_batch16)$'}
measure=${MEASURE:-2}
perftest=${PERFTEST:-5s}
declare -A rev=([old]="$(git rev-parse --verify "$1^{commit}")" [new]="$(git rev-parse --verify "$2^{commit}")")

rm -rf "$ab/runs"
mkdir -p "$ab/runs"
declare -A bench
for side in old new; do
    dir="$ab/$side"
    # A worktree already at the commit is kept: its build is then up to date.
    if [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" != "${rev[$side]}" ]; then
        git worktree remove --force "$dir" 2>/dev/null || rm -rf "$dir"
        git worktree add --force --detach "$dir" "${rev[$side]}" >/dev/null 2>&1
    fi
    echo "building $side (${rev[$side]:0:9}) in $dir" >&2
    bench[$side]=$(cd "$dir" && CARGO_TARGET_DIR="$ab/$side-target" cargo bench --bench hop --no-run \
        --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "hop" and m.get("executable"):
        print(m["executable"])')
    if [ "$perftest" != 0 ]; then
        (cd "$dir" && CARGO_TARGET_DIR="$ab/$side-target" cargo build --release -q -p zerodispatch-perftest)
    fi
done

for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        out="$ab/runs/$side/$round"
        mkdir -p "$out"
        echo "round $round: $side" >&2
        CRITERION_HOME="$out/criterion" "${bench[$side]}" --bench "$filter" \
            --measurement-time "$measure" --warm-up-time 1 --noplot >"$out/bench.log" 2>&1
        if [ "$perftest" != 0 ]; then
            "$ab/$side-target/release/perftest" --rate 50 --duration "$perftest" --json \
                >"$out/perftest.json" 2>/dev/null
        fi
    done
done

python3 "$top/scripts/ab_table.py" "$ab/runs" "${rev[old]:0:9}" "${rev[new]:0:9}"
