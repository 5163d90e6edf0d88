#!/usr/bin/env python3
"""Prints the `confirm` bench as a table: for each group and confirm mode, the median and
the min-max of the per-sample figures (ns per message, or per confirm for
`confirm_cluster`), and inline's speed-up over boxed, from criterion's raw samples in
target/criterion/<group>/<mode>/new/sample.json.

Run after `cargo bench --bench confirm`:  python3 scripts/confirm_table.py [target/criterion] [new|base]
"""

import sys
from pathlib import Path

from hop_table import summary

GROUPS = ["confirm_priority", "confirm_fanout4", "confirm_fanout30", "confirm_cluster"]
MODES = ["inline", "typed", "boxed"]


def cell(root, group, mode, run):
    return summary(root / group / mode / run / "sample.json")


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
    run = sys.argv[2] if len(sys.argv) > 2 else "new"
    print("| group | inline ns, median (min-max) | typed | boxed | inline vs boxed |")
    print("| --- | --- | --- | --- | --- |")
    for group in GROUPS:
        cells = {m: cell(root, group, m, run) for m in MODES}
        out = [f"`{group}`"]
        for m in MODES:
            c = cells[m]
            out.append("-" if c is None else f"{c[0]:.0f} ({c[1]:.0f}-{c[2]:.0f})")
        if cells["inline"] and cells["boxed"]:
            out.append(f"{cells['boxed'][0] / cells['inline'][0]:.2f}x")
        else:
            out.append("-")
        print("| " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
