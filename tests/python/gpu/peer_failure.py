"""A rank of a "cc" process group dies mid-run: the survivor's next
operation raises torch.distributed.DistBackendError with cc's words, within
cc's detection time rather than torch's 10-minute watchdog.

    python peer_failure.py --victim 1     # starts both ranks by hand, checks the survivor

Prints how long the survivor took to raise after the victim died, and the words.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


def parent(victim):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stamp = tempfile.mktemp(prefix="cc-victim-")
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, __file__, "--child", "--victim",
                                       str(victim), "--stamp", stamp], env=env))
    codes = [p.wait(timeout=300) for p in procs]
    print("exit statuses: rank 0 %d, rank 1 %d" % tuple(codes))
    survivor = 1 - victim
    ok = codes[victim] == 3 and codes[survivor] == 0
    print("PASS" if ok else "FAIL: want the victim to exit 3 and the survivor 0")
    return 0 if ok else 1


def child(victim, stamp):
    import torch
    import torch.distributed as dist

    import cc.torch  # noqa: F401 (registers the backend)

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("cc")
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert x[0].item() == 2.0
    if rank == victim:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
        os._exit(3)  # no goodbye: as a crash or a kill would leave
    deadline = time.time() + 120
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
            if victim == 1:
                good = good and "rank 1" in words
            os._exit(0 if good else 1)
    print("rank %d: no error 120 s after rank %d died" % (rank, victim), flush=True)
    os._exit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--victim", type=int, required=True, choices=(0, 1))
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--stamp")
    args = parser.parse_args()
    if args.child:
        child(args.victim, args.stamp)
    sys.exit(parent(args.victim))
