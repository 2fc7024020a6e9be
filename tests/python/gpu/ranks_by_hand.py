"""Starts the ranks of a job by hand, as on separate hosts: RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT (a free port on loopback) in each one's
environment, and LOCAL_RANK its rank, or 0 for every rank with
CC_SHARE_GPU=1 (each then the only rank of its host, all on GPU 0).
"""

import os
import socket
import subprocess
import sys
import time


def run_ranks(ranks, argv, env=None, limit_s=100):
    """Runs `python argv...` as each rank; returns their exit statuses, a rank
    still running after limit_s seconds (all told) killed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shared = os.environ.get("CC_SHARE_GPU") == "1"
    procs = []
    for rank in range(ranks):
        e = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port), LOCAL_RANK="0" if shared else str(rank), **(env or {}))
        procs.append(subprocess.Popen([sys.executable] + list(argv), env=e))
    codes = []
    deadline = time.time() + limit_s
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    print("exit statuses: " + ", ".join("rank %d %d" % rc for rc in enumerate(codes)))
    return codes
