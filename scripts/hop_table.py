#!/usr/bin/env python3
"""Prints the `dispatch_hop` bench as a table: for each subject, unpinned and pinned, the
median and the min-max of the per-sample figures (ns per event), from criterion's raw
samples in target/criterion/dispatch_hop/<prefix>_<subject>/new/sample.json.

Run after `cargo bench --bench hop`:  python3 scripts/hop_table.py [target/criterion] [new|base]
(`base` is the run before the last one: criterion keeps both.)
"""

import json
import statistics
import sys
from pathlib import Path

SUBJECTS = [
    "raw_array_queue",
    "dispatch_typed",
    "dispatch_inline",
    "dispatch_batch16",
    "crossbeam_channel_boxed",
    "disruptor_publish1",
    "disruptor_batch16",
    "raw_item_queue",
    "raw_item_queue_gate1",
    "raw_item_queue_gate",
]
PREFIXES = ["unpinned", "pinned"]


def per_sample_ns(path):
    """ns per event of each sample (criterion stores iterations and total ns per sample)."""
    sample = json.loads(path.read_text())
    return [t / n for n, t in zip(sample["iters"], sample["times"])]


def summary(path):
    """The median, min and max of a sample file's ns per event; None if there is no file."""
    if not path.exists():
        return None
    ns = per_sample_ns(path)
    return statistics.median(ns), min(ns), max(ns)


def cell(root, prefix, subject, run):
    # criterion replaces the '/' of a function name by '_' in its directory names.
    return summary(root / "dispatch_hop" / f"{prefix}_{subject}" / run / "sample.json")


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
    run = sys.argv[2] if len(sys.argv) > 2 else "new"
    rows = {s: {p: cell(root, p, s, run) for p in PREFIXES} for s in SUBJECTS}
    floor = {p: rows["raw_array_queue"][p] for p in PREFIXES}
    print("| subject | unpinned ns/event, median (min-max) | x raw | pinned ns/event, median (min-max) | x raw |")
    print("| --- | --- | --- | --- | --- |")
    for subject in SUBJECTS:
        out = [f"`{subject}`"]
        for prefix in PREFIXES:
            c = rows[subject][prefix]
            if c is None:
                out += ["-", "-"]
                continue
            med, lo, hi = c
            out.append(f"{med:.1f} ({lo:.1f}-{hi:.1f})")
            f = floor[prefix]
            out.append(f"{med / f[0]:.2f}" if f else "-")
        print("| " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
