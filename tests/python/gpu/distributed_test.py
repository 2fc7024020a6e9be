"""torch's own distributed tests on backend "nccl" and on backend "cc", every
rank on GPU 0, with the same patches for both (distributed_test_ranks.py says
which). The two backends run side by side, each a process that runs the
tests one after the other, each test spawning its ranks as torch's
test/distributed/test_distributed_spawn.py does.

    distributed_test.py [--ranks N] [--budget S] [--per-test S] [--logs DIR]
                        [--tests NAME,...]

The tests: the list below, then (unless --tests names them) this torch's
other CUDA collective, point-to-point and object tests, until the budget
ends. Prints one line per test and backend (PASS, FAIL, SKIP; NOT RUN when
the budget ran out before it started; ABSENT when this torch has no such
test; a test still running when the budget ran out is a FAIL), the tests
that passed on nccl and not on cc, each with its reason where one is named
below, those cc never reached, and last:

    distributed test: nccl N passed, cc N passed, only-nccl: [NAME, ...]

only-nccl holds the tests that passed on nccl and ran on cc without
passing. Exit status 0 when each of them is named below with the reason it
cannot pass on cc, and nccl passed at least one; else 1.
Each backend's whole output (its ranks' included) is in
LOGS/distributed-test-<ranks>ranks-<backend>.log, its results in the .json
beside it.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# What runs one backend's tests (a stand-in's path in the CPU test of this script).
RANKS_SCRIPT = os.environ.get("CC_DT_RANKS_SCRIPT") or os.path.join(HERE, "distributed_test_ranks.py")

# The tests run first, in this order: the operations cc added for them, then
# the other CUDA collectives, point to point and object collectives.
TESTS = [
    "test_gather_cuda",
    "test_scatter_cuda",
    "test_scatter_cuda_complex",
    "test_all_gather_v_cuda",
    "test_reduce_scatter_v_cuda",
    "test_all_to_all_cuda",
    "test_all_to_all_cuda_complex",
    "test_all_to_all_full_group_cuda",
    "test_gather_object",
    "test_scatter_object_list",
    "test_get_backend",
    "test_all_gather_cuda",
    "test_all_gather_cuda_complex",
    "test_all_gather_into_cat_tensor_cuda",
    "test_all_gather_into_stack_tensor_cuda",
    "test_all_gather_object_default_pg",
    "test_all_gather_object_subgroup",
    "test_reduce_scatter_tensor_cuda",
    "test_all_to_all_single_equal_split_cuda",
    "test_all_to_all_single_unequal_split_cuda",
    "test_all_to_all_single_equal_split_cuda_complex",
    "test_all_to_all_single_unequal_split_cuda_complex",
    "test_broadcast_cuda",
    "test_broadcast_object_list",
    "test_reduce_sum_cuda",
    "test_reduce_sum_cuda_twice",
    "test_all_reduce_sum_cuda",
    "test_all_reduce_sum_cuda_async",
    "test_all_reduce_sum_cuda_complex",
    "test_all_reduce_result_cuda",
    "test_barrier_cuda",
    "test_barrier_full_group_cuda",
    "test_send_recv_nccl",
    "test_send_recv_nccl_autograd",
    "test_batch_isend_irecv_nccl",
    "test_batch_isend_irecv_self_nccl",
    "test_batch_isend_irecv_no_rank_zero_nccl",
    "test_batch_isend_irecv_ring_exchange_nccl",
    "test_batch_isend_irecv_tensor_err",
    "test_batch_isend_irecv_op_err",
    "test_batch_isend_irecv_op_list_err",
    "test_nccl_backend_bool_allreduce",
    "test_nccl_backend_bool_allgather",
    "test_nccl_backend_bool_reduce",
    "test_nccl_backend_bool_broadcast",
    "test_coalescing_manager",
    "test_coalescing_manager_async",
    "test_get_rank",
    "test_destroy_group",
    "test_get_rank_size_group",
    "test_destroy_full_group",
    "test_get_rank_size_full_group",
]

# Tests that pass on nccl and cannot on cc, and why. A reason is what the
# test asserts or reads that is not an operation's result.
REASONS = {
    "test_get_backend": "asserts the backend's name: dist.get_backend() is \"cc\", not \"nccl\"",
    # Where torch's dispatch does not refuse the CPU tensor first (its message
    # then are "No backend type associated with device type cpu", the same
    # on both backends).
    "test_batch_isend_irecv_tensor_err": "asserts ProcessGroupNCCL's own words for a CPU tensor "
                                         "(\"Tensors must be CUDA and dense\"); cc refuses it "
                                         "in its own",
}


def unique(names):
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def start_backend(backend, args, logs, deadline):
    """Starts one backend's run in a session of its own; (process, log, results path,
    its TEMP_DIR)."""
    stem = os.path.join(logs, "distributed-test-%dranks-%s" % (args.ranks, backend))
    temp_dir = tempfile.mkdtemp(prefix="cc-dt-%s-" % backend)
    os.makedirs(os.path.join(temp_dir, "barrier"), exist_ok=True)
    env = dict(os.environ,
               CC_DT_BACKEND=backend,
               CC_DT_TESTS=",".join(args.tests),
               CC_DT_DISCOVER="1" if args.discover else "0",
               CC_DT_RESULTS=stem + ".json",
               CC_DT_PER_TEST=str(args.per_test),
               CC_DT_DEADLINE=str(deadline),
               WORLD_SIZE=str(args.ranks),
               BACKEND="nccl",
               TEMP_DIR=temp_dir,
               CC_SHARE_GPU="1",
               NCCL_P2P_DISABLE="1",
               NCCL_SHM_DISABLE="1",
               PYTHONUNBUFFERED="1")
    env.pop("NCCL_HOSTID", None)  # each rank sets its own
    log = open(stem + ".log", "w")
    proc = subprocess.Popen([sys.executable, RANKS_SCRIPT], stdout=log, stderr=subprocess.STDOUT,
                            env=env, cwd=HERE, start_new_session=True)
    return proc, log, stem + ".json", temp_dir


def stop(proc):
    """Ends a backend's run and the ranks it spawned (its session)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def read_results(path):
    """(test names in the order run, results by name) of one backend's run; a
    test it was running when stopped is a FAIL."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return [], {}
    results = data.get("results", {})
    for r in results.values():
        if r.get("status") == "RUNNING":
            r["status"], r["why"] = "FAIL", "still running when the run's budget ended"
    return data.get("tests", []), results


def compare(tests, nccl, cc):
    """(table lines, passed on nccl, passed on cc, only-nccl (passed on nccl,
    ran on cc and did not pass), those of them without a named reason, and
    those that passed on nccl and never ran on cc)."""
    lines = []
    width = max(len(t) for t in tests)
    for name in tests:
        a = nccl.get(name, {}).get("status", "NOT RUN")
        b = cc.get(name, {}).get("status", "NOT RUN")
        lines.append("  %-*s  nccl %-7s  cc %-7s" % (width, name, a, b))

    def passed(results):
        return [t for t in tests if results.get(t, {}).get("status") == "PASS"]

    def ran(results, name):
        return results.get(name, {}).get("status", "NOT RUN") not in ("NOT RUN", "ABSENT")

    nccl_passed, cc_passed = passed(nccl), passed(cc)
    only_nccl = [t for t in nccl_passed if t not in cc_passed and ran(cc, t)]
    unreached = [t for t in nccl_passed if not ran(cc, t)]
    unexplained = [t for t in only_nccl if t not in REASONS]
    return lines, nccl_passed, cc_passed, only_nccl, unexplained, unreached


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--budget", type=float, default=300.0,
                        help="seconds for the whole run, both backends side by side")
    parser.add_argument("--per-test", type=float, default=45.0,
                        help="seconds one test may take")
    parser.add_argument("--logs", default=None, help="folder for each backend's log and results")
    parser.add_argument("--tests", default=None,
                        help="comma-separated test names, run alone (default: the list here, "
                             "then this torch's other collective tests)")
    args = parser.parse_args(argv)
    args.discover = not args.tests
    args.tests = unique(args.tests.split(",") if args.tests else TESTS)
    logs = args.logs or tempfile.mkdtemp(prefix="cc-distributed-test-")
    os.makedirs(logs, exist_ok=True)

    # Stopped from outside (the suite's timeout): the finally below still
    # stops both runs and the ranks they spawned, which live in sessions of
    # their own.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    start = time.time()
    # No test starts after this; the grace after it lets a started one end.
    deadline = start + args.budget - args.per_test
    runs = {b: start_backend(b, args, logs, deadline) for b in ("nccl", "cc")}
    print("distributed test: %d ranks on GPU 0, %d tests named%s, nccl and cc side by side, "
          "%.0f s; logs in %s" % (args.ranks, len(args.tests),
                                 " and this torch's other collective tests" if args.discover else "",
                                 args.budget, logs), flush=True)
    try:
        while any(p.poll() is None for p, _, _, _ in runs.values()):
            if time.time() - start > args.budget + min(15.0, args.per_test):
                for backend, (p, _, _, _) in runs.items():
                    if p.poll() is None:
                        print("distributed test: %s still running after %.0f s; stopped"
                              % (backend, time.time() - start), flush=True)
                        stop(p)
                break
            time.sleep(0.5)
    finally:
        for p, log, _, temp_dir in runs.values():
            stop(p)
            log.close()
            shutil.rmtree(temp_dir, ignore_errors=True)

    order, results = list(args.tests), {}
    for backend, (_, _, path, _) in runs.items():
        names, results[backend] = read_results(path)
        order += [n for n in names if n not in order]
    for backend in ("nccl", "cc"):
        rc = runs[backend][0].returncode
        if rc not in (0, None):
            print("distributed test: the %s run ended with status %s (see its log)" % (backend, rc))
    lines, nccl_passed, cc_passed, only_nccl, unexplained, unreached = compare(
        order, results["nccl"], results["cc"])
    print("\n".join(lines))
    for backend in ("nccl", "cc"):
        for name in order:
            r = results[backend].get(name, {})
            if r.get("status") == "FAIL":
                why = (r.get("why") or "").strip().splitlines()
                print("  %s FAIL %s: %s" % (backend, name, why[-1] if why else "?"))
    for name in only_nccl:
        print("  only-nccl %s: %s" % (name, REASONS.get(name, "NO REASON NAMED")))
    only_cc = [t for t in cc_passed if t not in nccl_passed]
    if only_cc:
        print("  only-cc: [%s]" % ", ".join(only_cc))
    if unreached:
        print("  passed on nccl, not reached on cc in the budget: [%s]" % ", ".join(unreached))
    print("distributed test: nccl %d passed, cc %d passed, only-nccl: [%s]"
          % (len(nccl_passed), len(cc_passed), ", ".join(only_nccl)), flush=True)
    if not nccl_passed:
        print("distributed test: nothing passed on nccl: the harness, not cc, is broken here")
        return 1
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
