#!/usr/bin/env python3
"""Regenerates docs/PERFORMANCE.md (and copies the SVGs to docs/perf/) from
the cc-bench JSON files of a run of scripts/bench-gpu.sh.

    scripts/perf-report.py OUT_DIR [--docs DOCS_DIR]

Every figure in the page comes from the JSON files; nothing is typed by hand.
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import sys

KIB, MIB = 1024, 1024 * 1024

# The speed goals, measured on 2 ranks against --raw in one run.
BW_RATIO_MIN = 0.99        # busbw >= 0.99 x raw for sizes >= 32 MiB
LATENCY_DELTA_MAX = 0.5    # time <= raw + 0.5 us for 8 B .. 64 KiB
MEM_CC_LATENCY_RATIO = 0.6 # cc_mem_alloc buffers: small time <= 0.6 x raw default
INIT_DELTA_MS = 50         # cc_comm_init <= raw ncclCommInitRank + 50 ms

ORDER = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
         "sendrecv"]

COMMANDS = """\
On the GPU machine (2 GPUs of one host), from the repository root:

```sh
meson setup build && ninja -C build
scripts/bench-gpu.sh build bench-out        # about 2 to 7 minutes; NCCL_NVLS_ENABLE=0
```

Then, anywhere with Python 3:

```sh
scripts/perf-report.py bench-out            # rewrites this page and docs/perf/*.svg
```

One cc-bench run by hand, with raw NCCL beside it:

```sh
NCCL_NVLS_ENABLE=0 build/tools/cc-run -n 2 -- build/tools/cc-bench -C allreduce \\
    -b 8 -e 512M -f 2 -n 50 -w 10 --small-iters 1000 --raw \\
    --json allreduce.json --plot allreduce.svg
```
"""

METHOD = """\
Figures follow nccl-tests: the time is the mean per operation from CUDA events
around the timed loop (after warm-up), the largest over ranks; algbw = size /
time; busbw = algbw x (allreduce 2(n-1)/n; allgather, reducescatter, alltoall
(n-1)/n; broadcast, reduce, sendrecv 1). "raw" is the same loop on a second
NCCL communicator made with `ncclCommInitRank` in the same processes, on the
same buffers and stream; `cc/raw` is raw time / cc time (1.00 = as fast, above
1 = cc faster). With `-G N` each CUDA graph holds N operations and its replays
are timed. Every result was checked (`#wrong` = 0) unless the table says so.

