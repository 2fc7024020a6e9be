// cc-rendezvous-bench: N simulated ranks against a rendezvous server, each on
// its own TCP connection: hello, set its key, add a counter (the last adder
// sets "done"), wait for "done", get a neighbour's key. Prints the wall time
// from the first connect to the last completion. With --start the ranks
// instead start a communicator: they join one generation, then (a second
// run) also take the reachability test's two steps (endpoint, report), and
// the test's added time is printed per rank. --start-pair measures what the
// test adds to a healthy start of 2 ranks (start_pair.cpp), --agent-pair
// what cc-run's node agent adds to one (agent_pair.cpp). --abuse and
// --core-events measure the server under abuse (abuse.cpp).
//
// The ranks are driven by one epoll loop over non-blocking sockets, so the
// client side costs little besides the kernel's TCP work. Each rank keeps the
// protocol of a real rank: one request at a time, the next one sent when the
// reply to the previous one arrived (no pipelining, no shared connections).
//
// TLS: with CC_TLS_CERT and CC_TLS_KEY its own server speaks TLS, and with
// CC_TLS_CA its ranks do (rendezvous/tls); each run then also prints the
// CPU time this process spent (both ends when the server is in it).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <asio.hpp>

#include "common/log.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/tls/env.hpp"
#include "rendezvous/tls/socket_io.hpp"
#include "tools/cc-rendezvous-bench/abuse.hpp"
#include "tools/cc-rendezvous-bench/agents.hpp"
#include "tools/cc-rendezvous-bench/child_server.hpp"
#include "tools/cc-rendezvous-bench/agent_pair.hpp"
#include "tools/cc-rendezvous-bench/start_pair.hpp"
#include "tools/cli/cli.hpp"

namespace {

namespace rv = cc::rv;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr const char* kAbout =
    "Runs N simulated ranks (default: 1024, 4096 and 16384 in turn), each on its\n"
    "own connection: hello, set its key, add a counter (the last adder sets\n"
    "'done'), get 'done' (waits on the server), get its neighbour's key. One\n"
    "request at a time per rank, as a real rank does.\n"
    "Without --addr/--port it starts its own server (in this process, or in a\n"
    "child process when the open-file limit cannot hold both ends).\n"
    "With --start the ranks instead start a communicator: they join one\n"
    "generation; then again, with the reachability test's two steps after the\n"
    "join (the connections between ranks are reported made, not made), and\n"
    "what the test adds per rank is printed. --start-pair measures what the\n"
    "test adds to a healthy start of 2 ranks. --abuse runs a healthy job\n"
    "beside each abuse of a server and prints its heartbeat gaps and the\n"
    "server's memory; --core-events times the server's core alone.";

// No progress at all for this long fails the run (a server that stopped
// answering); a healthy run of 16384 ranks takes about a second.
constexpr auto kStall = std::chrono::seconds(60);

enum class Step : uint8_t {
  connecting,
  hello,
  set,
  add,
  set_done,
  get_done,
  get_neighbour,
  join,
  preflight_ready,
  preflight_report,
  finished
};

// store: the key-value workload. join: a communicator's join. preflight:
// the join, then the reachability test's endpoint and report.
enum class Workload : uint8_t { store, join, preflight };

struct Rank {
  int fd = -1;
  int index = 0;
  Step step = Step::connecting;
  std::vector<uint8_t> out;  // request bytes the socket did not take yet
  std::vector<uint8_t> in;   // a reply that arrived in pieces
  std::unique_ptr<rv::tls::Stream> tls;  // with CC_TLS_CA; freed before the socket closes
};

struct Run {
  int n = 0;
  int window = 1024;
  Workload workload = Workload::store;
  int ranks_per_host = 8;
  size_t targets = 0;  // reachability test connections the plans asked for
  Clock::time_point last_joined;
  std::string job;
  sockaddr_storage server{};
  socklen_t server_len = 0;
  bool spread_loopback = false;
  int epfd = -1;
  std::vector<Rank> ranks;
  int next_to_start = 0;
  int done = 0;
  int failed = 0;
  std::string first_error;
  Clock::time_point last_done;
  Clock::time_point last_progress;
  std::vector<uint8_t> frame;  // scratch for encoding one request
  std::shared_ptr<rv::tls::ClientContext> tls;
};

// The ranks' TLS (CC_TLS_CA), opened once; null in clear.
std::shared_ptr<rv::tls::ClientContext>& client_tls() {
  static std::shared_ptr<rv::tls::ClientContext> context;
  return context;
}

double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

void close_rank(Rank& r) {
  r.tls.reset();
  if (r.fd >= 0) ::close(r.fd);
  r.fd = -1;
}

ssize_t send_some(Rank& r, const uint8_t* data, size_t size) {
  short events = 0;
  return rv::tls::send_some(r.fd, r.tls.get(), data, size, &events);
}

void start_more(Run& run);

void fail(Run& run, Rank& r, const std::string& why) {
  if (r.step == Step::finished) return;
  const bool was_connecting = r.step == Step::connecting || r.step == Step::hello;
  r.step = Step::finished;
  if (run.failed++ == 0) run.first_error = "rank " + std::to_string(r.index) + ": " + why;
  close_rank(r);
  if (was_connecting) start_more(run);
}

// Writes what is queued; false when the rank failed.
bool flush(Run& run, Rank& r) {
  while (!r.out.empty()) {
    const ssize_t k = send_some(r, r.out.data(), r.out.size());
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return true;  // EPOLLOUT resumes
      fail(run, r, std::string("send: ") + std::strerror(errno));
      return false;
    }
    r.out.erase(r.out.begin(), r.out.begin() + k);
  }
  return true;
}

