"""Summarizes a GPU proof kit run (run.sh) into summary.json and summary.md,
with the rows to paste into plugins/README.md's proof table.

    python3 summarize.py OUT
"""
import json
import os
import re
import sys

# Dense datasheet peaks in TFLOP/s (NVIDIA's H100/H200 datasheets):
# (name substring, f32, tf32, f16/bf16). The first match wins.
PEAKS = [
    ("H100 PCIe", 51.2, 378.0, 756.0),
    ("H100 NVL", 60.0, 417.5, 835.5),
    ("H200", 66.9, 494.7, 989.4),
    ("H100", 66.9, 494.7, 989.4),  # SXM5
    ("A100", 19.5, 156.0, 312.0),
    ("L40S", 91.6, 183.0, 362.0),
]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gpu_name(info):
    for p in (info or {}).get("plugins", []):
        if p.get("name") == "cuda" and p.get("devices"):
            return p["devices"][0].get("name", "")
    return ""


def peaks_for(name):
    for key, f32, tf32, half in PEAKS:
        if key in name:
            return {"f32": f32, "tf32": tf32, "f16": half, "bf16": half}
    return {}


def gemm_rates(doc, relabel=None):
    rates = {}
    for b in (doc or {}).get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or "GFLOP/s" not in b:
            continue
        shape, dtype = b["name"].split("/")[:2]
        rates[(shape, relabel or dtype)] = b["GFLOP/s"] / 1000.0
    return rates


def recipe(log):
    rows = {}
    for line in log.splitlines():
        m = re.match(r"^(default precision|autocast \+ GradScaler|autocast)\s+(\S+)\s+([\d.]+) ms/step.*final loss ([\d.naif-]+)", line)
        if m:
            rows[f"{m.group(1)} {m.group(2)}"] = {"ms_per_step": float(m.group(3)), "final_loss": m.group(4)}
    return rows


def main():
    out = sys.argv[1]
    steps = [json.loads(l) for l in read(os.path.join(out, "steps.jsonl")).splitlines() if l.strip()]
    info = load_json(os.path.join(out, "info.json"))
    name = gpu_name(info)
    peaks = peaks_for(name)
    conf = re.search(r"total: (\d+) ok, (\d+) failed, (\d+) not implemented",
                     read(os.path.join(out, "conformance.log")))
    rates = gemm_rates(load_json(os.path.join(out, "gemm.json")))
    rates.update(gemm_rates(load_json(os.path.join(out, "gemm_tf32.json")), "tf32"))
    peer = {(r["shape"], r["dtype"]): r["tflops"] for r in
            (load_json(os.path.join(out, "gemm_pytorch.json")) or {}).get("gemm", [])}
    gemm = [{"shape": s, "dtype": d, "tflops": t,
             "percent_of_peak": 100 * t / peaks[d] if d in peaks else None,
             "pytorch_tflops": peer.get((s, d))}
            for (s, d), t in sorted(rates.items())]
    digits = [l for l in read(os.path.join(out, "digits.log")).splitlines() if "test accuracy" in l]
    summary = {
        "gpu": name or "no GPU found",
        "steps": steps,
        "conformance": {"ok": int(conf.group(1)), "failed": int(conf.group(2)),
                        "not_implemented": int(conf.group(3))} if conf else None,
        "gemm": gemm,
        "recipe_f16": recipe(read(os.path.join(out, "recipe_f16.log"))),
        "recipe_bf16": recipe(read(os.path.join(out, "recipe_bf16.log"))),
        "recipe_compiled": recipe(read(os.path.join(out, "recipe_compiled.log"))),
        "digits": digits,
        "bench": load_json(os.path.join(out, "bench.json")) is not None,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    md = [f"# GPU proof kit on {summary['gpu']}", "", "| step | exit | seconds |", "|---|---:|---:|"]
    md += [f"| {s['step']} | {s['rc']} | {s['seconds']} |" for s in steps]
    c = summary["conformance"]
    md += ["", "Conformance: " + (f"{c['ok']} ok, {c['failed']} failed, {c['not_implemented']} not implemented" if c else "no table (see conformance.log)")]
    md += ["", "| GEMM | dtype | TFLOP/s | % of datasheet peak | PyTorch TFLOP/s | mixrt / PyTorch |",
           "|---|---|---:|---:|---:|---:|"]
    for g in gemm:
        pct = f"{g['percent_of_peak']:.0f}%" if g["percent_of_peak"] is not None else "?"
        p = g["pytorch_tflops"]
        peer_cells = f"{p:.1f} | {g['tflops'] / p:.2f}x" if p else "- | -"
        md.append(f"| {g['shape']} | {g['dtype']} | {g['tflops']:.1f} | {pct} | {peer_cells} |")
    for key in ("recipe_f16", "recipe_bf16", "recipe_compiled"):
        md += ["", f"AMP recipe ({key[7:]}):"] + [f"- {k}: {v['ms_per_step']} ms/step, final loss {v['final_loss']}" for k, v in summary[key].items()]
    md += ["", "Digits:"] + [f"- {l.strip()}" for l in digits]
    big = {(g["shape"], g["dtype"]): g for g in gemm if g["shape"].startswith("4096x4096x4096")}
    def cell(d):
        g = big.get(("4096x4096x4096", d))
        return f"{g['tflops']:.0f} TFLOP/s" if g else "-"
    md += ["", "Proof table rows (plugins/README.md):", "",
           f"| {summary['gpu']} | conformance {c['ok'] if c else '-'} ok / {c['failed'] if c else '-'} failed | "
           f"GEMM 4096³ f32 {cell('f32')}, TF32 {cell('tf32')}, f16 {cell('f16')}, bf16 {cell('bf16')} | "
           f"recipe {'ran' if summary['recipe_f16'] else 'failed'} | digits {'ran' if digits else 'failed'} |"]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
