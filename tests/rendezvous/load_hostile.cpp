// Load under hostility, against a real cc-rendezvous daemon process:
// 2,000 idle connections (half silent, half after Hello) and a stream of
// malformed traffic, while a legitimate 64-rank job joins, exchanges a key
// and leaves. Checks the job completes in time, every malformed connection
// is dropped, and the daemon's memory per idle connection stays bounded.
// Prints the daemon's resident memory (for docs/RENDEZVOUS.md).
//   load_hostile PATH/TO/cc-rendezvous
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "tests/common/child_process.hpp"
#include "tests/common/join_msg.hpp"
#include "tests/rendezvous/raw_client.hpp"

using namespace std::chrono_literals;
using cc::test::RawClient;
namespace rv = cc::rv;
using Clock = std::chrono::steady_clock;


namespace {

constexpr int kIdle = 2000;
constexpr int kRanks = 64;
constexpr long kMaxBytesPerIdle = 16 * 1024;  // the bound checked; about 2-3 KiB is expected

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

struct Daemon {
  std::unique_ptr<cc::test::ChildProcess> process;
  pid_t pid = -1;
  int port = 0;
  ~Daemon() {
    if (!process) return;
    ::kill(pid, SIGTERM);
    (void)process->wait_for(5000ms);  // then the destructor kills it
  }
};

bool start_daemon(const char* bin, Daemon* d) {
  // Every malformed connection is a warning: only errors reach our stderr.
  cc::test::ChildOptions o;
  o.args = {bin,         "--bind",
            "127.0.0.1", "--port",
            "0",         "--log-level",
            "error",     "--handshake-timeout-ms",
            "120000",    "--max-connections",
            "10000"};
  try {
    d->process = std::make_unique<cc::test::ChildProcess>(std::move(o));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return false;
  }
  d->pid = d->process->pid();
  // The port: the daemon's one listening socket, found through /proc.
  for (int i = 0; i < 200 && d->port == 0; ++i) {
    std::this_thread::sleep_for(25ms);
    std::ifstream tcp("/proc/" + std::to_string(d->pid) + "/net/tcp");
    std::string line;
    std::getline(tcp, line);
    while (std::getline(tcp, line)) {
      std::istringstream ss(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      ss >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      if (st != "0A") continue;  // LISTEN
      const std::string want = "socket:[" + inode + "]";
      for (int f = 0; f < 16; ++f) {
        char buf[64] = {0};
        const std::string p = "/proc/" + std::to_string(d->pid) + "/fd/" + std::to_string(f);
        const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
        if (n > 0 && want == buf)
          d->port = std::stoi(local.substr(local.find(':') + 1), nullptr, 16);
      }
    }
  }
  return d->port != 0;
}

// Eight ranks a host; rank 0's unique id as long as NCCL's.
rv::Join join_msg(int rank) {
  rv::Join j = cc::test::join_msg(rank, kRanks, "load-host-" + std::to_string(rank % 8), 30000);
  if (rank == 0) j.unique_id = std::vector<uint8_t>(128, 42);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: load_hostile PATH/TO/cc-rendezvous\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_max < 2 * kIdle + 512) {
    std::printf("SKIP: the open-file limit (%lu) is too low for %d connections\n",
                static_cast<unsigned long>(rl.rlim_max), kIdle);
    return 77;
  }
  rl.rlim_cur = rl.rlim_max;  // the daemon inherits it
  setrlimit(RLIMIT_NOFILE, &rl);

  Daemon d;
  if (!start_daemon(argv[1], &d)) {
    std::fprintf(stderr, "FAIL: cc-rendezvous did not start and listen\n");
    return 1;
  }
  const auto t_start = Clock::now();
  std::this_thread::sleep_for(100ms);
  const long rss0 = rss_kib(d.pid);

  // 2,000 idle connections: half never speak, half stop after Hello.
  std::vector<std::unique_ptr<RawClient>> idle;
  idle.reserve(kIdle);
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawClient>(d.port));
    if (i % 2 == 1 && !idle.back()->hello("idle-" + std::to_string(i % 50), "idle-host",
                                          static_cast<uint32_t>(i))) {
      check(false, "idle connection " + std::to_string(i) + " got no Challenge");
      break;
    }
  }
  std::this_thread::sleep_for(300ms);
  const long rss_idle = rss_kib(d.pid);

  // A stream of malformed traffic until the job is done.
  std::atomic<bool> job_done{false};
  std::atomic<int> malformed_sent{0}, malformed_dropped{0};
  std::thread garbage([&] {
    std::mt19937 rng(7);
    while (!job_done.load() || malformed_sent.load() < 200) {
      RawClient c(d.port);
      std::vector<uint8_t> bytes;
      switch (rng() % 4) {
        case 0:  // random bytes
          bytes.resize(1 + rng() % 200);
          for (auto& b : bytes) b = static_cast<uint8_t>(rng());
          break;
        case 1:  // a frame over the maximum
          bytes = rv::encode_frame(1, rv::Hello{"x", "y", 1, "z"});
          bytes[12] = 0xff, bytes[13] = 0xff, bytes[14] = 0xff, bytes[15] = 0x7f;
          break;
        case 2:  // Hello, then a mutated frame
          rv::append_frame(bytes, 1, rv::Hello{"garbage", "g", 1, "g"});
          rv::append_frame(bytes, 2, rv::Set{"k", std::vector<uint8_t>(50, 1)});
          bytes[bytes.size() - 60] ^= 0x5a;
          bytes[bytes.size() - 57] ^= 0xff;
          break;
        default:  // another protocol version
          bytes = rv::encode_frame(1, rv::Hello{"x", "y", 1, "z"});
          bytes[4] = 77;
          break;
      }
      c.send_bytes(bytes);
      ++malformed_sent;
      if (c.closed_within(3s)) ++malformed_dropped;
    }
  });

  for (int i = 0; i < 500 && malformed_sent.load() < 20; ++i) std::this_thread::sleep_for(10ms);

  // The legitimate 64-rank job, while the garbage flows.
  const auto t_job = Clock::now();
  std::atomic<int> joined{0}, exchanged{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      RawClient c(d.port);
      if (!c.hello("load-job", "load-host-" + std::to_string(r % 8),
                   static_cast<uint32_t>(1000 + r)))
        return;
      auto m = c.call(join_msg(r), 30s);
      if (!m || !std::holds_alternative<rv::Joined>(*m)) return;
      const auto& j = std::get<rv::Joined>(*m);
      if (j.unique_id != std::vector<uint8_t>(128, 42) || j.members.size() != 1 ||
          j.members[0].rank != 0)
        return;
      ++joined;
      m = c.call(rv::Set{"addr-" + std::to_string(r), {static_cast<uint8_t>(r)}});
      if (!m || !std::holds_alternative<rv::Ok>(*m)) return;
      const int peer = (r + 1) % kRanks;
      m = c.call(rv::Get{"addr-" + std::to_string(peer), 30000}, 30s);
      if (!m || !std::holds_alternative<rv::Value>(*m) ||
          std::get<rv::Value>(*m).value != std::vector<uint8_t>{static_cast<uint8_t>(peer)})
        return;
      m = c.call(rv::Leave{});
      if (m && std::holds_alternative<rv::Ok>(*m)) ++exchanged;
    });
  }
  for (auto& t : ranks) t.join();
  const auto job_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_job).count();
  job_done = true;
  garbage.join();
  const long rss_peak = rss_kib(d.pid);

  check(joined.load() == kRanks, std::to_string(joined.load()) + " of 64 ranks joined");
  check(exchanged.load() == kRanks,
        std::to_string(exchanged.load()) + " of 64 ranks exchanged keys and left");
  check(job_ms < 30000, "the job took " + std::to_string(job_ms) + " ms (limit 30000)");
  check(malformed_dropped.load() == malformed_sent.load(),
        std::to_string(malformed_dropped.load()) + " of " + std::to_string(malformed_sent.load()) +
            " malformed connections were dropped");
  // The idle connections are all still there (nothing hostile touched them).
  int alive = 0;
  for (auto& c : idle) alive += c->closed_within(0ms) ? 0 : 1;
  check(alive == kIdle,
        std::to_string(alive) + " of " + std::to_string(kIdle) + " idle connections still open");
  const long per_conn = (rss_idle - rss0) * 1024 / kIdle;
  check(rss0 > 0 && rss_idle > 0, "could not read the daemon's resident memory");
  check(per_conn < kMaxBytesPerIdle, "an idle connection costs " + std::to_string(per_conn) +
                                         " bytes (limit " + std::to_string(kMaxBytesPerIdle) + ")");
  check(rss_peak - rss0 < 64 * 1024,
        "the daemon grew by " + std::to_string(rss_peak - rss0) + " KiB (limit 64 MiB)");

  std::printf(
      "daemon RSS: %ld KiB at start, %ld KiB with %d idle connections (%ld bytes each), %ld KiB "
      "after the "
      "job and %d malformed connections\n",
      rss0, rss_idle, kIdle, per_conn, rss_peak, malformed_sent.load());
  std::printf(
      "64-rank job: %lld ms under load; total %lld ms\n", static_cast<long long>(job_ms),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_start).count()));
  if (failures == 0) std::printf("ok\n");
  return failures == 0 ? 0 : 1;
}
