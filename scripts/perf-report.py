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

# The goals of cc's all-reduce kernels, per NCCL version, eager
# and in CUDA graphs: cc time / raw time.
KERNEL_GOALS = [(8, 64 * KIB, 0.55), (64 * KIB + 1, 8 * MIB, 0.7)]
KERNEL_BW_MIN = 0.99       # busbw >= 0.99 x raw above 8 MiB
NVLINK_GBS = 450.0         # NVLink 4 (H100/H200, 18 links), per direction

ORDER = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
         "sendrecv"]

COMMANDS = """\
On the GPU machine (2 GPUs of one host), from the repository root:

```sh
meson setup build && ninja -C build
scripts/bench-gpu.sh build bench-out      # about 3 to 8 minutes; NCCL_NVLS_ENABLE=0
```

It runs the all-reduce again with a second NCCL (`NCCL_ALT_LIB_DIR`, else the
one of the machine's PyTorch wheel); `BENCH_STEPS` picks steps (e.g.
`BENCH_STEPS="init-embedded allreduce allreduce-graph allreduce-alt
allreduce-graph-alt nccl-channels"` for cc's all-reduce kernels alone).

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

All-reduces up to 8 MiB go through cc's own kernels where they beat
ncclAllReduce (`lib/fast/`; README, "cc's all-reduce kernels"): peer buffers
that cc maps itself through CUDA IPC, so they run with whatever NCCL is
loaded. Which kernel serves which size is measured at init against
ncclAllReduce on the same communicator (and cached per machine); the plan in
force is printed with each run ("cc path" below). "raw" uses the same libnccl
as cc. Back to back, a small all-reduce on cc's kernel costs about one kernel
launch of host time (3.6 to 4.0 µs for one `cudaLaunchKernel` on this
machine, measured alone), which is its floor. Raw NCCL's eager loop varied
between about 7 and 13 µs per call from one lease of the machine to the next,
and the ratios inherit that.

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
    rendezvous server (what the init goal speaks of) when there is one."""
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

    def row(values, pick, goal, measured, met):
        """The goal's row from its worst value, pick(values); none without values."""
        if values:
            worst = pick(values)
            lines.append(f"| {goal} | {measured.format(worst)} | {verdict(met(worst))} |")

    plain = lambda r: (r.get("graph", 0) == 0 and r.get("mem") == "default" and r.get("raw")
                       and not r["_name"].endswith("-alt"))
    run, ar = find(runs, "allreduce", plain)
    if ar:
        cc, raw = out_of_place(ar, "cc"), out_of_place(ar, "raw")
        row([raw[s]["time_us"] / cc[s]["time_us"] for s in cc if s >= 32 * MIB and s in raw], min,
            f"allreduce busbw ≥ {BW_RATIO_MIN} × raw, sizes ≥ 32 MiB", "lowest cc/raw {:.4f}",
            lambda worst: worst >= BW_RATIO_MIN)
        row([cc[s]["time_us"] - raw[s]["time_us"] for s in cc if 8 <= s <= 64 * KIB and s in raw],
            max, f"allreduce time ≤ raw + {LATENCY_DELTA_MAX} µs, 8 B – 64 KiB",
            "largest cc − raw {:+.2f} µs", lambda worst: worst <= LATENCY_DELTA_MAX)
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
            row([mcc[s]["time_us"] / raw[s]["time_us"] for s in mcc
                 if 8 <= s <= 64 * KIB and s in raw],
                max, f"cc_mem_alloc: small time ≤ {MEM_CC_LATENCY_RATIO} × raw default, "
                "8 B – 64 KiB", "largest ratio {:.3f}", lambda worst: worst <= MEM_CC_LATENCY_RATIO)
            row([mcc[s]["busbw_gbs"] / raw[s]["busbw_gbs"] for s in mcc
                 if s >= 32 * MIB and s in raw and raw[s]["busbw_gbs"]],
                min, "cc_mem_alloc: busbw ≥ raw default, sizes ≥ 32 MiB", "lowest ratio {:.4f}",
                lambda worst: worst >= 1.0)
    if len(lines) == 2:
        return "No allreduce run with --raw was found, so the goals cannot be judged."
    return "\n".join(lines)


def by_name(runs, name):
    for run in runs:
        if run["_name"] == name:
            return run
    return None


def allreduce_rows(run):
    if run is None:
        return {}, {}
    for coll in run["collectives"]:
        if coll["name"] == "allreduce":
            return out_of_place(coll, "cc"), out_of_place(coll, "raw")
    return {}, {}


