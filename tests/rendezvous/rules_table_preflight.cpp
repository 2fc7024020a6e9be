// The reachability test's cases of the conformance table (see
// rules_table.hpp): real sockets on loopback, one listening (or refusing)
// port per rank, and real connections to each rank's targets.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "rendezvous/rules/event_rules.hpp"
#include "tests/rendezvous/rules_table.hpp"

namespace cc::test {
namespace {

namespace rules = rv::rules;

using std::chrono::milliseconds;

// A TCP socket bound to 127.0.0.1 on an ephemeral port: listening (a
// connection is accepted by the kernel) or not (a connection is refused).
class Endpoint {
 public:
  explicit Endpoint(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    if (listening) REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof(a);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
  }
  ~Endpoint() { ::close(fd_); }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  uint32_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint32_t port_ = 0;
};

// One connection to a target, as a member's probe reports it. It runs on a
// rank's thread, so no Catch macros (they are not thread-safe): a failed
// socket() or inet_pton() is put in *broken for the test's thread.
rv::ProbeResult probe(const rv::ProbeTarget& t, std::string* broken) {
  rv::ProbeResult r;
  r.rank = t.rank;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    *broken = std::string("socket: ") + std::strerror(errno);
    return r;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(t.port));
  if (::inet_pton(AF_INET, t.addr.c_str(), &a.sin_addr) != 1) {
    *broken = "inet_pton: '" + t.addr + "' is not an IPv4 address";
    ::close(fd);
    return r;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    r.reached = true;
    r.words = "reached";
  } else {
    r.error = errno;
    r.words = std::string("connect: ") + std::strerror(errno);
  }
  ::close(fd);
  return r;
}

std::vector<int32_t> ranks_of(const std::vector<rv::ProbeTarget>& targets) {
  std::vector<int32_t> out;
  for (const rv::ProbeTarget& t : targets) out.push_back(t.rank);
  return out;
}

// What one rank's thread came to: its status, or what broke in the test's
// own socket calls (then it stopped there).
struct PreflightOutcome {
  Status status;
  std::string broken;
};

bool refuses(const PreflightCase& c, int rank) {
  for (int r : c.refusing)
    if (r == rank) return true;
  return false;
}

}  // namespace

std::vector<PreflightCase> preflight_cases() {
  using Step = rv::PreflightStep;
  const std::string cuda = "rank 2: cudaSetDevice(3) failed: invalid device ordinal";
  const std::string at = "communicator 1 of job '{job}'";
  // Three ranks on three hosts: 0 tests 1; 1 tests 2 and, the first of its
  // host, the root; 2's successor is the root.
  const std::vector<std::vector<int32_t>> three_hosts = {{1}, {2, 0}, {0}};
  return {
      {.name = "preflight-passes", .targets = three_hosts},
      {.name = "preflight-one-host", .one_host = true, .step = Step::passed},
      {.name = "preflight-refused",
       .refusing = {1},
       .targets = three_hosts,
       .code = CC_ERR_SYSTEM,
       .words = "the reachability test before NCCL's init failed, so NCCL would hang or fail "
                "there: rank 0 (host host-a, pid 1000) cannot connect to rank 1 (host host-b, pid "
                "1001) at 127.0.0.1:{port}, the address NCCL will use for it (interface lo, "
                "NCCL's own choice): connect: Connection refused. Likely cause: NCCL will use the "
                "loopback address 127.0.0.1 on host host-b, which no other host reaches. Fix: set "
                "NCCL_SOCKET_IFNAME on host host-b to an interface the other hosts reach. "
                "(CC_PREFLIGHT=0 skips this test.)"},
      {.name = "preflight-init-failed",
       .goes = 2,
       .reason = cuda,
       .code = CC_ERR_PEER_FAILED,
       .words = "rank 2 (host host-c, pid 1002) could not start: " + cuda},
      {.name = "preflight-abort",
       .goes = 1,
       .how = Going::abort,
       .reason = "rank 1 saw a NaN",
       .code = CC_ERR_PEER_FAILED,
       .words = "rank 1 (host host-b, pid 1001) aborted during init: rank 1 saw a NaN"},
      {.name = "preflight-rank-0-dies",
       .goes = 0,
       .how = Going::dies,
       .code = CC_ERR_PEER_FAILED,
       .words = "rank 0 (host host-a, pid 1000) was lost during init: " +
                rules::closed_without_leaving_words() +
                ". It crashed, was killed or lost its network: look at its output"},
      {.name = "preflight-off",
       .off = 1,
       .step = Step::skipped,
       .words = "rank 1 (host host-b, pid 1001) runs with CC_PREFLIGHT=0, so " + at +
                " skips the reachability test before NCCL's init"},
      {.name = "preflight-silent",
       .silent = 2,
       .timeout_ms = 1000,
       .step = Step::skipped,
       .words = "rank 2 of " + at +
                " did not take part in the reachability test within 1000 ms (a cc without "
                "it?), so NCCL's init starts untested"},
  };
}

