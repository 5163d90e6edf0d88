#!/usr/bin/env python3
"""Prints the `dispatch_outrun` and `dispatch_outrun_capacity` groups of `benches/hop.rs`
as tables: per subject, the median and min-max of the per-sample figures (ns per event),
and each `outrun_*` subject's ratio to the processor's own drain rate (`drain_typed`) of
the same run, from criterion's raw samples under target/criterion.

Run after `cargo bench --bench hop -- dispatch_outrun`:
    python3 scripts/outrun_table.py [target/criterion] [new|base]
"""

import json
import statistics
import sys
from pathlib import Path

SUBJECTS = [
    "raw_array_queue",
    "drain_typed",
    "drain_inline",
    "outrun_typed",
    "outrun_inline",
    "outrun_batch16",
]
PREFIXES = ["unpinned", "pinned"]
CAPACITIES = [256, 4096, 65536]


def cell(path):
    if not path.exists():
        return None
    sample = json.loads(path.read_text())
    ns = [t / n for n, t in zip(sample["iters"], sample["times"])]
    return statistics.median(ns), min(ns), max(ns)


def fmt(c):
    return "-" if c is None else f"{c[0]:.1f} ({c[1]:.1f}-{c[2]:.1f})"


def ratio(c, base):
    return "-" if c is None or base is None else f"{c[0] / base[0]:.2f}"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
    run = sys.argv[2] if len(sys.argv) > 2 else "new"
    group = root / "dispatch_outrun"
    rows = {
        s: {p: cell(group / f"{p}_{s}" / run / "sample.json") for p in PREFIXES}
        for s in SUBJECTS
    }
    print("| subject | unpinned ns/event, median (min-max) | x drain | pinned | x drain |")
    print("| --- | --- | --- | --- | --- |")
    for s in SUBJECTS:
        cells = []
        for p in PREFIXES:
            cells += [fmt(rows[s][p]), ratio(rows[s][p], rows["drain_typed"][p])]
        print(f"| `{s}` | " + " | ".join(cells) + " |")
    group = root / "dispatch_outrun_capacity"
    if group.exists():
        print()
        print("| capacity | `drain_typed` | `outrun_typed` | x drain |")
        print("| --- | --- | --- | --- |")
        for c in CAPACITIES:
            d = cell(group / f"drain_typed_{c}" / run / "sample.json")
            o = cell(group / f"outrun_typed_{c}" / run / "sample.json")
            print(f"| {c} | {fmt(d)} | {fmt(o)} | {ratio(o, d)} |")


if __name__ == "__main__":
    main()