def nccl_channels(out_dir):
    path = os.path.join(out_dir, "nccl-channels.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"(\d+) coll channels", line)
            if m:
                return int(m.group(1))
    return None


def kernels_section(runs, out_dir):
    """cc's all-reduce kernels against raw NCCL, for each NCCL the
    run had (eager and CUDA graphs), with the goals, the share of NVLink's
    bandwidth and the SMs each side occupies."""
    pairs = [("allreduce", "allreduce-graph"), ("allreduce-alt", "allreduce-graph-alt")]
    channels = nccl_channels(out_dir)
    parts = []
    goal_lines = ["| NCCL | mode | goal | measured | result |", "|---|---|---|---|---|"]
    for eager_name, graph_name in pairs:
        eager, graph = by_name(runs, eager_name), by_name(runs, graph_name)
        if eager is None:
            continue
        version = eager["nccl_version"]
        ecc, eraw = allreduce_rows(eager)
        gcc, graw = allreduce_rows(graph)
        parts.append(f"### NCCL {version}\n")
        parts.append(f"Plan: `{eager.get('allreduce_plan') or 'nccl'}` (files `{eager_name}.json`"
                     + (f", `{graph_name}.json`" if graph else "") + ")\n")
        head = ("| size | cc path (blocks) | cc (µs) | raw (µs) | cc/raw time | "
                "graph cc (µs) | graph raw (µs) | graph cc/raw time |")
        lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for size in sorted(ecc):
            c, r = ecc[size], eraw.get(size)
            gc, gr = gcc.get(size), graw.get(size)
            path = c.get("cc_path", "nccl")
            blocks = f" ({c['cc_blocks']})" if c.get("cc_blocks") else ""
            ratio = c["time_us"] / r["time_us"] if r and r["time_us"] else None
            gratio = gc["time_us"] / gr["time_us"] if gc and gr and gr["time_us"] else None
            lines.append(f"| {size_text(size)} | {path}{blocks} | {fmt(c['time_us'])} | "
                         f"{fmt(r['time_us']) if r else '–'} | {fmt(ratio, 3)} | "
                         f"{fmt(gc['time_us']) if gc else '–'} | {fmt(gr['time_us']) if gr else '–'} "
                         f"| {fmt(gratio, 3)} |")
        parts.append("\n".join(lines) + "\n")
        for mode, cc, raw in (("eager", ecc, eraw), ("graphs", gcc, graw)):
            if not cc:
                continue
            for lo, hi, limit in KERNEL_GOALS:
                ratios = [cc[s]["time_us"] / raw[s]["time_us"] for s in cc
                          if lo <= s <= hi and s in raw and raw[s]["time_us"]]
                if ratios:
                    worst = max(ratios)
                    span = (f"{size_text(lo)} – {size_text(hi)}" if lo <= 8
                            else f"above {size_text(lo - 1)} to {size_text(hi)}")
                    goal_lines.append(f"| {version} | {mode} | time ≤ {limit} × raw, {span} "
                                      f"| largest {worst:.3f} | {verdict(worst <= limit)} |")
            bw = [cc[s]["busbw_gbs"] / raw[s]["busbw_gbs"] for s in cc
                  if s > 8 * MIB and s in raw and raw[s]["busbw_gbs"]]
            if bw:
                worst = min(bw)
                goal_lines.append(f"| {version} | {mode} | busbw ≥ {KERNEL_BW_MIN} × raw above "
                                  f"8 MiB | lowest {worst:.4f} | {verdict(worst >= KERNEL_BW_MIN)} |")
        share = []
        for size in (2 * MIB, 8 * MIB):
            for mode, cc, raw in (("eager", ecc, eraw), ("graphs", gcc, graw)):
                if size in cc:
                    c, r = cc[size], raw.get(size)
                    share.append(f"- {size_text(size)}, {mode}: cc {c.get('cc_path', 'nccl')} "
                                 f"{fmt(c['busbw_gbs'], 1)} GB/s = "
                                 f"{100 * c['busbw_gbs'] / NVLINK_GBS:.0f} % of NVLink's "
                                 f"{NVLINK_GBS:.0f} GB/s per direction"
                                 + (f"; raw NCCL {fmt(r['busbw_gbs'], 1)} GB/s = "
                                    f"{100 * r['busbw_gbs'] / NVLINK_GBS:.0f} %" if r else "")
                                 + (f"; SMs: cc {c['cc_blocks']}" if c.get("cc_blocks") else "")
                                 + (f", NCCL up to {channels}" if channels else ""))
        if share:
            parts.append("Share of NVLink's bandwidth (busbw; with 2 ranks each rank sends "
                         "each byte once, so busbw is the rate on each direction of the link) "
                         "and SMs occupied (cc: thread blocks of its kernel, one SM each; NCCL: "
                         "its all-reduce channels, one SM each):\n")
            parts.append("\n".join(share) + "\n")
    if not parts:
        return ""
    return ("## cc's all-reduce kernels against NCCL\n\n" + "\n".join(goal_lines) + "\n\n"
            + "\n".join(parts))


def machine(runs, out_dir):
    first = runs[0]
    versions = sorted({r["nccl_version"] for r in runs})
    lines = [f"- {first['nranks']} ranks on host `{first['host']}`, GPU {first['gpu']}",
             f"- NCCL {' and '.join(versions)} (cc built against NCCL headers "
             f"{first['nccl_header_version']}; runs named -alt use the second), "
             f"cc {first['cc_version']}",
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
             kernels_section(runs, out_dir),
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
            parts.append(f"### {coll['name']} — {kind(run)}, NCCL {run['nccl_version']}\n")
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