void check_preflight_case(const Connect& connect, const PreflightCase& c, const BackendWords& b) {
  auto ranks = join_world(connect, c.world);
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::string port;
  for (int r = 0; r < c.world; ++r) {
    endpoints.push_back(std::make_unique<Endpoint>(!refuses(c, r)));
    if (port.empty() && refuses(c, r)) port = std::to_string(endpoints.back()->port());
  }
  if (c.goes >= 0) {
    std::unique_ptr<rv::Client>& going = ranks[static_cast<size_t>(c.goes)];
    if (c.how == Going::dies) {
      going.reset();
    } else {
      const Status s = c.how == Going::abort ? going->abort(c.reason)
                                             : going->init_failed(1, c.reason, milliseconds(5000));
      INFO(s.message);
      REQUIRE(s.ok());
    }
  }
  auto ready_of = [&](int r) {
    rv::PreflightReady ready;
    ready.comm_number = 1;
    ready.enabled = r != c.off;
    ready.host_key = c.one_host ? "host-a" : "host-" + std::string(1, static_cast<char>('a' + r));
    ready.addr = "127.0.0.1";
    ready.port = endpoints[static_cast<size_t>(r)]->port();
    ready.ifname = "lo";
    ready.timeout_ms = c.timeout_ms;
    return ready;
  };
  if (c.off >= 0) {  // it waits for nobody
    rv::PreflightPlan plan;
    const Status s = ranks[static_cast<size_t>(c.off)]->preflight_ready(ready_of(c.off), &plan);
    INFO(s.message);
    REQUIRE(s.ok());
    CHECK(plan.step == rv::PreflightStep::skipped);
    CHECK(plan.note == "CC_PREFLIGHT=0");
  }
  std::vector<rv::PreflightPlan> plans(static_cast<size_t>(c.world));
  std::vector<char> answered(static_cast<size_t>(c.world), 0);  // got a plan
  std::vector<int> members;
  std::vector<std::future<PreflightOutcome>> outcomes;
  const auto asked = std::chrono::steady_clock::now();
  for (int r = 0; r < c.world; ++r) {
    if (r == c.goes || r == c.silent || r == c.off) continue;
    rv::Client* rank = ranks[static_cast<size_t>(r)].get();
    rv::PreflightPlan* plan = &plans[static_cast<size_t>(r)];
    char* got = &answered[static_cast<size_t>(r)];
    members.push_back(r);
    // No Catch macros on this thread: its outcome is checked below.
    outcomes.push_back(std::async(std::launch::async,
                                  [rank, plan, got, ready = ready_of(r)]() -> PreflightOutcome {
      if (Status s = rank->preflight_ready(ready, plan); !s.ok()) return {s, {}};
      *got = 1;
      if (plan->step != rv::PreflightStep::probe) return {Status::success(), {}};
      rv::PreflightReport report;
      report.comm_number = 1;
      std::string broken;
      for (const rv::ProbeTarget& t : plan->targets) {
        report.results.push_back(probe(t, &broken));
        if (!broken.empty()) return {Status::success(), broken};
      }
      report.timeout_ms = ready.timeout_ms;
      return {rank->preflight_report(report), {}};
    }));
  }
  std::string words = c.words;
  for (size_t at = words.find("{port}"); at != std::string::npos; at = words.find("{port}"))
    words.replace(at, 6, port);
  words = expand(words, c.name, b);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const size_t r = static_cast<size_t>(members[i]);
    INFO("rank " << r);
    // At once, or at the case's deadline (with 4 s to spare for etcd's watches).
    REQUIRE(outcomes[i].wait_until(asked + milliseconds(c.timeout_ms) + milliseconds(4000)) ==
            std::future_status::ready);
    const PreflightOutcome o = outcomes[i].get();
    if (!o.broken.empty()) FAIL(o.broken);
    const Status& s = o.status;
    INFO(s.message);
    CHECK(s.code == c.code);
    CHECK((s.ok() ? plans[r].note : s.message) == words);
    if (answered[r] != 0) CHECK(plans[r].step == c.step);
    if (!c.targets.empty()) CHECK(ranks_of(plans[r].targets) == c.targets[r]);
  }
}

}  // namespace cc::test
