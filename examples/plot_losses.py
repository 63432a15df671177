#!/usr/bin/env python3
"""Plots examples/gpt's loss curves: plot_losses.py losses.csv out.png.

The CSV has columns mode,step,train_loss,val_loss (one row per evaluation).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # No display on build machines.
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path, png_path):
    curves = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            c = curves.setdefault(row["mode"], {"step": [], "train": [], "val": []})
            c["step"].append(int(row["step"]))
            c["train"].append(float(row["train_loss"]))
            c["val"].append(float(row["val_loss"]))
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (mode, c) in enumerate(curves.items()):
        color = f"C{i}"
        ax.plot(c["step"], c["train"], color=color, alpha=0.5, label=f"{mode} train")
        ax.plot(c["step"], c["val"], color=color, linestyle="--", label=f"{mode} validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title("mixrt character-level GPT on the fortunes corpus")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_losses.py losses.csv out.png")
    main(sys.argv[1], sys.argv[2])
