# Sourced by the sweeps (sweep.sh, queues_sweep.sh): one perftest run of a sweep.
#
# perftest_run BIN OUT FLAG...: runs `BIN --json --quiet FLAG...`, appends its summary line
# to OUT, and tells the person watching (on standard error) how it went: the rates
# achieved, the p50/p99 confirm latency, the mean batch, and whether a message was lost.
# Returns 1 when the run failed or its check did (its line is kept then), 0 otherwise.
perftest_run() {
    local bin=$1 out=$2 status=0 line
    shift 2
    line=$("$bin" --json --quiet "$@") || status=$?
    if [ -z "$line" ]; then
        echo "failed (exit $status, no summary)" >&2
        return 1
    fi
    echo "$line" >>"$out"
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
c = r["confirm_latency_us"]
print("-> %11.1f msg/s  %11.1f confirms/s  confirm p50 %s us  p99 %s us  batch %.1f  %s"
      % (r["publish_rate"], r["confirm_rate"], c["p50"], c["p99"], r["mean_batch"],
         "ok" if r["ok"] else "LOST"))
' "$line" >&2
    [ "$status" -eq 0 ]
}
