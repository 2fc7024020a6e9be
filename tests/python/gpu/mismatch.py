"""One rank of a "cc" process group all-reduces a tensor of another shape:
every rank raises torch.distributed.DistBackendError with cc's message, which
name both calls, within seconds (cc's call check), not at the deadline.

    python mismatch.py                 # 2 ranks by hand; rank 1 is the odd one
    python mismatch.py --ranks 4       # 4 ranks, rank 1 odd
    python mismatch.py --at-end        # the odd call is the last one before
                                       # destroy_process_group, which raises


With CC_SHARE_GPU=1 in the environment every rank shares GPU 0, each the
only rank of its host (LOCAL_RANK 0; libcc makes it its own host to NCCL).
Prints each rank's message and how long after the odd call it raised.
"""

import argparse
import os
import sys
import time

from ranks_by_hand import run_ranks

ODD = 1
COUNT = 1 << 16
ODD_COUNT = 4096


def parent(ranks, at_end):
    argv = [__file__, "--child"] + (["--at-end"] if at_end else [])
    codes = run_ranks(ranks, argv, env={"CC_TIMEOUT_MS": "60000"})
    ok = all(code == 0 for code in codes)
    print("PASS" if ok else "FAIL: want every rank to raise cc's words and exit 0")
    return 0 if ok else 1


def judge(e, rank, what, seconds, want):
    """Exits 0 if e is a DistBackendError whose message holds every string of
    `want` and names rank ODD, else 1; prints the message and what it lacks."""
    import torch.distributed as dist

    message = str(e)
    print("rank %d: %s %s after %.2f s:\n%s"
          % (rank, what, type(e).__name__, seconds, message), flush=True)
    missing = [w for w in want + ["rank %d (host" % ODD] if w not in message]
    if missing:
        print("rank %d: the message lacks %s" % (rank, missing), flush=True)
    good = isinstance(e, dist.DistBackendError) and not missing
    os._exit(0 if good else 1)


def child_at_end():
    """Ten equal all-reduces, then rank ODD's last one has one element more,
    and every rank destroys the group at once: nothing compared it yet
    (the check runs at heartbeat pace), so destroy_process_group must."""
    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("cc")
    x = torch.ones(COUNT, device="cuda")
    for _ in range(10):
        dist.all_reduce(x)
    last = torch.ones(COUNT + 1 if rank == ODD else COUNT, device="cuda")
    dist.all_reduce(last)
    start = time.time()
    try:
        dist.destroy_process_group()
    except Exception as e:
        judge(e, rank, "destroy_process_group raised", time.time() - start,
              ["op #11", "%d x FLOAT32" % COUNT, "%d x FLOAT32" % (COUNT + 1)])
    print("rank %d: destroy_process_group returned without a word" % rank, flush=True)
    os._exit(1)


def child():
    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("cc")
    x = torch.ones(COUNT, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert x[0].item() == dist.get_world_size()
    # The odd rank's tensor has another shape; every later call is alike.
    odd = torch.ones(ODD_COUNT, device="cuda")
    start = time.time()
    deadline = start + 20
    first = True
    while time.time() < deadline:
        try:
            dist.all_reduce(odd if first and rank == ODD else x)
            first = False
            torch.cuda.synchronize()
        except Exception as e:
            judge(e, rank, "raised", time.time() - start,
                  ["diverged", "%d x FLOAT32" % COUNT, "%d x FLOAT32" % ODD_COUNT])
    print("rank %d: no error 20 s after the odd call" % rank, flush=True)
    os._exit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--at-end", action="store_true")
    args = parser.parse_args()
    if args.child:
        child_at_end() if args.at_end else child()
    if args.ranks < 2:
        parser.error("--ranks must be 2 or more")
    sys.exit(parent(args.ranks, args.at_end))
