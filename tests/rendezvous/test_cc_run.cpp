// cc-run as a user sees it: the ranks' environment, prefixed output, a failing
// rank stopping the others, signals, bad arguments. CC_RUN names the binary.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "tests/common/child_process.hpp"
#include "tests/common/free_port.hpp"

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

struct Result {
  int code = -1;  // exit code, 128+signal, or -1 when it had to be killed
  std::string out, err;
  long long ms = 0;
};

// Runs cc-run with args (through the tests' ChildProcess); sends
// `signal_after` (if any) after `signal_ms`. Killed at `limit_ms`, so no test
// can hang.
Result run_cc_run(const std::vector<std::string>& args, int limit_ms = 30000, int signal_after = 0,
                  int signal_ms = 0) {
  const char* exe = std::getenv("CC_RUN");
  REQUIRE(exe != nullptr);
  cc::test::ChildOptions o;
  o.args = {exe};
  o.args.insert(o.args.end(), args.begin(), args.end());
  o.pipe_stdout = true;
  o.pipe_stderr = true;
  const auto t0 = Clock::now();
  cc::test::ChildProcess child(std::move(o));
  Result r;
  bool signalled = signal_after == 0;
  child.collect(&r.out, &r.err, [&](milliseconds since) {
    if (!signalled && since.count() >= signal_ms) {
      child.signal(signal_after);
      signalled = true;
    }
    if (since.count() < limit_ms) return true;
    child.signal(SIGKILL);
    return false;
  });
  const int status = child.reap();
  r.ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.code = WTERMSIG(status) == SIGKILL ? -1 : 128 + WTERMSIG(status);
  return r;
}

// cc-run with args (and `signal_after` sent after `signal_ms`), which must end
// within 10 s with exit status `code`; its output is shown when not.
Result run_ending(const std::vector<std::string>& args, int code, int signal_after = 0,
                  int signal_ms = 0) {
  Result r = run_cc_run(args, 30000, signal_after, signal_ms);
  INFO(r.out << r.err);
  CHECK(r.code == code);
  CHECK(r.ms < 10000);
  return r;
}

}  // namespace

using Catch::Contains;

