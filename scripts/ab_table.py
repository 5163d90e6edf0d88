#!/usr/bin/env python3
"""Prints the table of `scripts/ab.sh`: for each subject of the hop bench both trees ran,
the median ns per event of each round and tree, the median of those medians, and NEW/OLD;
then the perftest's publish -> confirm p50 at 50 msg/s the same way.

    python3 scripts/ab_table.py target/ab/runs OLD_NAME NEW_NAME
"""

import json
import statistics
import sys
from pathlib import Path


def per_sample_ns(path):
    sample = json.loads(path.read_text())
    return [t / n for n, t in zip(sample["iters"], sample["times"])]


def medians(runs, side, subject):
    """The median of each round's samples of `subject` (a path under criterion/)."""
    out = []
    for round_dir in sorted((runs / side).iterdir(), key=lambda p: int(p.name)):
        path = round_dir / "criterion" / subject / "new" / "sample.json"
        if path.exists():
            out.append(statistics.median(per_sample_ns(path)))
    return out


def subjects(runs, side):
    found = set()
    for path in (runs / side).glob("*/criterion/*/*/new/sample.json"):
        found.add(str(path.parent.parent.relative_to(path.parents[3])))
    return found


def row(name, old, new, unit):
    if not old or not new:
        return
    mo, mn = statistics.median(old), statistics.median(new)
    fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
    print(f"| {name} | {fmt(old)} | {fmt(new)} | {mo:.1f} | {mn:.1f} | {mn / mo:.2f} |")


def main():
    runs = Path(sys.argv[1])
    old_name, new_name = sys.argv[2], sys.argv[3]
    print(f"| subject ({'ns/event' }) | {old_name} by round | {new_name} by round | {old_name} | {new_name} | new/old |")
    print("| --- | --- | --- | --- | --- | --- |")
    for subject in sorted(subjects(runs, "old") & subjects(runs, "new")):
        row(f"`{subject}`", medians(runs, "old", subject), medians(runs, "new", subject), "ns")
    p50 = {}
    for side in ("old", "new"):
        p50[side] = []
        for round_dir in sorted((runs / side).iterdir(), key=lambda p: int(p.name)):
            path = round_dir / "perftest.json"
            if path.exists() and path.stat().st_size > 0:
                p50[side].append(json.loads(path.read_text())["confirm_latency_us"]["p50"])
    row("perftest --rate 50: confirm p50 (us)", p50["old"], p50["new"], "us")


if __name__ == "__main__":
    main()