bool request(Run& run, Rank& r, Step next, uint32_t rid, const rv::Message& m) {
  r.step = next;
  if (r.out.empty()) {
    // The usual case: the whole frame goes in one send, from the scratch buffer.
    run.frame.clear();
    rv::append_frame(run.frame, rid, m);
    const ssize_t k = send_some(r, run.frame.data(), run.frame.size());
    if (k == static_cast<ssize_t>(run.frame.size())) return true;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail(run, r, std::string("send: ") + std::strerror(errno));
      return false;
    }
    r.out.assign(run.frame.begin() + (k > 0 ? k : 0), run.frame.end());
    return true;
  }
  rv::append_frame(r.out, rid, m);
  return flush(run, r);
}

std::string rank_key(int i) { return "rank/" + std::to_string(i); }

void finish_rank(Run& run, Rank& r) {
  r.step = Step::finished;
  close_rank(r);  // SO_LINGER 0: a reset, no TIME_WAIT on this side
  r.in = {};
  r.out = {};
  run.last_done = Clock::now();
  ++run.done;
}

// Rank i of a simulated job: its host is i / ranks_per_host.
rv::Join join_of(const Run& run, int i) {
  rv::Join j;
  j.info.rank = i;
  j.info.world_size = run.n;
  j.info.host = "bench-host-" + std::to_string(i / run.ranks_per_host);
  j.info.pid = static_cast<uint32_t>(i + 1);
  j.info.nccl_version = 22809;
  if (i == 0) j.unique_id.assign(128, 0x5a);
  j.timeout_ms = 600000;
  return j;
}

rv::PreflightReady ready_of(const Run& run, int i) {
  const int host = i / run.ranks_per_host;
  rv::PreflightReady m;
  m.host_key = "bench-host-" + std::to_string(host);
  m.addr = "10.0." + std::to_string(host / 256) + "." + std::to_string(host % 256);
  m.port = static_cast<uint32_t>(20000 + i % run.ranks_per_host);
  m.ifname = m.route_ifname = "eth0";
  m.route_addr = m.addr;
  m.timeout_ms = 600000;
  return m;
}

