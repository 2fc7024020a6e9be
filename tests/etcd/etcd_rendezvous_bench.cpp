// cc-etcd-rendezvous-bench: N simulated ranks join one communicator through
// the etcd backend, as real ranks do: each has its own connections, a thread
// and a membership lease, connects (asks etcd for its members), joins (lease
// grant, one transaction, one watch for the result; rank 0 puts the id) and
// then watches the members. Prints the wall time from the moment every rank
// is let go to the last join's return, for each run and their median.
//
// Without --address it starts a local etcd cluster of --members members on
// 127.0.0.1 (data under /dev/shm when it has room), the way the etcd tests do,
// and then runs the ranks at a lower CPU priority (nice 10): on one small machine
// a thousand busy rank threads would otherwise starve etcd's Raft heartbeats,
// which real ranks on other machines cannot do.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/etcd/backend.hpp"
#include "tests/etcd/bench_setup.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace etcd = cc::rv::etcd;

const char* kAbout =
    "Runs N simulated ranks, each with its own etcd connections, thread and\n"
    "membership lease, joining one communicator through the etcd backend; RUNS\n"
    "times, each a fresh job. Without --address it starts an etcd cluster of M\n"
    "members on 127.0.0.1.";

struct Result {
  double connect_ms = 0;  // until every rank had connected
  double join_ms = 0;     // from the start until the last join returned
  int failed = 0;
  std::string first_error;
  double client_cpu_s = 0;  // this process (the ranks), during the run
  double etcd_cpu_s = 0;    // the etcd members started here, during the run
};

std::vector<pid_t> g_etcd_pids;

double etcd_cpu() {
  using cc::test::cpu_seconds;
  double total = 0;
  for (pid_t p : g_etcd_pids) total += cpu_seconds(p);
  return total;
}

Result run_once(const std::string& address, int n, const std::string& job) {
  std::vector<std::unique_ptr<etcd::Backend>> ranks(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> connected{0};
  std::atomic<int> failed{0};
  std::string first_error;
  std::vector<Clock::time_point> connect_done(static_cast<size_t>(n)),
      join_done(static_cast<size_t>(n));
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      auto fail = [&](const std::string& why) {
        if (failed.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(mu);
          first_error = "rank " + std::to_string(r) + ": " + why;
        }
      };
      etcd::BackendOptions o;
      o.address = address;
      o.job_id = job;
      o.prefix = "bench";
      o.connect_timeout = milliseconds(60000);
      o.request_timeout = milliseconds(60000);
      o.member = true;
      std::unique_ptr<etcd::Backend> b;
      if (cc::Status s = etcd::Backend::connect(o, &b); !s.ok()) return fail(s.message);
      connect_done[static_cast<size_t>(r)] = Clock::now();
      ++connected;
      cc::rv::Join j;
      j.info.rank = r;
      j.info.world_size = n;
      j.info.comm_number = 1;
      j.info.host = "bench-host-" + std::to_string(r / 8);
      j.info.pid = static_cast<uint32_t>(100000 + r);
      j.info.nccl_version = 22809;
      j.info.gpu_uuid = "GPU-" + std::to_string(r % 8);
      if (r == 0) j.unique_id.assign(128, 0x5a);
      j.timeout_ms = 60000;
      cc::rv::Joined joined;
      if (cc::Status s = b->join(j, &joined); !s.ok()) return fail(s.message);
      join_done[static_cast<size_t>(r)] = Clock::now();
      if (joined.unique_id != std::vector<uint8_t>(128, 0x5a)) return fail("a wrong unique id");
      ranks[static_cast<size_t>(r)] = std::move(b);
    });
  }
  const auto start = Clock::now();
  const double self0 = cc::test::cpu_seconds(::getpid()), etcd0 = etcd_cpu();
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  Result res;
  res.client_cpu_s = cc::test::cpu_seconds(::getpid()) - self0;
  res.etcd_cpu_s = etcd_cpu() - etcd0;
  res.failed = failed.load();
  res.first_error = first_error;
  const auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - start).count();
  };
  for (int r = 0; r < n; ++r) {
    res.connect_ms = std::max(res.connect_ms, ms(connect_done[static_cast<size_t>(r)]));
    res.join_ms = std::max(res.join_ms, ms(join_done[static_cast<size_t>(r)]));
  }
  // Clean leaves (the last one removes the generation's keys), not timed.
  std::vector<std::thread> leavers;
  for (int r = 0; r < n; ++r)
    if (ranks[static_cast<size_t>(r)])
      leavers.emplace_back([&, r] { (void)ranks[static_cast<size_t>(r)]->leave(); });
  for (auto& t : leavers) t.join();
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  cc::test::BenchArgs args;
  int& n = args.n;
  int& runs = args.runs;
  int& members = args.members;
  std::string& address = args.address;
  cc::cli::CommandLine command_line(
      "usage: cc-etcd-rendezvous-bench [-n N] [-r RUNS] [--members M | --address etcd://...]", 15);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  cc::test::add_bench_options(app, &args, 1000000, "simulated ranks (default 1024)");
  if (const auto exit_status =
          cc::test::parse_bench_arguments(command_line, argc, argv, "cc-etcd-rendezvous-bench"))
    return *exit_status;
  cc::test::raise_open_files();

  std::unique_ptr<cc::test::EtcdCluster> cluster;
  if (address.empty()) {
    if (!cc::test::start_bench_cluster("cc-etcd-rendezvous-bench", members, &address, &cluster,
                                         &args))
      return 1;
    for (int m = 0; m < members; ++m) g_etcd_pids.push_back(cluster->pid(m));
  }
  std::printf("etcd rendezvous: %d ranks against %s (%s)\n", n, address.c_str(),
              cluster ? (std::to_string(members) + "-member cluster started here, data in " +
                         cluster->dir())
                            .c_str()
                      : "given cluster");
  std::vector<double> joins;
  int rc = 0;
  for (int run = 0; run < runs; ++run) {
    if (run > 0) {  // the last run's leases and watches are gone; etcd settles
      std::this_thread::sleep_for(std::chrono::seconds(2));
      if (cluster && !cluster->wait_for_leader(std::chrono::seconds(20))) {
        std::printf("run %d: etcd has no leader; stopping\n", run + 1);
        rc = 1;
        break;
      }
    }
    const std::string job = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(run);
    Result r = run_once(address, n, job);
    if (r.failed > 0) {
      std::printf("run %d: %d of %d ranks failed; first: %s\n", run + 1, r.failed, n,
                  r.first_error.c_str());
      rc = 1;
      continue;
    }
    std::printf("run %d: all %d ranks connected by %.0f ms, joined by %.0f ms (CPU: ranks %.2f s",
                run + 1, n, r.connect_ms, r.join_ms, r.client_cpu_s);
    if (!g_etcd_pids.empty()) std::printf(", etcd %.2f s", r.etcd_cpu_s);
    std::printf(")\n");
    std::fflush(stdout);
    joins.push_back(r.join_ms);
  }
  if (!joins.empty()) {
    std::sort(joins.begin(), joins.end());
    std::printf("median of %zu runs: %d ranks joined through etcd in %.0f ms\n", joins.size(), n,
                joins[joins.size() / 2]);
  }
  return rc;
}