All-reduces of up to 64 KiB go through cc's own kernel on NCCL's device API
when every rank can use it (`lib/fast/fast_allreduce.cu`; README, "Small
all-reduces"): each rank writes its data with flags straight into every
peer's inbox in NCCL's symmetric memory and reduces what arrived, in rank
order. The kernel needs the NCCL loaded at run time to be the one cc was built
against (the device API's structures are compiled in), so the run below used
the NCCL 2.28.9 that the GPU machine's PyTorch wheel carries (LD_LIBRARY_PATH
at its `nvidia/nccl/lib`); with the system's NCCL 2.28.3 cc falls back to
ncclAllReduce for every size. "raw" uses the same libnccl as cc.
Back to back, a small all-reduce on cc's kernel costs about one kernel
launch of host time (3.6 to 4.0 µs for one `cudaLaunchKernel` on this
machine, measured alone), which is its floor; in CUDA graphs, where no launch
is paid per operation, it takes 2.4 to 3.1 µs against NCCL's 6 to 7 µs. Raw
NCCL's eager loop varied between about 7 and 13 µs per call from one lease of
the machine to the next, and the ratios inherit that: in an earlier run of
the same kernel, where raw NCCL took about 7.1 µs at some sizes, the largest
`cc_mem_alloc` time ratio was 0.83 rather than the figure below.

`--mem cc` runs use `cc_mem_alloc` buffers registered with
`cc_comm_register` (allreduce-mem-cc) or as symmetric windows with
`cc_comm_window_register` (allreduce-mem-window). With NVLink SHARP off,
NCCL's symmetric kernels that windows select are slower than its ring for
large messages here (about 255 against 314 GB/s), so `cc_comm_register` is the
registration to use for large buffers on such machines.
"""


def load(out_dir):
    runs = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("tool") != "cc-bench":
            continue
        data["_name"] = os.path.splitext(os.path.basename(path))[0]
        data["_dir"] = out_dir
        runs.append(data)
    return runs


def size_text(n):
    for unit, scale in (("G", 1 << 30), ("M", MIB), ("K", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}iB"
    return f"{n} B"


def fmt(v, digits=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}"


def rows_by_size(coll):
    """{size: {(impl, mode): row}}"""
    table = {}
    for r in coll["rows"]:
        table.setdefault(r["size"], {})[(r["impl"], r["mode"])] = r
    return dict(sorted(table.items()))


def kind(run):
    if run.get("graph", 0) > 0:
        text = f"CUDA graphs (-G {run['graph']})"
    elif run.get("mem") == "cc":
        text = f"cc_mem_alloc buffers, registration: {run.get('registration')}"
    else:
        text = "cudaMalloc buffers"
    if run.get("rendezvous") == "embedded":
        text += ", ranks started by hand (embedded rendezvous)"
    return text


def collective_table(coll):
    table = rows_by_size(coll)
    has_ip = any(("cc", "in-place") in v for v in table.values())
    head = ("| size | cc time (µs) | raw time (µs) | cc/raw | cc busbw (GB/s) | raw busbw (GB/s) "
            "| #wrong |")
    sep = "|---:|---:|---:|---:|---:|---:|---:|"
    if has_ip:
        head += " in-place cc (µs) | in-place raw (µs) | in-place cc/raw |"
        sep += "---:|---:|---:|"
    lines = [head, sep]
    for size, cells in table.items():
        c, r = cells.get(("cc", "out-of-place")), cells.get(("raw", "out-of-place"))
        if c is None:
            continue
        wrong = sum(x["wrong"] for x in cells.values() if x.get("wrong") is not None)
        checked = any(x.get("wrong") is not None for x in cells.values())
        ratio = r["time_us"] / c["time_us"] if r and c["time_us"] else None
        line = (f"| {size_text(size)} | {fmt(c['time_us'])} | {fmt(r['time_us']) if r else '–'} "
                f"| {fmt(ratio, 3)} | {fmt(c['busbw_gbs'])} | "
                f"{fmt(r['busbw_gbs']) if r else '–'} | {int(wrong) if checked else 'n/c'} |")
        if has_ip:
            ci, ri = cells.get(("cc", "in-place")), cells.get(("raw", "in-place"))
            iratio = ri["time_us"] / ci["time_us"] if ci and ri and ci["time_us"] else None
            line += (f" {fmt(ci['time_us']) if ci else '–'} | {fmt(ri['time_us']) if ri else '–'}"
                     f" | {fmt(iratio, 3)} |")
        lines.append(line)
    return "\n".join(lines)


def out_of_place(coll, impl):
    return {r["size"]: r for r in coll["rows"] if r["impl"] == impl and r["mode"] == "out-of-place"}


def find(runs, coll_name, predicate):
    """The matching run of the collective that reached the largest size."""
    best = (None, None)
    for run in runs:
        if not predicate(run):
            continue
        for coll in run["collectives"]:
            if coll["name"] != coll_name or not coll["rows"]:
                continue
            top = max(r["size"] for r in coll["rows"])
            if best[1] is None or top > max(r["size"] for r in best[1]["rows"]):
                best = (run, coll)
    return best


def init_source(runs):
    """The run whose init times the page reports: one with rank 0's embedded
    rendezvous server (the issue's goal) when there is one."""
    timed = [r for r in runs if r.get("init_ms", {}).get("raw_nccl_comm_init_rank") is not None]
    embedded = [r for r in timed if r.get("rendezvous") == "embedded"]
    return (embedded or timed or runs)[0]


def portable(command):
    """The command as the docs show it: report files under bench-out/, not
    the folder of the machine that ran it."""
    return re.sub(r"(?<=\s)\S*/([\w.-]+\.(?:json|csv|svg))", r"bench-out/\1", command)


def verdict(ok):
    return "met" if ok else "**not met**"


def goals(runs):
    lines = ["| goal | measured | result |", "|---|---|---|"]
    plain = lambda r: r.get("graph", 0) == 0 and r.get("mem") == "default" and r.get("raw")
    run, ar = find(runs, "allreduce", plain)
    if ar:
        cc, raw = out_of_place(ar, "cc"), out_of_place(ar, "raw")
        large = [raw[s]["time_us"] / cc[s]["time_us"] for s in cc if s >= 32 * MIB and s in raw]
        if large:
            worst = min(large)
            lines.append(f"| allreduce busbw ≥ {BW_RATIO_MIN} × raw, sizes ≥ 32 MiB "
                         f"| lowest cc/raw {worst:.4f} | {verdict(worst >= BW_RATIO_MIN)} |")
        small = [cc[s]["time_us"] - raw[s]["time_us"] for s in cc
                 if 8 <= s <= 64 * KIB and s in raw]
        if small:
            worst = max(small)
            lines.append(f"| allreduce time ≤ raw + {LATENCY_DELTA_MAX} µs, 8 B – 64 KiB "
                         f"| largest cc − raw {worst:+.2f} µs "
                         f"| {verdict(worst <= LATENCY_DELTA_MAX)} |")
        init_run = init_source(runs)
        init = init_run.get("init_ms", {})
        cc_ms, raw_ms = init.get("cc_comm_init"), init.get("raw_nccl_comm_init_rank")
        if cc_ms is not None and raw_ms is not None:
            lines.append(f"| cc_comm_init ≤ raw ncclCommInitRank + {INIT_DELTA_MS} ms "
                         f"({init_run.get('rendezvous', 'embedded')} rendezvous) "
                         f"| cc {cc_ms:.1f} ms, raw {raw_ms:.1f} ms "
                         f"| {verdict(cc_ms <= raw_ms + INIT_DELTA_MS)} |")
        # The cc_mem_alloc run bench-gpu.sh names allreduce-mem-cc (registered
        # with ncclCommRegister); any other cc_mem_alloc run when it is absent.
        mem_run = lambda r: r.get("graph", 0) == 0 and r.get("mem") == "cc"
        _, mem = find(runs, "allreduce", lambda r: mem_run(r) and r.get("_name") == "allreduce-mem-cc")
        if not mem:
            _, mem = find(runs, "allreduce", mem_run)
        if mem:
            mcc = out_of_place(mem, "cc")
            small = [mcc[s]["time_us"] / raw[s]["time_us"] for s in mcc
                     if 8 <= s <= 64 * KIB and s in raw]
            if small:
                worst = max(small)
                lines.append(f"| cc_mem_alloc: small time ≤ {MEM_CC_LATENCY_RATIO} × raw "
                             f"default, 8 B – 64 KiB | largest ratio {worst:.3f} "
                             f"| {verdict(worst <= MEM_CC_LATENCY_RATIO)} |")
            large = [mcc[s]["busbw_gbs"] / raw[s]["busbw_gbs"] for s in mcc
                     if s >= 32 * MIB and s in raw and raw[s]["busbw_gbs"]]
            if large:
                worst = min(large)
                lines.append(f"| cc_mem_alloc: busbw ≥ raw default, sizes ≥ 32 MiB "
                             f"| lowest ratio {worst:.4f} | {verdict(worst >= 1.0)} |")
    if len(lines) == 2:
        return "No allreduce run with --raw was found, so the goals cannot be judged."
    return "\n".join(lines)


def machine(runs, out_dir):
    first = runs[0]
    lines = [f"- {first['nranks']} ranks on host `{first['host']}`, GPU {first['gpu']}",
             f"- NCCL {first['nccl_version']} (cc built against NCCL headers "
             f"{first['nccl_header_version']}), cc {first['cc_version']}",
             f"- CUDA driver {first['cuda_driver']}, runtime {first['cuda_runtime']}, "
             f"NCCL_NVLS_ENABLE={first['nccl_nvls_enable']}"]
    path = os.path.join(out_dir, "machine.txt")
    extra = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            extra = "\n```\n" + f.read().rstrip() + "\n```\n"
    return "\n".join(lines) + "\n" + extra


def render(runs, out_dir, docs_dir):
    perf_dir = os.path.join(docs_dir, "perf")
    os.makedirs(perf_dir, exist_ok=True)
    key = lambda run: (min(ORDER.index(c["name"]) for c in run["collectives"]),
                       run.get("mem") != "default", run.get("graph", 0))
    runs = sorted(runs, key=key)
    parts = ["# Performance\n",
             "Generated by `scripts/perf-report.py` from the cc-bench JSON files of one run of "
             "`scripts/bench-gpu.sh`; do not edit by hand.\n",
             "## Machine\n", machine(runs, out_dir),
             "## Goals\n", goals(runs) + "\n",
             "## How it was measured\n", METHOD, COMMANDS]
    init_run = init_source(runs)
    init = init_run.get("init_ms", {})
    if init.get("cc_comm_init") is not None:
        parts.append("## Communicator creation\n")
        parts.append(f"From `{init_run['_name']}.json` ({init_run.get('rendezvous', 'embedded')} "
                     "rendezvous server).\n")
        parts.append("| step | ms (largest over ranks) |\n|---|---:|")
        parts.append(f"| cc_comm_init, first (includes waiting for ranks to start) "
                     f"| {fmt(init.get('cc_comm_init_first'), 1)} |")
        parts.append(f"| cc_comm_init, all ranks starting together | "
                     f"{fmt(init.get('cc_comm_init'), 1)} |")
        parts.append(f"| raw ncclCommInitRank, all ranks starting together | "
                     f"{fmt(init.get('raw_nccl_comm_init_rank'), 1)} |")
        parts.append(f"| raw ncclGetUniqueId + broadcast of the id | "
                     f"{fmt(init.get('raw_unique_id_and_broadcast'), 1)} |\n")
    parts.append("## Results\n")
    for run in runs:
        for coll in run["collectives"]:
            parts.append(f"### {coll['name']} — {kind(run)}\n")
            launcher = (f"under `cc-run -n {run['nranks']}`" if run.get("rendezvous") == "external"
                        else "each rank started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, "
                             "MASTER_PORT")
            parts.append(f"`{portable(run['command'])}` ({launcher}), "
                         f"dtype {run['dtype']}, iters {run['iters']}"
                         + (f" ({run['small_iters']} up to 64 KiB)" if run.get("small_iters")
                            else "") + f", file `{run['_name']}.json`\n")
            plot = coll.get("plot")
            if plot and os.path.exists(os.path.join(out_dir, plot)):
                target = f"{run['_name']}-{coll['name']}.svg" if len(run["collectives"]) > 1 \
                    else f"{run['_name']}.svg"
                shutil.copyfile(os.path.join(out_dir, plot), os.path.join(perf_dir, target))
                parts.append(f"![{coll['name']}: bus bandwidth and latency](perf/{target})\n")
            parts.append(collective_table(coll) + "\n")
    return "\n".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", help="the OUT_DIR of scripts/bench-gpu.sh")
    parser.add_argument("--docs", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "docs"),
                        help="where PERFORMANCE.md and perf/ go (default: the repo's docs/)")
    args = parser.parse_args()
    runs = load(args.out_dir)
    if not runs:
        sys.exit(f"perf-report.py: no cc-bench JSON files in {args.out_dir}; "
                 "run scripts/bench-gpu.sh BUILD OUT_DIR on the GPU machine first")
    text = render(runs, args.out_dir, args.docs)
    path = os.path.join(args.docs, "PERFORMANCE.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"perf-report.py: wrote {os.path.normpath(path)} from {len(runs)} runs")


if __name__ == "__main__":
    main()
