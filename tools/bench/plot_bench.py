"""Plots of a `mixrt bench` run (matplotlib, PNG):

    python plot_bench.py results.json DIR

DIR/throughput.png      GFLOP/s per case, one bar per backend and precision
DIR/speedup_vs_f32.png  each precision's speed over the same case in f32
DIR/vs_peer.png         mixrt's speed over the peer's (when peers ran; over
                        rounds, the median of each round's ratio)
DIR/memory.png          peak tensor memory per case and precision

With --rounds, the other plots show each row's last round.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402


def ok(rows):
    return [r for r in rows if r.get("status") == "ok"]


def grouped_bars(path, title, ylabel, cases, series, value, ratio=False):
    """series: list of (label, {case: row}); value(row) -> float or None.
    ratio: a log axis with a line at 1 (speedups either way read alike)."""
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(cases) + 2), 4.5))
    width = 0.8 / max(1, len(series))
    for i, (label, rows) in enumerate(series):
        xs, ys = [], []
        for j, case in enumerate(cases):
            v = value(rows[case]) if case in rows else None
            if v is not None:
                xs.append(j + i * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=label)
    if ratio:
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        # Ratios read as "1.15x", not matplotlib's "1.15 x 10^0" (its
        # scientific labels on a log axis that spans less than a decade).
        # Minor ticks are labelled only where there is no major one to read.
        as_ratio = ticker.FuncFormatter(lambda v, _: f"{v:.3g}x")
        low, high = ax.get_ylim()
        decades = math.floor(math.log10(high)) - math.ceil(math.log10(low)) + 1
        ax.yaxis.set_major_formatter(as_ratio)
        ax.yaxis.set_minor_formatter(
            as_ratio if decades < 2 else ticker.NullFormatter())
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
    ax.set_xticklabels(cases, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    run = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    results = ok(run["results"])
    peers = ok(run.get("peers", []))
    cases = list(dict.fromkeys(r["case"] for r in results))
    series = {}
    for r in results:
        label = f'{r["backend"]} {r["precision"]} {r["mode"]}'
        series.setdefault(label, {})[r["case"]] = r
    grouped_bars(os.path.join(out, "throughput.png"), "Throughput", "GFLOP/s",
                 cases, sorted(series.items()), lambda r: r.get("gflops") or None)
    f32 = {(r["case"], r["backend"], r["mode"]): r["timing"]["median_ms"]
           for r in results if r["precision"] == "f32"}
    speed = {k: v for k, v in series.items() if " f32 " not in k}
    grouped_bars(os.path.join(out, "speedup_vs_f32.png"), "Speedup over f32",
                 "x (same case, backend, mode)", cases, sorted(speed.items()),
                 lambda r: f32.get((r["case"], r["backend"], r["mode"]), 0) / r["timing"]["median_ms"]
                 if (r["case"], r["backend"], r["mode"]) in f32 else None, ratio=True)
    if peers:
        # Each ratio of one round's pair (--rounds), a bar the median of them.
        def key(r):
            return (r["case"], r["precision"], r["mode"], r.get("round", 1))
        peer = {key(p): p["timing"]["median_ms"] for p in peers}
        ratios = {}
        for r in results:
            if key(r) in peer:
                label = f'{r["backend"]} {r["precision"]} {r["mode"]}'
                ratios.setdefault((label, r["case"]), []).append(
                    peer[key(r)] / r["timing"]["median_ms"])

        def median_ratio(r):
            v = sorted(ratios.get((f'{r["backend"]} {r["precision"]} {r["mode"]}', r["case"]), []))
            if not v:
                return None
            n = len(v)
            return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
        rounds = max(r.get("round", 1) for r in results)
        grouped_bars(os.path.join(out, "vs_peer.png"),
                     "mixrt over PyTorch (same run" +
                     (f", median of {rounds} rounds)" if rounds > 1 else ")"),
                     "x (> 1: mixrt faster)", cases, sorted(series.items()),
                     median_ratio, ratio=True)
    grouped_bars(os.path.join(out, "memory.png"), "Peak tensor memory", "MiB",
                 cases, sorted(series.items()), lambda r: r.get("peak_mib"))
    print(f"plots in {out}")


if __name__ == "__main__":
    main()
