#!/usr/bin/env python3
"""Per-kernel SASS figures of CUDA objects: instructions, local-memory loads and stores (spills and stack
arguments), subroutine calls (CALL.REL: 64-bit division and the like), and warp-aggregated atomics (AGG: a
vote of the active lanes, which ptxas puts before an atomic it cannot prove one lane makes; perf notes 64).
A first filter before an A/B on a GPU: in-kernel collectives move with how the register allocator treats
their set-up (perf notes 56).

Usage: scripts/sass-stats.py [--match REGEX] OBJECT [OBJECT...]
  e.g. scripts/sass-stats.py --match coll_loop_kernel build/release/tools/shoal-perf/CMakeFiles/shoal-perf.dir/coll_kernels.cu.o
Two objects (say, before and after a change) print side by side, with the differences.
Needs cuobjdump and nvdisasm on PATH (the CUDA toolkit's bin).
"""
import argparse
import re
import shutil
import subprocess
import sys

ADDRESS = re.compile(r"/\*[0-9a-f]{4,6}\*/")  # the instruction's offset
ENCODING = re.compile(r"/\* 0x[0-9a-f]+ \*/")  # its encoding
ACTIVE_LANES_VOTE = re.compile(r"\bVOTEU?\.ANY U?R\w+, U?PT, PT\b")  # the active-lane mask of an aggregation


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out))


def kernel_stats(path):
    """{kernel: (instructions, local loads, local stores, subroutine calls, aggregated atomics)} of one object."""
    sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True)
    if sass.returncode != 0:
        sys.exit(f"sass-stats: cuobjdump failed on {path}: {sass.stderr.strip()}")
    stats, current = {}, None
    for line in sass.stdout.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = m.group(1)
            stats[current] = [0, 0, 0, 0, 0]
            continue
        text = ENCODING.sub("", ADDRESS.sub("", line)).strip()
        if current is None or not text or text.startswith("/*") or not re.match(r"[A-Z@{]", text):
            continue
        s = stats[current]
        s[0] += 1
        s[1] += "LDL" in text
        s[2] += "STL" in text
        s[3] += "CALL.REL" in text
        s[4] += bool(ACTIVE_LANES_VOTE.search(text))  # shoal itself calls no __activemask()
    return stats


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--match", default="", help="only kernels whose demangled name matches this regex")
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    for tool in ("cuobjdump", "nvdisasm"):
        if not shutil.which(tool):
            sys.exit(f"sass-stats: {tool} is not on PATH (it comes with the CUDA toolkit)")
    tables = [kernel_stats(p) for p in args.objects]
    names = sorted(set().union(*tables))
    pretty = demangle(names)
    pattern = re.compile(args.match)
    header = "  ".join(f"{'instr':>6} {'LDL':>5} {'STL':>5} {'CALL':>4} {'AGG':>4}" for _ in tables)
    print(f"{header}  kernel")
    for name in names:
        if not pattern.search(pretty[name]):
            continue
        cells = []
        for table in tables:
            s = table.get(name)
            cells.append(f"{s[0]:6d} {s[1]:5d} {s[2]:5d} {s[3]:4d} {s[4]:4d}" if s else f"{'-':>6} {'-':>5} {'-':>5} {'-':>4} {'-':>4}")
        diff = ""
        if len(tables) == 2 and all(name in t for t in tables):
            a, b = tables[0][name], tables[1][name]
            diff = f"  (instr {b[0] - a[0]:+d}, LDL {b[1] - a[1]:+d}, AGG {b[4] - a[4]:+d})"
        print(f"{'  '.join(cells)}  {pretty[name][:110]}{diff}")


if __name__ == "__main__":
    main()