TEST_CASE("cc-run: ranks get the launch environment") {
  const Result r =
      run_cc_run({"-n", "3", "--job-id", "envjob", "--", "sh", "-c",
                  "echo \"env $CC_RANK $RANK $CC_WORLD_SIZE $WORLD_SIZE $CC_LOCAL_RANK "
                  "$LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $CC_JOB_ID $CC_RENDEZVOUS\"; "
                  "test \"$MASTER_PORT\" -gt 0 && echo port-ok"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    CHECK_THAT(r.out, Contains("[rank " + n + "] env " + n + " " + n + " 3 3 " + n + " " + n +
                               " 3 127.0.0.1 envjob external\n"));
    CHECK_THAT(r.out, Contains("[rank " + n + "] port-ok\n"));
  }
}

TEST_CASE("cc-run --share-gpu: each rank its own host to NCCL on one GPU, said once") {
  const std::string show =
      "echo \"env $CC_SHARE_GPU $LOCAL_RANK $CC_LOCAL_RANK $LOCAL_WORLD_SIZE $CC_DEVICE "
      "$NCCL_P2P_DISABLE $NCCL_SHM_DISABLE host=$NCCL_HOSTID\"";
  const Result r = run_cc_run({"-n", "3", "--share-gpu", "--", "sh", "-c", show});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  std::set<std::string> host_ids;
  for (int i = 0; i < 3; ++i) {
    const std::string prefix = "[rank " + std::to_string(i) + "] env 1 0 0 1 0 1 1 host=";
    const size_t at = r.out.find(prefix);
    REQUIRE(at != std::string::npos);
    const size_t from = at + prefix.size();
    const std::string id = r.out.substr(from, r.out.find('\n', from) - from);
    CHECK_THAT(id, Contains("-rank" + std::to_string(i)));
    host_ids.insert(id);
  }
  CHECK(host_ids.size() == 3);
  // One notice for the node, not one per rank.
  const std::string notice = "--share-gpu: the 3 rank(s) of this node share GPU 0";
  CHECK_THAT(r.err, Contains(notice) && Contains("timings say nothing about a real machine"));
  CHECK(r.err.find(notice) == r.err.rfind(notice));

  // Without the flag none of it is set: ranks on one GPU stay refused.
  const Result plain = run_cc_run({"-n", "2", "--", "sh", "-c", show});
  CHECK(plain.code == 0);
  CHECK_THAT(plain.out, Contains("[rank 1] env  1 1 2    host=\n"));
  CHECK_THAT(plain.err, !Contains("--share-gpu"));
}

TEST_CASE("cc-run: a fresh job id per single-node run, and nodes other than 0 start no server") {
  const Result a = run_cc_run({"-n", "1", "--", "sh", "-c", "echo \"job=$CC_JOB_ID\""});
  const Result b = run_cc_run({"-n", "1", "--", "sh", "-c", "echo \"job=$CC_JOB_ID\""});
  CHECK(a.code == 0);
  CHECK(b.code == 0);
  CHECK_THAT(a.out, Contains("job=cc-run-"));
  CHECK(a.out != b.out);

  const Result n1 =
      run_cc_run({"-n", "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                  "--master-port", "1", "--job-id", "multi", "--", "sh", "-c",
                  "echo \"r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK p=$MASTER_PORT\""});
  INFO(n1.out << n1.err);
  CHECK(n1.code == 0);
  CHECK_THAT(n1.out, Contains("[rank 2] r=2 w=4 l=0 p=1\n"));
  CHECK_THAT(n1.out, Contains("[rank 3] r=3 w=4 l=1 p=1\n"));
}

TEST_CASE("cc-run: a tcp://host:port address carries its port to the server and the ranks") {
  const std::string port = std::to_string(cc::test::free_port());
  const std::string addr = "tcp://127.0.0.1:" + port;
  // Node 0 serves that port; the ranks get the address and no MASTER_PORT.
  const Result n0 =
      run_cc_run({"-n", "2", "--master-addr", addr, "--", "bash", "-c",
                  "echo \"a=$MASTER_ADDR p=${MASTER_PORT:-none}\"; exec 3<>/dev/tcp/127.0.0.1/" +
                      port + " && echo served"});
  INFO(n0.out << n0.err);
  CHECK(n0.code == 0);
  CHECK_THAT(n0.out, Contains("[rank 1] a=" + addr + " p=none\n"));
  CHECK_THAT(n0.out, Contains("[rank 0] served\n"));
  // Another node needs no --master-port with it.
  const Result n1 = run_cc_run({"-n", "1", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                                addr, "--", "sh", "-c", "echo \"p=${MASTER_PORT:-none}\""});
  CHECK(n1.code == 0);
  CHECK_THAT(n1.out, Contains("[rank 1] p=none\n"));
  // A host with its port in it is a usage error, with the address's message.
  const Result bad = run_cc_run({"-n", "1", "--master-addr", "127.0.0.1:" + port, "--", "true"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.err, Contains("--master-addr: the rendezvous address '127.0.0.1:" + port +
                               "' has a port in it: write tcp://127.0.0.1:" + port));
}

TEST_CASE("cc-run: every line is prefixed, stdout and stderr, partial lines too") {
  const Result r = run_cc_run({"-n", "2", "--", "sh", "-c",
                               "echo \"out-$RANK\"; echo \"err-$RANK\" >&2; printf 'one\\ntwo\\n'; "
                               "printf \"tail-$RANK\""});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  for (const std::string n : {"0", "1"}) {
    CHECK_THAT(r.out, Contains("[rank " + n + "] out-" + n + "\n"));
    CHECK_THAT(r.out, Contains("[rank " + n + "] tail-" + n + "\n"));
    CHECK_THAT(r.err, Contains("[rank " + n + "] err-" + n + "\n"));
  }
  // no line without a prefix
  size_t start = 0;
  while (start < r.out.size()) {
    CHECK(r.out.compare(start, 6, "[rank ") == 0);
    start = r.out.find('\n', start) + 1;
    if (start == 0) break;
  }
}

TEST_CASE("cc-run: a failing rank stops the others and sets the exit status") {
  const Result r = run_ending({"-n", "3", "--grace-ms", "300", "--", "sh", "-c",
                               "if [ \"$RANK\" = 1 ]; then echo dying; exit 3; fi; sleep 60"},
                              3);
  CHECK_THAT(r.out, Contains("[rank 1] dying"));
  CHECK_THAT(r.err, Contains("cc-run: rank 1 (pid ") &&
                        Contains(") exited with status 3; stopping the other ranks"));
}

TEST_CASE("cc-run: a rank killed by a signal gives 128+signal") {
  const Result r = run_ending({"-n", "2", "--grace-ms", "200", "--", "sh", "-c",
                               "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 60"},
                              137);
  CHECK_THAT(r.err, Contains("rank 0 (pid ") && Contains("status 137 (killed by signal 9"));
}

TEST_CASE("cc-run: ranks that ignore SIGTERM are killed after the grace period") {
  run_ending({"-n", "2", "--grace-ms", "300", "--", "sh", "-c",
              "trap '' TERM; if [ \"$RANK\" = 0 ]; then exit 5; fi; while :; do sleep 0.1; done"},
             5);
}

TEST_CASE("cc-run: SIGTERM is passed to the ranks") {
  const Result r = run_ending({"-n", "2", "--", "sh", "-c", "echo started; sleep 60"},
                              128 + SIGTERM, SIGTERM, 500);
  CHECK_THAT(r.err, Contains("passing it to the ranks"));
}

TEST_CASE("cc-run: bad arguments and a missing program") {
  Result r = run_cc_run({"--", "true"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("-n N (ranks on this node) is required"));
  r = run_cc_run({"-n", "0", "--", "true"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("-n=0 is out of range 1..4096"));
  r = run_cc_run({"-n", "x", "--", "true"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("not an integer"));
  r = run_cc_run({"-n", "1", "--bogus", "--", "true"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("unknown option '--bogus'"));
  r = run_cc_run({"-n", "1"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("no program given"));
  r = run_cc_run({"-n", "1", "--nnodes", "2", "--node-rank", "1", "--", "true"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("needs --master-addr"));
  r = run_cc_run({"-n", "1", "--", "no-such-program-of-cc"});
  CHECK(r.code == 127);
  CHECK_THAT(r.err, Contains("cannot find the program 'no-such-program-of-cc'"));
  r = run_cc_run({"--help"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Contains("usage: cc-run -n N"));
}