// One reply arrived for the rank's outstanding request: check it, send the next.
void on_reply(Run& run, Rank& r, const rv::Message& reply) {
  if (const auto* e = std::get_if<rv::Error>(&reply))
    return fail(run, r, "server error: " + e->message);
  switch (r.step) {
    case Step::hello: {
      if (!std::holds_alternative<rv::Challenge>(reply))
        return fail(run, r, "hello: unexpected reply");
      start_more(run);  // accepted and answered: let the next one connect
      if (run.workload != Workload::store) {
        request(run, r, Step::join, 2, join_of(run, r.index));
        return;
      }
      const std::string mine = rank_key(r.index);
      request(run, r, Step::set, 2, rv::Set{mine, std::vector<uint8_t>(mine.begin(), mine.end())});
      return;
    }
    case Step::set:
      if (!std::holds_alternative<rv::Ok>(reply)) return fail(run, r, "set: unexpected reply");
      request(run, r, Step::add, 3, rv::Add{"count", 1});
      return;
    case Step::add: {
      const auto* count = std::get_if<rv::Integer>(&reply);
      if (count == nullptr) return fail(run, r, "add: unexpected reply");
      if (count->value == run.n) {
        request(run, r, Step::set_done, 4, rv::Set{"done", std::vector<uint8_t>(1, 1)});
      } else {
        request(run, r, Step::get_done, 5, rv::Get{"done", 600000});
      }
      return;
    }
    case Step::set_done:
      if (!std::holds_alternative<rv::Ok>(reply)) return fail(run, r, "set done: unexpected reply");
      request(run, r, Step::get_done, 5, rv::Get{"done", 600000});
      return;
    case Step::get_done:
      if (!std::holds_alternative<rv::Value>(reply))
        return fail(run, r, "get done: unexpected reply");
      request(run, r, Step::get_neighbour, 6, rv::Get{rank_key((r.index + 1) % run.n), 0});
      return;
    case Step::get_neighbour: {
      const auto* v = std::get_if<rv::Value>(&reply);
      const std::string want = rank_key((r.index + 1) % run.n);
      if (v == nullptr || std::string(v->value.begin(), v->value.end()) != want)
        return fail(run, r, "wrong neighbour value");
      finish_rank(run, r);
      return;
    }
    case Step::join:
      if (!std::holds_alternative<rv::Joined>(reply)) return fail(run, r, "join: unexpected reply");
      run.last_joined = Clock::now();
      if (run.workload == Workload::join) return finish_rank(run, r);
      request(run, r, Step::preflight_ready, 3, ready_of(run, r.index));
      return;
    case Step::preflight_ready: {
      const auto* plan = std::get_if<rv::PreflightPlan>(&reply);
      if (plan == nullptr) return fail(run, r, "preflight-ready: unexpected reply");
      if (plan->step != rv::PreflightStep::probe) return finish_rank(run, r);
      rv::PreflightReport report;
      report.timeout_ms = 600000;
      for (const auto& t : plan->targets) report.results.push_back({t.rank, true, 0, "reached"});
      run.targets += plan->targets.size();
      request(run, r, Step::preflight_report, 4, report);
      return;
    }
    case Step::preflight_report:
      if (!std::holds_alternative<rv::Ok>(reply))
        return fail(run, r, "preflight-report: unexpected reply");
      finish_rank(run, r);
      return;
    default:
      return fail(run, r, "a reply nobody asked for");
  }
}

// Splits what arrived into frames (normally exactly one) and handles them.
void on_bytes(Run& run, Rank& r, const uint8_t* data, size_t len) {
  std::span<const uint8_t> avail(data, len);
  if (!r.in.empty()) {
    r.in.insert(r.in.end(), data, data + len);
    avail = std::span<const uint8_t>(r.in);
  }
  size_t used = 0;
  while (r.step != Step::finished && avail.size() - used >= rv::kHeaderSize) {
    rv::FrameHeader h;
    if (rv::parse_header(avail.subspan(used, rv::kHeaderSize), rv::Limits{}, &h) !=
        rv::DecodeError::none)
      return fail(run, r, "bad reply header");
    if (avail.size() - used < rv::kHeaderSize + h.length) break;
    rv::Message reply;
    if (rv::decode_message(h.type, avail.subspan(used + rv::kHeaderSize, h.length), rv::Limits{},
                           &reply) != rv::DecodeError::none)
      return fail(run, r, "bad reply payload");
    used += rv::kHeaderSize + h.length;
    run.last_progress = Clock::now();
    on_reply(run, r, reply);
  }
  if (r.step == Step::finished) return;
  if (r.in.empty()) {
    r.in.assign(data + used, data + len);
  } else {
    r.in.erase(r.in.begin(), r.in.begin() + static_cast<std::ptrdiff_t>(used));
  }
}

