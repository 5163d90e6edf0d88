#!/usr/bin/env python3
"""Plots the queues sweep (scripts/queues_sweep.sh): throughput against queues.

    python3 scripts/plot_queues.py [target/queues_sweep.json] [docs/queues_scaling.svg]

Reads the sweep's summary (one JSON object whose "points" hold, per transport and queue
count, the confirm rate's median, minimum and maximum over the runs) and draws confirms
per second against the number of queues, one line per transport through the medians, with
a bar from the minimum to the maximum at each point, and the ideal line (the one-queue
median times the queues, up to the machine's cores) dotted.

Uses matplotlib when it can be imported; otherwise writes the same figure as hand-written
SVG, without dependencies (as scripts/plot_sweep.py does).
"""

import json
import sys

from plot_sweep import label

COLOURS = ["#2b7bba", "#d95f02", "#1b9e77", "#7570b3"]
WIDTH, HEIGHT = 820, 520
LEFT, RIGHT, TOP, BOTTOM = 90, 200, 60, 60


def series(summary):
    """{transport: [(queues, median, min, max), ...]} sorted by queues."""
    out = {}
    for p in summary["points"]:
        c = p["confirm_rate"]
        out.setdefault(p["transport"], []).append((p["queues"], c["median"], c["min"], c["max"]))
    for rows in out.values():
        rows.sort()
    return out


def ideal(rows, cores):
    """The one-queue median times the queues, capped at the cores: perfect scaling."""
    base = next((m for q, m, _, _ in rows if q == 1), None)
    if base is None:
        return []
    return [(q, base * min(q, cores)) for q, _, _, _ in rows]


def title(summary):
    return (f"perftest --queues N --rate 0: confirms/s against queues "
            f"({summary['cores']} cores, {summary['duration']} runs)")


def plot_matplotlib(summary, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.2, 5.2))
    for i, (transport, rows) in enumerate(series(summary).items()):
        colour = COLOURS[i % len(COLOURS)]
        qs = [r[0] for r in rows]
        med = [r[1] for r in rows]
        err = [[r[1] - r[2] for r in rows], [r[3] - r[1] for r in rows]]
        ax.errorbar(qs, med, yerr=err, color=colour, marker="o", capsize=4,
                    label=f"{transport} (median, min-max)")
        line = ideal(rows, summary["cores"])
        ax.plot([q for q, _ in line], [v for _, v in line], color=colour, linestyle=":",
                label=f"{transport} ideal (x queues, up to {summary['cores']} cores)")
    ax.set_xlabel("queues (publisher and consumer i on queue i % N)")
    ax.set_ylabel("confirms per second")
    ax.set_ylim(bottom=0)
    ax.set_title(title(summary), fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, color="#e0e0e0")
    fig.tight_layout()
    fig.savefig(out, format="svg")


def plot_svg(summary, out):
    groups = series(summary)
    cores = summary["cores"]
    queues = sorted({r[0] for rows in groups.values() for r in rows})
    ys = [r[3] for rows in groups.values() for r in rows]
    ys += [v for rows in groups.values() for _, v in ideal(rows, cores)]
    step = 10 ** len(str(int(max(ys)))) / 10
    while max(ys) / step < 4:
        step /= 2
    y_max = step * (int(max(ys) / step) + 1)
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x_lo, x_hi = min(queues) - 0.5, max(queues) + 0.5

    def px(q):
        return LEFT + (q - x_lo) / (x_hi - x_lo) * w

    def py(v):
        return TOP + h - v / y_max * h

    parts = [
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="28" font-size="14" font-weight="bold" '
        f'text-anchor="middle">{title(summary)}</text>'
    ]
    v = 0.0
    while v <= y_max + 1e-9:
        parts.append(f'<line x1="{LEFT}" y1="{py(v):.1f}" x2="{LEFT + w}" y2="{py(v):.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{py(v) + 4:.1f}" font-size="12" text-anchor="end">{label(v)}</text>')
        v += step
    for q in queues:
        parts.append(f'<text x="{px(q):.1f}" y="{TOP + h + 18}" font-size="12" text-anchor="middle">{q}</text>')
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#404040"/>')
    parts.append(
        f'<text x="{LEFT + w / 2}" y="{HEIGHT - 18}" font-size="13" text-anchor="middle">'
        f"queues (publisher and consumer i on queue i % N)</text>"
    )
    parts.append(
        f'<text x="20" y="{TOP + h / 2}" font-size="13" text-anchor="middle" '
        f'transform="rotate(-90 20 {TOP + h / 2})">confirms per second</text>'
    )
    lx, ly = WIDTH - RIGHT + 16, TOP + 8
    for i, (transport, rows) in enumerate(groups.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = ideal(rows, cores)
        if line:
            pts = " ".join(f"{px(q):.1f},{py(v):.1f}" for q, v in line)
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="2,4"/>')
        pts = " ".join(f"{px(q):.1f},{py(m):.1f}" for q, m, _, _ in rows)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for q, m, lo, hi in rows:
            x = px(q)
            parts.append(f'<line x1="{x:.1f}" y1="{py(lo):.1f}" x2="{x:.1f}" y2="{py(hi):.1f}" stroke="{colour}" stroke-width="1.5"/>')
            for y in (py(lo), py(hi)):
                parts.append(f'<line x1="{x - 5:.1f}" y1="{y:.1f}" x2="{x + 5:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="1.5"/>')
            parts.append(f'<circle cx="{x:.1f}" cy="{py(m):.1f}" r="4" fill="{colour}"/>')
        for text, dash in ((f"{transport}: median, min-max", ""),
                           (f"{transport}: ideal, up to {cores} cores", ' stroke-dasharray="2,4"')):
            parts.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 26}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
            parts.append(f'<text x="{lx + 32}" y="{ly + 4}" font-size="11">{text}</text>')
            ly += 20
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>'
    )
    with open(out, "w") as f:
        f.write(head + "".join(parts) + "</svg>\n")


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "target/queues_sweep.json"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/queues_scaling.svg"
    with open(src) as f:
        summary = json.load(f)
    if not summary.get("points"):
        sys.exit(f"no points in {src}: run scripts/queues_sweep.sh first")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plot_svg(summary, out)
        print(f"wrote {out} (hand-written SVG: matplotlib is not importable here)")
        return
    plot_matplotlib(summary, out)
    print(f"wrote {out} (matplotlib)")


if __name__ == "__main__":
    main()
