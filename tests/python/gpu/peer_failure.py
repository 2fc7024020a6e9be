"""A rank of a "cc" process group dies mid-run: the survivor's next
operation raises torch.distributed.DistBackendError with cc's message, within
cc's detection time rather than torch's 10-minute watchdog.

    python peer_failure.py --victim 1              # starts 2 ranks by hand, checks the survivor
    python peer_failure.py --ranks 8 --victim 5    # 8 ranks, 7 survivors

With CC_SHARE_GPU=1 in the environment every rank shares GPU 0, each the
only rank of its host (LOCAL_RANK 0; libcc makes it its own host to NCCL).
Prints how long each survivor took to raise after the victim died, and the message.
"""

import argparse
import os
import sys
import tempfile
import time

from ranks_by_hand import run_ranks


def parent(ranks, victim):
    stamp = tempfile.mktemp(prefix="cc-victim-")
    codes = run_ranks(ranks, [__file__, "--child", "--victim", str(victim), "--stamp", stamp])
    ok = all(code == (3 if rank == victim else 0) for rank, code in enumerate(codes))
    print("PASS" if ok else "FAIL: want the victim to exit 3 and every survivor 0")
    return 0 if ok else 1


def child(victim, stamp):
    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("cc")
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert x[0].item() == dist.get_world_size()
    if rank == victim:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
        os._exit(3)  # no goodbye: as a crash or a kill would leave
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            dist.all_reduce(x)
            torch.cuda.synchronize()
        except Exception as e:
            now = time.time()
            died = float(open(stamp).read()) if os.path.exists(stamp) else now
            words = str(e)
            print("rank %d raised %s %.2f s after rank %d died:\n%s"
                  % (rank, type(e).__name__, now - died, victim, words), flush=True)
            good = isinstance(e, dist.DistBackendError) and "cc backend" in words
            if victim != 0:  # rank 0's death also takes the rendezvous it hosted
                good = good and "rank %d" % victim in words
            os._exit(0 if good else 1)
    print("rank %d: no error 60 s after rank %d died" % (rank, victim), flush=True)
    os._exit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--victim", type=int, required=True)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--stamp")
    args = parser.parse_args()
    if args.child:
        child(args.victim, args.stamp)
    if not 0 <= args.victim < args.ranks:
        parser.error("--victim must be a rank of --ranks")
    sys.exit(parent(args.ranks, args.victim))
