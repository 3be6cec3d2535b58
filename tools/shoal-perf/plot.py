#!/usr/bin/env python3
"""Plots of a shoal-perf JSON Lines file.

    shoal-perf-plot.py RESULTS.jsonl OUTDIR

Writes into OUTDIR:
  bandwidth_vs_size_<op>_<scope>.png  GB/s against message size, one line per CTA count (NCCL dashed)
  bandwidth_vs_ctas_<op>.png          GB/s against CTA count at block scope, one line per size
  coll_<op>.png                       collectives: time per call and bus bandwidth against size, one line
                                      per mode (stream, graph, grid, block; forced algorithms apart), NCCL
                                      dashed, the launch floor dotted
  latency.png                         latency rows as horizontal bars (target marked where the row has one)
Exit status: 0 written, 1 bad input, 3 matplotlib missing (said on stderr).
"""
import json
import math
import os
import sys
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"shoal-perf-plot: {path}:{n}: not JSON: {e}")
    return rows


def num(v):
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def human(n):
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or n % 1024:
            return f"{n}{unit}"
        n //= 1024
    return f"{n}P"


def title_of(rows):
    r = rows[0]
    return f"{r.get('machine', '?')}  |  {r.get('date', '?')}  |  commit {r.get('commit', '?')}"


def bandwidth_vs_size(plt, rows, outdir):
    groups = defaultdict(list)
    for r in rows:
        if r.get("metric") == "bandwidth" and not r.get("collective"):
            groups[(r["op"], r["scope"])].append(r)
    written = []
    for (op, scope), rs in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(8, 5))
        by_ctas = defaultdict(list)
        for r in rs:
            if num(r.get("bandwidth_gbs")):
                by_ctas[(r.get("ctas", 0), r.get("threads", 0))].append((r["bytes"], r["bandwidth_gbs"]))
        for (ctas, threads), pts in sorted(by_ctas.items()):
            pts.sort()
            label = f"{ctas} x {threads}" if ctas else scope
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        for key, style, label in (("nccl_bandwidth_gbs", "k--", "NCCL send/recv"),
                                  ("nvshmem_bandwidth_gbs", "k:", "NVSHMEM")):
            peer = sorted({(r["bytes"], r[key]) for r in rs if num(r.get(key))})
            if peer:
                ax.plot([p[0] for p in peer], [p[1] for p in peer], style, marker="x", label=label)
        ceiling = next((r["ceiling_gbs"] for r in rs if num(r.get("ceiling_gbs"))), None)
        if ceiling:
            ax.axhline(ceiling, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log", base=2)
        sizes = sorted({r["bytes"] for r in rs})
        ax.set_xticks(sizes)
        ax.set_xticklabels([human(s) for s in sizes], rotation=45)
        ax.set_xlabel("message bytes")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{op} ({scope})\n{title_of(rows)}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="CTAs x threads", title_fontsize=7)
        fig.tight_layout()
        name = os.path.join(outdir, f"bandwidth_vs_size_{op}_{scope}.png")
        fig.savefig(name, dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def bandwidth_vs_ctas(plt, rows, outdir):
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if (r.get("metric") == "bandwidth" and r.get("scope") == "block" and not r.get("collective")
                and num(r.get("bandwidth_gbs"))):
            groups[r["op"]][r["bytes"]].append((r["ctas"], r["bandwidth_gbs"]))
    written = []
    for op, by_size in sorted(groups.items()):
        if all(len(v) < 2 for v in by_size.values()):
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        for size, pts in sorted(by_size.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=human(size))
        ax.set_xscale("log", base=2)
        ctas = sorted({p[0] for pts in by_size.values() for p in pts})
        ax.set_xticks(ctas)
        ax.set_xticklabels([str(c) for c in ctas])
        ax.set_xlabel("CTAs")
        ax.set_ylabel("GB/s")
        ax.set_title(f"{op}, block scope, by CTA count\n{title_of(rows)}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="bytes", title_fontsize=7)
        fig.tight_layout()
        name = os.path.join(outdir, f"bandwidth_vs_ctas_{op}.png")
        fig.savefig(name, dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def collectives(plt, rows, outdir):
    groups = defaultdict(list)
    for r in rows:
        if r.get("collective") and r.get("op") != "barrier" and r.get("bytes"):
            groups[r["op"]].append(r)
    written = []
    for op, rs in sorted(groups.items()):
        fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 5))
        series = defaultdict(dict)  # name -> bytes -> the first row (quick repeats a row for a second target)
        for r in rs:
            forced = r.get("note", "").startswith("forced")
            name = f"shoal {r['scope']}" + (f" ({r['algo']}, forced)" if forced else "")
            series[name].setdefault(r["bytes"], r)
        for name, by_bytes in sorted(series.items()):
            srs = [by_bytes[b] for b in sorted(by_bytes)]
            t = [(r["bytes"], r["time_us"]) for r in srs if num(r.get("time_us"))]
            b = [(r["bytes"], r["busbw_gbs"]) for r in srs if num(r.get("busbw_gbs"))]
            if t:
                ax_t.plot([p[0] for p in t], [p[1] for p in t], marker="o", label=name)
            if b:
                ax_b.plot([p[0] for p in b], [p[1] for p in b], marker="o", label=name)
        for peer, style, label in (("nccl", "k--", "NCCL (graph)"), ("nvshmem", "k:", "NVSHMEM (stream)")):
            pt = sorted({(r["bytes"], r[f"{peer}_time_us"]) for r in rs if num(r.get(f"{peer}_time_us"))})
            pb = sorted({(r["bytes"], r[f"{peer}_busbw_gbs"]) for r in rs if num(r.get(f"{peer}_busbw_gbs"))})
            if pt:
                ax_t.plot([p[0] for p in pt], [p[1] for p in pt], style, marker="x", label=label)
            if pb:
                ax_b.plot([p[0] for p in pb], [p[1] for p in pb], style, marker="x", label=label)
        floor = next((r["launch_floor_us"] for r in rs if num(r.get("launch_floor_us"))), None)
        if floor:
            ax_t.axhline(floor, color="grey", linewidth=0.8, linestyle=":", label="launch floor")
        ceiling = next((r["ceiling_gbs"] for r in rs if num(r.get("ceiling_gbs"))), None)
        if ceiling:
            ax_b.axhline(ceiling, color="grey", linewidth=0.8, linestyle=":")
        sizes = sorted({r["bytes"] for r in rs})
        for ax, ylabel in ((ax_t, "us per call"), (ax_b, "bus bandwidth, GB/s")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes)
            ax.set_xticklabels([human(s) for s in sizes], rotation=45)
            ax.set_xlabel("bytes (OpenSHMEM nelems x element size)")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        ax_t.set_yscale("log")
        fig.suptitle(f"{op} ({rs[0].get('n_pes', '?')} PEs)\n{title_of(rows)}", fontsize=9)
        fig.tight_layout()
        name = os.path.join(outdir, f"coll_{op}.png")
        fig.savefig(name, dpi=120)
        plt.close(fig)
        written.append(name)
    return written


def latency(plt, rows, outdir):
    rs = [r for r in rows if r.get("metric") == "latency" and num(r.get("time_us"))]
    if not rs:
        return []
    labels = [f"{r['op']} {r['scope']} {human(r['bytes']) if r.get('bytes') else ''}".strip() for r in rs]
    values = [r["time_us"] for r in rs]
    fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(rs) + 1.5)))
    ax.barh(range(len(rs)), values, color="tab:blue")
    for i, r in enumerate(rs):
        target = r.get("target")
        if target and target.startswith("<="):
            value = float(target.split()[1])
            ax.plot([value, value], [i - 0.4, i + 0.4], color="red")
    ax.set_yticks(range(len(rs)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds (ping-pong: one-way; red: target)")
    ax.set_title(f"latency\n{title_of(rows)}", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    name = os.path.join(outdir, "latency.png")
    fig.savefig(name, dpi=120)
    plt.close(fig)
    return [name]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    path, outdir = argv[1], argv[2]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("shoal-perf-plot: matplotlib is not installed (pip install matplotlib); no plots written",
              file=sys.stderr)
        return 3
    rows = load(path)
    if not rows:
        print(f"shoal-perf-plot: {path} has no rows", file=sys.stderr)
        return 1
    os.makedirs(outdir, exist_ok=True)
    written = (bandwidth_vs_size(plt, rows, outdir) + bandwidth_vs_ctas(plt, rows, outdir)
               + collectives(plt, rows, outdir) + latency(plt, rows, outdir))
    for name in written:
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