void start_rank(Run& run, int i) {
  Rank& r = run.ranks[static_cast<size_t>(i)];
  r.index = i;
  r.fd = ::socket(run.server.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (r.fd < 0) return fail(run, r, std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(r.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const linger no_linger{1, 0};  // close resets: no TIME_WAIT on this side
  ::setsockopt(r.fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof no_linger);
  if (run.spread_loopback) {
    // Real ranks come from many hosts. From one address, the kernel's search
    // for a free source port grows with every open connection (it dominated
    // the time at N=16384), so spread the ranks over 127.0.0.0/8.
    ::setsockopt(r.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((127u << 24) | (2u + static_cast<uint32_t>(i % 4096)));
    if (::bind(r.fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0)
      return fail(run, r, std::string("bind: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u32 = static_cast<uint32_t>(i);
  if (::epoll_ctl(run.epfd, EPOLL_CTL_ADD, r.fd, &ev) != 0)
    return fail(run, r, std::string("epoll_ctl: ") + std::strerror(errno));
  // Not rendezvous/connect_by, on purpose: a window of connects is in flight
  // at once on this one epoll loop (one blocking connect at a time would time
  // the client, not the server), and the loop's stall deadline (kStall)
  // bounds them all.
  if (::connect(r.fd, reinterpret_cast<const sockaddr*>(&run.server), run.server_len) != 0 &&
      errno != EINPROGRESS)
    return fail(run, r, std::string("connect: ") + std::strerror(errno));
  if (run.tls) {
    ssl_st* ssl = run.tls->connect_on(r.fd, "127.0.0.1");
    if (ssl == nullptr) return fail(run, r, "no TLS session: " + rv::tls::openssl_errors());
    r.tls = std::make_unique<rv::tls::Stream>(ssl);
  }
  // On loopback the handshake is usually over when connect returns; if not,
  // the hello waits in r.out for EPOLLOUT.
  request(run, r, Step::hello, 1,
          rv::Hello{run.job, "bench", static_cast<uint32_t>(i), "cc-rendezvous-bench"});
}

void start_more(Run& run) {
  if (run.next_to_start < run.n) start_rank(run, run.next_to_start++);
}

void on_event(Run& run, Rank& r, uint32_t events, std::vector<uint8_t>& buf) {
  if (r.step == Step::finished) return;
  // TLS: a write may wait for the socket to be readable (the handshake).
  if ((events & EPOLLOUT) || r.tls) {
    if (!r.out.empty() && !flush(run, r)) return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
    for (;;) {
      short wanted = 0;
      const ssize_t k = rv::tls::recv_some(r.fd, r.tls.get(), buf.data(), buf.size(), &wanted);
      if (k > 0) {
        on_bytes(run, r, buf.data(), static_cast<size_t>(k));
        if (r.step == Step::finished) return;
        // Drained (edge-triggered: a new edge comes with new data); TLS
        // reads one record at a time, so it reads on until EAGAIN.
        if (!r.tls && static_cast<size_t>(k) < buf.size()) break;
        continue;
      }
      if (k == 0) return fail(run, r, "the server closed the connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return fail(run, r, std::string("recv: ") + std::strerror(errno));
    }
    if (events & (EPOLLERR | EPOLLHUP)) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(r.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      return fail(run, r, err != 0 ? std::strerror(err) : "connection hung up");
    }
  }
}

// One run; *took gets the wall time from the first connect to the last
// completion, *joined that to the last join (start workloads).
bool run_once(int n, const tcp::endpoint& server, int window, Workload workload, int per_host,
              double* took = nullptr, double* joined = nullptr, size_t* targets = nullptr) {
  Run run;
  run.n = n;
  run.window = window;
  run.workload = workload;
  run.ranks_per_host = per_host;
  std::memcpy(&run.server, server.data(), server.size());
  run.server_len = static_cast<socklen_t>(server.size());
  run.spread_loopback = server.address().is_v4() && server.address().is_loopback();
  run.job = "bench-" + std::to_string(n) + "-" + std::to_string(getpid()) + "-" +
            std::to_string(Clock::now().time_since_epoch().count());
  run.ranks.resize(static_cast<size_t>(n));
  run.tls = client_tls();
  const double cpu0 = cpu_ms();
  run.epfd = ::epoll_create1(EPOLL_CLOEXEC);
  if (run.epfd < 0) {
    std::printf("N=%-6d FAILED: epoll_create1: %s\n", n, std::strerror(errno));
    return false;
  }
  std::vector<epoll_event> events(1024);
  std::vector<uint8_t> buf(64 * 1024);
  const auto t0 = Clock::now();
  run.last_progress = t0;
  for (int k = 0; k < window && run.next_to_start < n; ++k) start_more(run);
  while (run.done + run.failed < n) {
    const int got = ::epoll_wait(run.epfd, events.data(), static_cast<int>(events.size()), 1000);
    if (got < 0 && errno != EINTR) {
      run.first_error = std::string("epoll_wait: ") + std::strerror(errno);
      run.failed = n - run.done;
      break;
    }
    for (int k = 0; k < got; ++k)
      on_event(run, run.ranks[events[static_cast<size_t>(k)].data.u32],
               events[static_cast<size_t>(k)].events, buf);
    if (got == 0 && Clock::now() - run.last_progress > kStall) {
      run.first_error = "no reply for " + std::to_string(kStall.count()) + " s (" +
                        std::to_string(run.done) + " ranks done)";
      run.failed = n - run.done;
      break;
    }
  }
  for (Rank& r : run.ranks) close_rank(r);
  ::close(run.epfd);
  const double ms = std::chrono::duration<double, std::milli>(run.last_done - t0).count();
  if (run.failed > 0) {
    std::printf("N=%-6d FAILED: %d of %d ranks failed; first: %s\n", n, run.failed, n,
                run.first_error.c_str());
    return false;
  }
  const double cpu = cpu_ms() - cpu0;
  if (took != nullptr) *took = ms;
  if (joined != nullptr)
    *joined = std::chrono::duration<double, std::milli>(run.last_joined - t0).count();
  if (targets != nullptr) *targets = run.targets;
  if (workload == Workload::store) {
    std::printf("N=%-6d %9.1f ms  (%.1f us per rank; CPU %.1f ms, %.1f us per rank%s)\n", n,
                ms, ms * 1000.0 / n, cpu, cpu * 1000.0 / n, run.tls ? ", TLS" : "");
    std::fflush(stdout);
  }
  return true;
}

// The join alone, then the join and the reachability test; the difference
// is the test's cost at the server, per rank.
bool run_start(int n, const tcp::endpoint& server, int window, int per_host) {
  double join_ms = 0, all_ms = 0, joined_ms = 0;
  size_t targets = 0;
  const double cpu0 = cpu_ms();
  if (!run_once(n, server, window, Workload::join, per_host, &join_ms)) return false;
  const double join_cpu = cpu_ms() - cpu0;
  std::printf("N=%-6d join %8.1f ms (%.1f us per rank); CPU %.1f ms (%.1f us per rank)%s\n", n,
              join_ms, join_ms * 1000.0 / n, join_cpu, join_cpu * 1000.0 / n,
              client_tls() ? ", TLS" : "");
  if (!run_once(n, server, window, Workload::preflight, per_host, &all_ms, &joined_ms, &targets))
    return false;
  std::printf(
      "N=%-6d join %8.1f ms (%.1f us per rank); join + reachability test %8.1f ms: the test "
      "adds %.1f ms (%.1f us per rank) after the last join, %.2f connections per rank, %d ranks "
      "per host\n",
      n, join_ms, join_ms * 1000.0 / n, all_ms, all_ms - joined_ms,
      (all_ms - joined_ms) * 1000.0 / n, static_cast<double>(targets) / n, per_host);
  std::fflush(stdout);
  return true;
}

rlim_t raise_fd_limit() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  std::string addr;
  int port = 0;
  int window = 1024;
  bool start = false;
  int per_host = 8;
  int pair_rounds = 0;
  int agent_pair_rounds = 0;
  int abuse_members = 0;
  int core_events = 0;
  cc::tools::rendezvous_bench::AgentsRun agents;
  int agent_nodes = 0;
  cc::tools::cli::CommandLine command_line(
      "usage: cc-rendezvous-bench [-n N]... [--addr ADDR --port PORT] [--window W] "
      "[--start [--ranks-per-host R]] [--start-pair K] [--agent-pair K] [--abuse M] "
      "[--core-events N]",
      15);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.add_option_function<std::vector<std::string>>(
         "-n",
         [&](const std::vector<std::string>& values) {
           for (const auto& v : values)
             sizes.push_back(static_cast<int>(cc::tools::cli::number("-n", v, 1, 10000000)));
         },
         "ranks of one run; repeat for more runs")
      ->option_text("N")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  app.add_option("--addr", addr, "the server to run against (with --port)")->option_text("ADDR");
  cc::tools::cli::add_number(app, "--port", "PORT", 1, 65535, &port, "its port (with --addr)");
  cc::tools::cli::add_number(app, "--window", "W", 1, 10000000, &window,
                      "ranks between connect and the server's first answer at once\n"
                      "(default 1024): beyond the kernel's listen backlog (somaxconn)\n"
                      "SYNs are dropped and cost a 1 s retransmit");
  app.add_flag("--start", start,
               "a communicator's start instead (default N: 1024): the join, then\n"
               "the join and the reachability test's two steps; prints what the\n"
               "test adds per rank");
  cc::tools::cli::add_number(app, "--ranks-per-host", "R", 1, 10000000, &per_host,
                      "with --start: ranks on one simulated host (default 8)");
  cc::tools::cli::add_number(app, "--start-pair", "K", 1, 100000, &pair_rounds,
                      "what the reachability test adds to a healthy start of 2 ranks on\n"
                      "loopback as two hosts (cc_comm_init's path without NCCL): K starts\n"
                      "with it and K without, medians");
  cc::tools::cli::add_number(app, "--agent-pair", "K", 1, 100000, &agent_pair_rounds,
                      "what cc-run's node agent adds to a start of 2 ranks of one host\n"
                      "against a running server (cc_comm_init's path without NCCL):\n"
                      "K starts straight to the server and K through an agent, medians;\n"
                      "with --addr etcd://HOST:PORT against that etcd cluster instead");
  cc::tools::cli::add_number(app, "--abuse", "M", 1, 1000000, &abuse_members,
                      "a healthy job of M members (256 in docs/RENDEZVOUS.md)\n"
                      "heartbeating beside each abuse of a server in a child\n"
                      "process: its largest heartbeat gap and the server's peak\n"
                      "memory per abuse, then how long a SIGTERM takes");
  cc::tools::cli::add_number(app, "--core-events", "N", 1, 100000000, &core_events,
                      "the server's core alone, no sockets: the longest call while\n"
                      "one Set wakes N waiters, N waits expire together, and a\n"
                      "connection closes holding N parked gets");
  cc::tools::cli::add_number(app, "--agents", "NODES", 1, 1000000, &agent_nodes,
                      "a job of NODES nodes through node agents (the real agent\n"
                      "code, its ranks simulated in memory) against a server in a\n"
                      "child process: the join, the first heartbeats, one rank's\n"
                      "death told to all, a hung node told to all, a shrink, a leave");
  cc::tools::cli::add_number(app, "--ranks-per-node", "R", 1, 4096, &agents.ranks_per_node,
                      "with --agents: ranks per node (default 8)");
  int window_ms = static_cast<int>(agents.heartbeat_window.count());
  cc::tools::cli::add_number(app, "--heartbeat-window", "MS", 100, 600000, &window_ms,
                      "with --agents: the silence after which a node is failed\n"
                      "(default 5000)");
  app.add_option("--etcd", agents.etcd,
                 "with --agents: the server is a cc-rendezvous --etcd daemon\n"
                 "elected in this etcd cluster, and each node first asks etcd\n"
                 "where it is")
      ->option_text("URL");
  command_line.add_help();
  if (const auto exit_status =
          command_line.parse_or_exit(argc, argv, "argument", [](const std::string& message) {
            std::fprintf(stderr, "cc-rendezvous-bench: %s (see --help)\n", message.c_str());
          }))
    return *exit_status;
  if (pair_rounds > 0) return cc::tools::rendezvous_bench::run_start_pair(pair_rounds) ? 0 : 1;
  if (agent_pair_rounds > 0)
    return cc::tools::rendezvous_bench::run_agent_pair(agent_pair_rounds) ? 0
                                                                                                : 1;
  if (agent_nodes > 0) {
    raise_fd_limit();
    agents.nodes = agent_nodes;
    agents.window = window;
    agents.heartbeat_window = std::chrono::milliseconds(window_ms);
    return cc::tools::rendezvous_bench::run_agents(agents) ? 0 : 1;
  }
  if (core_events > 0) return cc::tools::rendezvous_bench::run_core_events(core_events) ? 0 : 1;
  if (abuse_members > 0) {
    raise_fd_limit();
    return cc::tools::rendezvous_bench::run_abuse(abuse_members) ? 0 : 1;
  }
  if (sizes.empty()) sizes = start ? std::vector<int>{1024} : std::vector<int>{1024, 4096, 16384};
  int max_n = 0;
  for (int n : sizes) max_n = std::max(max_n, n);

  const rlim_t limit = raise_fd_limit();
  std::printf("open-file limit raised to %llu\n", static_cast<unsigned long long>(limit));
  if (static_cast<rlim_t>(max_n) + 64 > limit) {
    std::fprintf(
        stderr,
        "cc-rendezvous-bench: %d connections do not fit the open-file limit of %llu; raise "
        "the hard limit (ulimit -Hn, LimitNOFILE) or use a smaller -n\n",
        max_n, static_cast<unsigned long long>(limit));
    return 1;
  }

  std::unique_ptr<rv::Server> server;
  cc::tools::rendezvous_bench::ChildServer child;
  if (!addr.empty() || port != 0) {
    if (addr.empty() || port == 0) {
      std::fprintf(stderr, "cc-rendezvous-bench: give both --addr and --port\n");
      return 2;
    }
    std::printf("against the server at %s:%d\n", addr.c_str(), port);
  } else if (2 * static_cast<rlim_t>(max_n) + 64 <= limit) {
    rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    cc::Status st = rv::tls::server_context_from(cc::settings::process_env(), &o.tls);
    if (st.ok()) st = rv::Server::start(o, &server);
    if (!st.ok()) {
      std::fprintf(stderr, "cc-rendezvous-bench: %s\n", st.message.c_str());
      return 1;
    }
    addr = "127.0.0.1";
    port = server->port();
    std::printf("embedded server on %s:%d (its own thread in this process)\n", addr.c_str(), port);
  } else {
    child = cc::tools::rendezvous_bench::fork_server();
    port = child.port;
    if (child.pid < 0) {
      std::fprintf(stderr, "cc-rendezvous-bench: could not start a server process\n");
      return 1;
    }
    addr = "127.0.0.1";
    std::printf(
        "server in a child process on %s:%d (both ends of %d connections exceed this "
        "process's open-file limit)\n",
        addr.c_str(), port, max_n);
  }
  const rv::tls::ClientFiles tls_files = rv::tls::client_files_from(cc::settings::process_env());
  if (tls_files.on()) {
    if (cc::Status st = rv::tls::ClientContext::open(tls_files, &client_tls()); !st.ok()) {
      std::fprintf(stderr, "cc-rendezvous-bench: %s\n", st.message.c_str());
      return 1;
    }
    std::printf("the ranks speak TLS (CC_TLS_CA %s)\n", tls_files.ca.c_str());
  }
  std::fflush(stdout);

  asio::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(addr, ec), static_cast<unsigned short>(port));
  if (ec) {
    asio::io_context io;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(addr, std::to_string(port), ec);
    if (ec || results.empty()) {
      std::fprintf(stderr, "cc-rendezvous-bench: cannot resolve %s: %s\n", addr.c_str(),
                   ec.message().c_str());
      return 1;
    }
    ep = results.begin()->endpoint();
  }

  bool ok = true;
  for (int n : sizes)
    ok = (start ? run_start(n, ep, window, per_host)
                : run_once(n, ep, window, Workload::store, per_host)) &&
         ok;

  if (server) server->stop();
  if (child.pid > 0) cc::tools::rendezvous_bench::stop_server(child, std::chrono::seconds(30));
  return ok ? 0 : 1;
}
