#!/usr/bin/env python3
"""Plots the dispatch benches' throughput from criterion's results, without dependencies.

Run after `cargo bench --bench dispatch` (and optionally `--bench dispatch_mimalloc`):

    python3 scripts/plot_benchmarks.py [target/criterion] [docs/dispatch_throughput.svg]

For each group it reads the estimate criterion prints as `time:` (the slope of the linear
sampling, or the mean when there is none) of every function, converts ns per event into
millions of events per second, and draws one horizontal bar chart per group into one SVG.
"""

import json
import os
import sys

GROUPS = [
    ("dispatch_1p1c", "one producer -> one processor"),
    ("dispatch_2p1c", "two producers -> one processor"),
    ("dispatch_oversubscribed", "4 producers -> 3 processors (7 busy threads, 2 cores)"),
    ("dispatch_1p1c_mimalloc", "one producer -> one processor, mimalloc"),
]
OURS = ("inline", "typed", "boxed", "inline_batch16")


def estimate_ns(path):
    with open(path) as f:
        data = json.load(f)
    chosen = data.get("slope") or data["mean"]
    return chosen["point_estimate"]


def read_group(root, group):
    directory = os.path.join(root, group)
    if not os.path.isdir(directory):
        return []
    rows = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name, "new", "estimates.json")
        if os.path.exists(path):
            rows.append((name, estimate_ns(path)))
    return rows


def svg(groups):
    width, bar_h, gap, left, right = 900, 22, 6, 260, 120
    y = 20
    parts = []
    for title, rows in groups:
        if not rows:
            continue
        parts.append(f'<text x="10" y="{y + 14}" font-size="15" font-weight="bold">{title}</text>')
        y += 26
        top = max(1000.0 / ns for _, ns in rows)
        for name, ns in sorted(rows, key=lambda r: r[1]):
            mps = 1000.0 / ns
            w = (width - left - right) * mps / top
            colour = "#2b7bba" if name in OURS else "#a0a0a0"
            label = f"zerodispatch {name}" if name in OURS else name
            parts.append(f'<text x="{left - 8}" y="{y + 16}" font-size="13" text-anchor="end">{label}</text>')
            parts.append(f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
            parts.append(
                f'<text x="{left + w + 6:.1f}" y="{y + 16}" font-size="12">{mps:.1f} M/s ({ns:.1f} ns)</text>'
            )
            y += bar_h + gap
        y += 18
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
    )
    return head + "".join(parts) + "</svg>\n"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/dispatch_throughput.svg"
    groups = [(title, read_group(root, group)) for group, title in GROUPS]
    if not any(rows for _, rows in groups):
        sys.exit(f"no dispatch results under {root}: run `cargo bench --bench dispatch` first")
    with open(out, "w") as f:
        f.write(svg(groups))
    for (group, _), (_, rows) in zip(GROUPS, groups):
        for name, ns in rows:
            print(f"{group}/{name}: {ns:.1f} ns, {1000.0 / ns:.1f} M events/s")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
