// cc-etcd-store-bench: the store's C API (cc.h) on etcd at scale, N clients
// as threads of this process, each with its own cc_store_connect to an
// etcd:// address (libcc reaches etcd through its plugin, libcc-etcd.so).
//
//   --mode barrier  the store program of a barrier: each client connects,
//                   sets its own key, adds 1 to "arrived", waits for "go"
//                   (set by the client whose add returned N) and reads its
//                   neighbour's key. Timed from letting the clients go
//                   (before they connect) to the last one's read.
//   --mode adds     N clients, connected first (not timed), add 1 to one key
//                   at once. Timed from letting them go to the last add.
// Both check that the adds returned exactly 1..N. Each run is a fresh job;
// the median of the runs is printed.
//
// Without --address it starts a local etcd cluster of --members members on
// 127.0.0.1 (data under /dev/shm when it has room), as cc-etcd-rendezvous-bench
// does, and then runs the clients at nice 10 so they cannot starve etcd's Raft
// heartbeats on one small machine.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cc/cc.h"
#include "tests/etcd/bench_setup.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char* kAbout =
    "Runs N clients of the store's C API against etcd, as threads, each with its\n"
    "own connection: a barrier program (--mode barrier) or N adds of 1 on one\n"
    "key at once (--mode adds); RUNS times, each a fresh job. Without --address\n"
    "it starts an etcd cluster of M members on 127.0.0.1.";

constexpr int kTimeoutMs = 60000;  // every call's deadline

struct Outcome {
  double ms = 0;
  std::string error;  // empty: every client did its part and the adds were 1..N
};

// N threads held until go(), then each runs body(i); any failure is kept.
class Clients {
 public:
  explicit Clients(int n) : n_(n) {}

  void start(const std::function<std::string(int)>& body) {
    for (int i = 0; i < n_; ++i)
      threads_.emplace_back([this, i, body] {
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return go_; });
        }
        if (std::string why = body(i); !why.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          if (error_.empty()) error_ = "client " + std::to_string(i) + ": " + why;
        }
      });
  }
  // Lets them go; returns the milliseconds until the last one finished.
  double run() {
    const auto t0 = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      go_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  int n_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool go_ = false;
  std::string error_;
};

std::string failed(const char* call) { return std::string(call) + ": " + cc_last_error(); }

cc_result_t connect(const std::string& address, const std::string& job, cc_store_t* store) {
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = kTimeoutMs;
  return cc_store_connect(store, address.c_str(), 0, job.c_str(), &config);
}

// The adds' results must be exactly 1..n.
std::string check_results(std::vector<int64_t> results) {
  std::sort(results.begin(), results.end());
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i] != static_cast<int64_t>(i + 1))
      return "the adds returned " + std::to_string(results[i]) + " where " + std::to_string(i + 1) +
             " was due (sorted): not exactly 1.." + std::to_string(results.size());
  return "";
}

Outcome barrier(const std::string& address, const std::string& job, int n) {
  std::vector<int64_t> results(static_cast<size_t>(n), 0);
  Clients clients(n);
  clients.start([&](int i) -> std::string {
    cc_store_t s = nullptr;
    if (connect(address, job, &s) != CC_SUCCESS) return failed("cc_store_connect");
    std::unique_ptr<std::remove_pointer_t<cc_store_t>, decltype(&cc_store_close)> owned(
        s, &cc_store_close);
    const std::string mine = "rank/" + std::to_string(i);
    if (cc_store_set(s, mine.c_str(), mine.data(), mine.size()) != CC_SUCCESS)
      return failed("cc_store_set");
    int64_t arrived = 0;
    if (cc_store_add(s, "arrived", 1, &arrived) != CC_SUCCESS) return failed("cc_store_add");
    results[static_cast<size_t>(i)] = arrived;
    if (arrived == n && cc_store_set(s, "go", "1", 1) != CC_SUCCESS) return failed("cc_store_set");
    const char* go[] = {"go"};
    if (cc_store_wait(s, go, 1, kTimeoutMs) != CC_SUCCESS) return failed("cc_store_wait");
    const std::string next = "rank/" + std::to_string((i + 1) % n);
    char buf[64];
    size_t len = 0;
    if (cc_store_get(s, next.c_str(), buf, sizeof(buf), &len, 0) != CC_SUCCESS)
      return failed("cc_store_get");
    if (std::string(buf, len) != next) return "its neighbour's key holds " + std::string(buf, len);
    return "";
  });
  Outcome o;
  o.ms = clients.run();
  o.error = clients.error();
  if (o.error.empty()) o.error = check_results(results);
  return o;
}

