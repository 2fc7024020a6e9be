"""A rank of a "cc" process group dies mid-training; the survivors call
torch's own dist.shrink_group([victim]) in the same process (no restart),
go on training on the shrunk group and finish with the right weights.

    python shrink_group.py                          # 4 ranks by hand, rank 2 dies
    python shrink_group.py --ranks 8 --victim 5 --abort

Each rank's gradient at every step is its original rank + 1 (a tensor of
that value); a step averages them with all_reduce(SUM) / world size and
takes w -= 0.1 * average. A step counts (is committed) only when its
all-reduce's host wait returned without error and every element is the
expected sum. After the shrink, the survivors agree on the last step all of
them committed (all_reduce MIN: one may have committed the last 4-rank step
while another raised at it), roll back to it and go on with 3 ranks; the
final weights must equal the same arithmetic done on the CPU for that split.

With CC_SHARE_GPU=1 in the environment every rank shares GPU 0. Prints per
survivor how long shrink_group took and the time from the victim's death
to its first correct all-reduce on the shrunk group.
"""

import argparse
import datetime
import os
import sys
import tempfile
import time

from ranks_by_hand import run_ranks

STEPS = 20
DIES_BEFORE = 5  # the victim takes part in steps 0..4 and dies before step 5
LR = 0.1
N = 1 << 18


def parent(ranks, victim, abort):
    stamp = tempfile.mktemp(prefix="cc-victim-")
    argv = [__file__, "--child", "--ranks", str(ranks), "--victim", str(victim), "--stamp", stamp]
    if abort:
        argv.append("--abort")
    codes = run_ranks(ranks, argv)
    ok = all(code == (3 if rank == victim else 0) for rank, code in enumerate(codes))
    print("PASS" if ok else "FAIL: want the victim to exit 3 and every survivor 0")
    return 0 if ok else 1


def expected_weights(torch, committed_by_all, world, victim):
    """w after STEPS steps, the first committed_by_all of them with every
    rank, the rest without the victim: float32 on the CPU, in the order the
    GPU computes it."""
    w = torch.zeros(1, dtype=torch.float32)
    everyone = sum(r + 1 for r in range(world))
    survivors = everyone - (victim + 1)
    for step in range(STEPS):
        total, size = (everyone, world) if step < committed_by_all else (survivors, world - 1)
        g = torch.full((1,), float(total), dtype=torch.float32) / size
        w -= LR * g
    return w.item()


def child(world, victim, stamp, abort):
    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)

    rank = int(os.environ["RANK"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    # device_id binds the group to its GPU: torch registers a shrunk group's
    # backend for the bound device only (CPU otherwise).
    dist.init_process_group("cc", device_id=device)
    group = dist.group.WORLD
    backend = group._get_backend(torch.device("cuda"))
    if not hasattr(dist, "shrink_group") or not backend.supports_shrinking:
        print("rank %d: this torch has no dist.shrink_group, or cc's backend does not support "
              "shrinking (supports_shrinking %s)"
              % (rank, getattr(backend, "supports_shrinking", None)), flush=True)
        os._exit(1)
    flags = (getattr(dist.distributed_c10d, "SHRINK_ABORT", 1) if abort
             else getattr(dist.distributed_c10d, "SHRINK_DEFAULT", 0))

    w = torch.zeros(N, device=device)
    snapshots = {0: w.clone()}  # the weights before each step
    alive_total = sum(r + 1 for r in range(world))
    size = world
    step = 0
    shrunk_at = None
    died = None
    first_correct = None
    while step < STEPS:
        if rank == victim and step == DIES_BEFORE:
            with open(stamp, "w") as f:
                f.write(repr(time.time()))
            os._exit(3)  # no goodbye: as a crash or a kill would leave
        g = torch.full((N,), float(rank + 1), device=device)
        try:
            work = dist.all_reduce(g, group=group, async_op=True)
            work.wait(timeout=datetime.timedelta(seconds=60))
            good = bool(torch.all(g == float(alive_total)).item())
        except Exception as e:  # the victim's death, with cc's message
            if shrunk_at is not None:
                print("rank %d: a second failure after the shrink: %s" % (rank, e), flush=True)
                os._exit(1)
            failed_at = time.time()
            died = float(open(stamp).read()) if os.path.exists(stamp) else failed_at
            print("rank %d raised %s at step %d, %.2f s after rank %d died: %s"
                  % (rank, type(e).__name__, step, failed_at - died, victim,
                     str(e).splitlines()[0]), flush=True)
            t0 = time.time()
            group = dist.shrink_group([victim], shrink_flags=flags)
            took = time.time() - t0
            size = group.size()
            alive_total -= victim + 1
            # The last step every survivor committed; roll back to it.
            agreed = torch.tensor([step], dtype=torch.int64, device=device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MIN, group=group)
            step = int(agreed.item())
            shrunk_at = step
            w = snapshots[step].clone()
            print("rank %d: shrink_group(%s) took %.3f s: now rank %d of %d; going on from step %d"
                  % (rank, "SHRINK_ABORT" if abort else "SHRINK_DEFAULT", took,
                     group.rank(), size, step), flush=True)
            if size != world - 1 or not (DIES_BEFORE - 1 <= step <= DIES_BEFORE):
                print("rank %d: want %d ranks and step %d or %d" % (
                    rank, world - 1, DIES_BEFORE - 1, DIES_BEFORE), flush=True)
                os._exit(1)
            continue
        if not good:
            print("rank %d: step %d all-reduce gave %s, want %s everywhere"
                  % (rank, step, g[0].item(), float(alive_total)), flush=True)
            os._exit(1)
        if shrunk_at is not None and first_correct is None:
            first_correct = time.time()
            print("rank %d: first correct all-reduce on the shrunk group %.3f s after rank %d "
                  "died" % (rank, first_correct - died, victim), flush=True)
        w -= LR * (g / size)
        step += 1
        snapshots[step] = w.clone()
    torch.cuda.synchronize()
    if shrunk_at is None:
        print("rank %d: rank %d's death was never seen" % (rank, victim), flush=True)
        os._exit(1)
    want = expected_weights(torch, shrunk_at, world, victim)
    got = w.cpu()
    ok = bool(torch.all((got - want).abs() <= 1e-6 * max(1.0, abs(want))).item())
    print("rank %d: final weight %r, want %r (steps 0..%d with %d ranks, the rest with %d): %s"
          % (rank, got[0].item(), want, shrunk_at - 1, world, world - 1,
             "right" if ok else "WRONG"), flush=True)
    t0 = time.time()
    dist.destroy_process_group()
    print("rank %d: destroy_process_group took %.3f s" % (rank, time.time() - t0), flush=True)
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--victim", type=int, default=2)
    parser.add_argument("--abort", action="store_true", help="shrink with SHRINK_ABORT")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--stamp")
    args = parser.parse_args()
    if args.child:
        child(args.ranks, args.victim, args.stamp, args.abort)
    if not 0 < args.victim < args.ranks:
        parser.error("--victim must be a rank of --ranks other than 0 (rank 0 hosts the "
                     "rendezvous a shrink needs)")
    sys.exit(parent(args.ranks, args.victim, args.abort))
