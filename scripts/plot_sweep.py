#!/usr/bin/env python3
"""Plots the perftest sweep (scripts/sweep.sh) without dependencies: hand-written SVG.

    python3 scripts/plot_sweep.py [target/sweep.jsonl] [docs/sweep_latency.svg] [docs/sweep_batch.svg]

Reads one perftest `--json` summary per line and draws, per flush strategy:

* publish -> confirm latency against the publish rate, log-log: p50 (solid) and p99
  (dashed), in microseconds;
* mean messages per PUT frame against the publish rate, log-log.

The x axis is the rate each run achieved (messages published per second), so the
saturation run (`--rate 0`) lands at the throughput it reached; it is drawn as a hollow
marker.
"""

import json
import math
import sys

COLOURS = ["#2b7bba", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e"]
WIDTH, HEIGHT = 900, 560
LEFT, RIGHT, TOP, BOTTOM = 80, 190, 50, 60


def read(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                runs.append(json.loads(line))
    return runs


def strategies(runs):
    """Runs grouped by flush strategy, in the order first seen, each sorted by rate."""
    groups = {}
    for r in runs:
        groups.setdefault(r["flush"], []).append(r)
    for rows in groups.values():
        rows.sort(key=lambda r: r["publish_rate"])
    return groups


def decades(lo, hi):
    """Powers of ten covering [lo, hi]."""
    a = math.floor(math.log10(lo))
    b = math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return a, b


def label(v):
    """An axis label for `v`: 1.5M, 20k, 7."""
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class LogLog:
    """A log-log plot area mapping data to pixels."""

    def __init__(self, xs, ys):
        self.x0, self.x1 = decades(min(xs), max(xs))
        self.y0, self.y1 = decades(min(ys), max(ys))
        self.w = WIDTH - LEFT - RIGHT
        self.h = HEIGHT - TOP - BOTTOM

    def px(self, x):
        return LEFT + (math.log10(x) - self.x0) / (self.x1 - self.x0) * self.w

    def py(self, y):
        return TOP + self.h - (math.log10(y) - self.y0) / (self.y1 - self.y0) * self.h

    def axes(self, title, xlabel, ylabel):
        parts = [
            f'<text x="{WIDTH / 2}" y="28" font-size="16" font-weight="bold" text-anchor="middle">{title}</text>'
        ]
        for e in range(self.x0, self.x1 + 1):
            x = self.px(10**e)
            parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + self.h}" stroke="#e0e0e0"/>')
            parts.append(
                f'<text x="{x:.1f}" y="{TOP + self.h + 18}" font-size="12" text-anchor="middle">{label(10**e)}</text>'
            )
        for e in range(self.y0, self.y1 + 1):
            y = self.py(10**e)
            parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + self.w}" y2="{y:.1f}" stroke="#e0e0e0"/>')
            parts.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" font-size="12" text-anchor="end">{label(10**e)}</text>')
        parts.append(
            f'<rect x="{LEFT}" y="{TOP}" width="{self.w}" height="{self.h}" fill="none" stroke="#404040"/>'
        )
        parts.append(
            f'<text x="{LEFT + self.w / 2}" y="{HEIGHT - 18}" font-size="13" text-anchor="middle">{xlabel}</text>'
        )
        parts.append(
            f'<text x="18" y="{TOP + self.h / 2}" font-size="13" text-anchor="middle" '
            f'transform="rotate(-90 18 {TOP + self.h / 2})">{ylabel}</text>'
        )
        return parts

    def series(self, points, colour, dashed=False):
        """A line through (x, y, saturated) points; saturated points get hollow markers."""
        parts = []
        path = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y, _ in points)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, y, saturated in points:
            fill = "white" if saturated else colour
            parts.append(
                f'<circle cx="{self.px(x):.1f}" cy="{self.py(y):.1f}" r="4" fill="{fill}" stroke="{colour}" stroke-width="2"/>'
            )
        return parts


def legend(entries):
    parts = []
    x, y = WIDTH - RIGHT + 16, TOP + 8
    for text, colour, dashed in entries:
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 28}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 34}" y="{y + 4}" font-size="12">{text}</text>')
        y += 20
    parts.append(
        f'<circle cx="{x + 14}" cy="{y}" r="4" fill="white" stroke="#404040" stroke-width="2"/>'
        f'<text x="{x + 34}" y="{y + 4}" font-size="12">saturation (rate 0)</text>'
    )
    return parts


def document(parts):
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
    )
    return head + "".join(parts) + "</svg>\n"


def latency_svg(groups):
    xs, ys = [], []
    for rows in groups.values():
        for r in rows:
            c = r["confirm_latency_us"]
            if c["p50"] is None or r["publish_rate"] <= 0:
                continue
            xs.append(r["publish_rate"])
            ys += [max(c["p50"], 1), max(c["p99"], 1)]
    plot = LogLog(xs, ys)
    parts = plot.axes(
        "publish -> confirm latency against publish rate",
        "messages published per second (achieved)",
        "latency (us)",
    )
    entries = []
    for i, (flush, rows) in enumerate(groups.items()):
        colour = COLOURS[i % len(COLOURS)]
        ok = [r for r in rows if r["confirm_latency_us"]["p50"] is not None and r["publish_rate"] > 0]
        for key, dashed in (("p50", False), ("p99", True)):
            points = [(r["publish_rate"], max(r["confirm_latency_us"][key], 1), r["rate"] == 0) for r in ok]
            parts += plot.series(points, colour, dashed)
            entries.append((f"{flush} {key}", colour, dashed))
    return document(parts + legend(entries))


def batch_svg(groups):
    xs, ys = [], []
    for rows in groups.values():
        for r in rows:
            if r["publish_rate"] > 0 and r["mean_batch"] > 0:
                xs.append(r["publish_rate"])
                ys.append(r["mean_batch"])
    plot = LogLog(xs, ys)
    parts = plot.axes(
        "mean messages per PUT frame against publish rate",
        "messages published per second (achieved)",
        "messages per frame",
    )
    entries = []
    for i, (flush, rows) in enumerate(groups.items()):
        colour = COLOURS[i % len(COLOURS)]
        points = [(r["publish_rate"], r["mean_batch"], r["rate"] == 0) for r in rows if r["publish_rate"] > 0 and r["mean_batch"] > 0]
        parts += plot.series(points, colour)
        entries.append((flush, colour, False))
    return document(parts + legend(entries))


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "target/sweep.jsonl"
    latency_out = sys.argv[2] if len(sys.argv) > 2 else "docs/sweep_latency.svg"
    batch_out = sys.argv[3] if len(sys.argv) > 3 else "docs/sweep_batch.svg"
    runs = read(src)
    if not runs:
        sys.exit(f"no runs in {src}: run scripts/sweep.sh first")
    groups = strategies(runs)
    with open(latency_out, "w") as f:
        f.write(latency_svg(groups))
    with open(batch_out, "w") as f:
        f.write(batch_svg(groups))
    print(f"{'flush':<12} {'rate':>8} {'achieved':>12} {'p50 us':>9} {'p99 us':>9} {'batch':>7}  ok")
    for flush, rows in groups.items():
        for r in rows:
            c = r["confirm_latency_us"]
            print(
                f"{flush:<12} {r['rate']:>8g} {r['publish_rate']:>12.1f} {c['p50']!s:>9} {c['p99']!s:>9} "
                f"{r['mean_batch']:>7.1f}  {r['ok']}"
            )
    print(f"wrote {latency_out} and {batch_out}")


if __name__ == "__main__":
    main()