Outcome adds(const std::string& address, const std::string& job, int n) {
  std::vector<cc_store_t> stores(static_cast<size_t>(n), nullptr);
  Outcome o;
  {
    Clients connecting(n);
    connecting.start([&](int i) -> std::string {
      return connect(address, job, &stores[static_cast<size_t>(i)]) == CC_SUCCESS
                 ? ""
                 : failed("cc_store_connect");
    });
    (void)connecting.run();
    o.error = connecting.error();
  }
  std::vector<int64_t> results(static_cast<size_t>(n), 0);
  if (o.error.empty()) {
    Clients adding(n);
    adding.start([&](int i) -> std::string {
      return cc_store_add(stores[static_cast<size_t>(i)], "counter", 1,
                          &results[static_cast<size_t>(i)]) == CC_SUCCESS
                 ? ""
                 : failed("cc_store_add");
    });
    o.ms = adding.run();
    o.error = adding.error();
    if (o.error.empty()) o.error = check_results(results);
  }
  for (cc_store_t s : stores) cc_store_close(s);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  cc::test::BenchArgs args;
  int& n = args.n;
  int& runs = args.runs;
  int& members = args.members;
  std::string& address = args.address;
  std::string mode = "barrier";
  cc::cli::CommandLine command_line(
      "usage: cc-etcd-store-bench [--mode barrier|adds] [-n N] [-r RUNS] "
      "[--members M | --address etcd://...]",
      15);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  cc::test::add_bench_options(app, &args, 100000, "clients (default 1024)");
  cc::cli::add_value(app, "--mode", "MODE", "barrier (default) or adds", [&](const std::string& v) {
    if (v != "barrier" && v != "adds")
      cc::cli::reject("--mode is barrier or adds, not '" + v + "'");
    mode = v;
  });
  if (const auto exit_status =
          cc::test::parse_bench_arguments(command_line, argc, argv, "cc-etcd-store-bench"))
    return *exit_status;
  cc::test::raise_open_files();

  std::unique_ptr<cc::test::EtcdCluster> cluster;
  if (address.empty() &&
      !cc::test::start_bench_cluster("cc-etcd-store-bench", members, &address, &cluster, &args))
    return 1;
  std::printf("etcd store, %s: %d clients against %s\n", mode.c_str(), n, address.c_str());
  std::vector<double> times;
  int rc = 0;
  for (int run = 0; run < runs; ++run) {
    if (run > 0) std::this_thread::sleep_for(std::chrono::seconds(1));  // etcd settles
    const std::string job = "store-bench-" + std::to_string(::getpid()) + "-" + std::to_string(run);
    const Outcome o = mode == "adds" ? adds(address, job, n) : barrier(address, job, n);
    if (!o.error.empty()) {
      std::printf("run %d: failed after %.0f ms: %s\n", run + 1, o.ms, o.error.c_str());
      rc = 1;
      continue;
    }
    std::printf("run %d: %.0f ms\n", run + 1, o.ms);
    std::fflush(stdout);
    times.push_back(o.ms);
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    std::printf("median of %zu runs: %s with %d clients in %.0f ms\n", times.size(), mode.c_str(),
                n, times[times.size() / 2]);
  }
  return rc;
}
