// What the store keeps, through real processes, on the cc-rendezvous daemon
// and on the embedded server (cc_server_start) alike: a job's keys outlive
// its connections until deleted or until its job TTL; a full store refuses
// with a message; delete; compare-set, with 64 processes racing; and a job's
// communicator state is never handed out stale once its ranks have left.
// CC_RENDEZVOUS_BIN names the daemon, STORE_CLIENT the one-shot client
// (store_client.cpp). With CC_TLS_CERT and CC_TLS_KEY set the daemon gets
// them as --tls-cert and --tls-key, as the embedded server reads them.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cc/cc.h"
#include "rendezvous/frame_client.hpp"
#include "rendezvous/server_core.hpp"
#include "rendezvous/tls/env.hpp"
#include "tests/common/child_process.hpp"

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace rv = cc::rv;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cc-retention-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path + "'";
    (void)std::system(cmd.c_str());
  }
};

// A child process whose stdout and stderr go to files.
struct Proc {
  std::shared_ptr<cc::test::ChildProcess> process;
  std::string out, err;
};

Proc spawn(const std::vector<std::string>& args, const std::string& dir, const std::string& name) {
  Proc p;
  p.out = dir + "/" + name + ".out";
  p.err = dir + "/" + name + ".err";
  cc::test::ChildOptions o;
  o.args = args;
  o.stdout_file = p.out;
  o.stderr_file = p.err;
  p.process = std::make_shared<cc::test::ChildProcess>(std::move(o));
  return p;
}

struct Done {
  int code = -1;  // exit status, or -1 when it had to be killed
  std::string out, err;
};

// Waits for the process until `deadline`, then kills it: no test hangs.
Done finish(const Proc& p, Clock::time_point deadline) {
  Done d;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (const auto status = p.process->wait_for(left))
    d.code = cc::test::ChildProcess::exit_code(*status);
  else if (p.process->pid() > 0) {
    p.process->signal(SIGKILL);
    p.process->reap();
  }
  d.out = read_file(p.out);
  d.err = read_file(p.err);
  while (!d.out.empty() && d.out.back() == '\n') d.out.pop_back();
  return d;
}

const char* env_path(const char* name) {
  const char* v = std::getenv(name);
  INFO(name << " must name the binary");
  REQUIRE(v != nullptr);
  return v;
}

// A rendezvous server for one test: the daemon or the embedded one.
class Server {
 public:
  virtual ~Server() = default;
  virtual int port() const = 0;
  virtual std::string log() const { return {}; }  // the daemon's log; "" for the embedded one
};

class Daemon final : public Server {
 public:
  Daemon(const std::vector<std::string>& flags, const std::string& dir) {
    std::vector<std::string> args = {
        env_path("CC_RENDEZVOUS_BIN"), "--bind", "127.0.0.1", "--port", "0", "--log-level", "info"};
    args.insert(args.end(), flags.begin(), flags.end());
    const char* cert = std::getenv("CC_TLS_CERT");
    const char* key = std::getenv("CC_TLS_KEY");
    if (cert != nullptr && *cert != '\0' && key != nullptr)
      args.insert(args.end(), {"--tls-cert", cert, "--tls-key", key});
    proc_ = spawn(args, dir, "daemon");
    const auto deadline = Clock::now() + 10s;
    while (port_ == 0 && Clock::now() < deadline) {
      const std::string text = read_file(proc_.err);
      const size_t at = text.find("ready on port ");
      if (at != std::string::npos) port_ = std::atoi(text.c_str() + at + 14);
      if (port_ == 0) std::this_thread::sleep_for(20ms);
    }
    INFO(read_file(proc_.err));
    REQUIRE(port_ > 0);
  }
  ~Daemon() override {
    if (proc_.process->pid() > 0) ::kill(proc_.process->pid(), SIGTERM);
    (void)finish(proc_, Clock::now() + 10s);
  }
  int port() const override { return port_; }
  std::string log() const override { return read_file(proc_.err); }

 private:
  Proc proc_;
  int port_ = 0;
};

class Embedded final : public Server {
 public:
  explicit Embedded(int job_ttl_ms) {
    cc_config_t config = CC_CONFIG_INIT;
    if (job_ttl_ms >= 0) config.job_ttl_ms = job_ttl_ms;
    INFO(cc_last_error());
    REQUIRE(cc_server_start(&server_, "127.0.0.1", 0, &config) == CC_SUCCESS);
    REQUIRE(cc_server_port(server_, &port_) == CC_SUCCESS);
  }
  ~Embedded() override { (void)cc_server_stop(server_); }
  int port() const override { return port_; }

 private:
  cc_server_t server_ = nullptr;
  int port_ = 0;
};

struct Setup {
  int job_ttl_ms = -1;                         // -1: the server's default
  std::vector<std::string> daemon_flags = {};  // limits, for the daemon
};

std::unique_ptr<Server> start(const std::string& kind, const Setup& setup, const TempDir& dir) {
  if (kind == "embedded") return std::make_unique<Embedded>(setup.job_ttl_ms);
  std::vector<std::string> flags = setup.daemon_flags;
  if (setup.job_ttl_ms >= 0) {
    flags.push_back("--job-ttl");
    flags.push_back(std::to_string(setup.job_ttl_ms) + "ms");
  }
  return std::make_unique<Daemon>(flags, dir.path);
}

// The server a test runs on, "daemon" or "embedded", and the folder its
// files go in.
struct Run {
  explicit Run(const std::string& server_kind, const Setup& setup = {})
      : kind(server_kind), server(start(kind, setup, dir)) {}
  const std::string kind;
  TempDir dir;
  std::unique_ptr<Server> server;
};

// Runs store_client with args and waits for it.
Done client(const Server& s, const std::string& job, const std::vector<std::string>& args,
            const TempDir& dir, const std::string& name = "client") {
  std::vector<std::string> all = {env_path("STORE_CLIENT"), std::to_string(s.port()), job};
  all.insert(all.end(), args.begin(), args.end());
  return finish(spawn(all, dir.path, name), Clock::now() + 60s);
}

cc_store_t connect(const Server& s, const char* job) {
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 10000;
  cc_store_t store = nullptr;
  INFO(cc_last_error());
  REQUIRE(cc_store_connect(&store, "127.0.0.1", s.port(), job, &config) == CC_SUCCESS);
  return store;
}

std::string last_error() { return cc_last_error(); }

struct Waited {
  cc_result_t result;
  std::string value;  // empty unless result is CC_SUCCESS
};

// A get of `key` that waits up to 10 s, on a connection of its own, on a
// thread of its own (so no Catch macros in it: they are not thread-safe).
std::future<Waited> wait_for(const Server& s, const char* job, const char* key) {
  return std::async(std::launch::async, [&s, job, key] {
    cc_config_t config = CC_CONFIG_INIT;
    config.timeout_ms = 10000;
    cc_store_t w = nullptr;
    const cc_result_t c = cc_store_connect(&w, "127.0.0.1", s.port(), job, &config);
    if (c != CC_SUCCESS) return Waited{c, {}};
    char got[64];
    size_t n = 0;
    const cc_result_t r = cc_store_get(w, key, got, sizeof(got), &n, 10000);
    cc_store_close(w);
    return Waited{r, std::string(got, r == CC_SUCCESS ? n : 0)};
  });
}

std::string get_text(cc_store_t store, const char* key) {
  char buf[256];
  size_t len = 0;
  INFO(cc_last_error());
  REQUIRE(cc_store_get(store, key, buf, sizeof(buf), &len, 0) == CC_SUCCESS);
  return std::string(buf, len);
}

// 64 store_client processes race a compare-set on `key` (expected "-" : only
// if absent), racer i to the value "<round>-racer-<i>"; returns what each
// printed (1 swapped, 0 not).
std::vector<std::string> race(const Server& s, const char* job, const std::string& round,
                              const std::string& key, const std::string& expected,
                              const TempDir& dir) {
  constexpr int kRacers = 64;
  std::vector<Proc> procs;
  for (int i = 0; i < kRacers; ++i)
    procs.push_back(spawn({env_path("STORE_CLIENT"), std::to_string(s.port()), job, "race", round,
                           key, expected, round + "-racer-" + std::to_string(i)},
                          dir.path, "race-" + round + "-" + std::to_string(i)));
  // Every racer is connected and waiting before any compare-set is sent.
  cc_store_t store = connect(s, job);
  const std::string ready = "ready/" + round;
  int64_t n = 0;
  const auto deadline = Clock::now() + 60s;
  while (n < kRacers && Clock::now() < deadline) {
    REQUIRE(cc_store_add(store, ready.c_str(), 0, &n) == CC_SUCCESS);
    if (n < kRacers) std::this_thread::sleep_for(10ms);
  }
  CHECK(n == kRacers);
  const std::string go = "go/" + round;
  REQUIRE(cc_store_set(store, go.c_str(), "", 0) == CC_SUCCESS);
  cc_store_close(store);
  std::vector<std::string> out;
  for (int i = 0; i < kRacers; ++i) {
    const Done d = finish(procs[static_cast<size_t>(i)], Clock::now() + 60s);
    INFO("racer " << i << ": " << d.err);
    CHECK(d.code == 0);
    out.push_back(d.out);
  }
  return out;
}

}  // namespace

TEST_CASE("retention: 64 processes each add 100 to a counter and close; a new one reads 6400") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"));
  INFO(run.kind);
  std::vector<Proc> adders;
  for (int i = 0; i < 64; ++i)
    adders.push_back(spawn({env_path("STORE_CLIENT"), std::to_string(run.server->port()), "adders",
                            "add", "counter", "100"},
                           run.dir.path, "adder-" + std::to_string(i)));
  std::set<std::string> results;
  for (const Proc& p : adders) {
    const Done d = finish(p, Clock::now() + 60s);
    INFO(d.err);
    REQUIRE(d.code == 0);
    results.insert(d.out);
  }
  // Every add saw its own total: 100, 200, ..., 6400.
  CHECK(results.size() == 64);
  CHECK(results.count("6400") == 1);
  const Done reader = client(*run.server, "adders", {"get", "counter"}, run.dir);
  INFO(reader.err);
  CHECK(reader.code == 0);
  CHECK(reader.out == "6400");
  if (run.kind == "daemon") {
    const std::string log = run.server->log();
    CHECK_THAT(log, Catch::Contains("job 'adders' has no connection; its 1 key(s)"));
    CHECK_THAT(log, !Catch::Contains("job 'adders' forgotten"));
  }
}

TEST_CASE("retention: a job's keys survive its last disconnect, until its TTL passes") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"), {.job_ttl_ms = 1500});
  INFO(run.kind);
  Done d = client(*run.server, "ttl", {"set", "config", "from the first phase"}, run.dir);
  INFO(d.err);
  REQUIRE(d.code == 0);
  d = client(*run.server, "ttl", {"get", "config"}, run.dir);  // no connection since the set
  CHECK(d.code == 0);
  CHECK(d.out == "from the first phase");
  // Nothing is connected to the job now; past the TTL it is forgotten.
  std::this_thread::sleep_for(1500ms + 1500ms);
  d = client(*run.server, "ttl", {"get", "config"}, run.dir);
  CHECK(d.code == 3);  // not set
  if (run.kind == "daemon") {
    const std::string log = run.server->log();
    CHECK_THAT(log, Catch::Contains("job 'ttl' has no connection; its 1 key(s)") &&
                        Catch::Contains("are kept for 1500 ms (job TTL)"));
    CHECK_THAT(log, Catch::Contains("job 'ttl' forgotten (no connection for 1500 ms (job TTL)"));
  }
}

TEST_CASE("retention: with job TTL 0 a job's keys stay until deleted") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"), {.job_ttl_ms = 0});
  INFO(run.kind);
  REQUIRE(client(*run.server, "kept", {"set", "k", "v"}, run.dir).code == 0);
  std::this_thread::sleep_for(1000ms);
  Done d = client(*run.server, "kept", {"get", "k"}, run.dir);
  CHECK(d.out == "v");
  cc_store_t s = connect(*run.server, "kept");
  CHECK(cc_store_delete(s, "k") == CC_SUCCESS);
  cc_store_close(s);
  CHECK(client(*run.server, "kept", {"get", "k"}, run.dir).code == 3);
  if (run.kind == "daemon") {
    CHECK_THAT(run.server->log(),
               Catch::Contains("a job's keys are kept until deleted (--job-ttl 0)") &&
                   Catch::Contains("job 'kept' has no connection; its 1 key(s) (" +
                                   std::to_string(2 + rv::ServerCore::kKeyOverhead) +
                                   " bytes) are kept until deleted"));
  }
}

TEST_CASE("retention: the daemon's full store refuses writes with words and evicts nothing") {
  Setup setup;
  // Each key holds kKeyOverhead bytes beyond its key and value.
  constexpr size_t k = rv::ServerCore::kKeyOverhead;
  const auto n = [](size_t v) { return std::to_string(v); };
  setup.daemon_flags = {"--max-keys-per-job",  "3",
                        "--max-bytes-per-job", n(1024 + k),
                        "--max-total-bytes",   n(1536 + 4 * k),
                        "--max-jobs",          "2"};
  const Run run("daemon", setup);
  cc_store_t keys = connect(*run.server, "keys");
  for (const char* k : {"k1", "k2", "k3"}) REQUIRE(cc_store_set(keys, k, "v", 1) == CC_SUCCESS);
  CHECK(cc_store_set(keys, "k4", "v", 1) == CC_ERR_RENDEZVOUS);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_set of key 'k4'") &&
                               Catch::Contains("store is full") &&
                               Catch::Contains("limit of 3 keys") &&
                               Catch::Contains("cc-rendezvous --max-keys-per-job"));
  CHECK(cc_store_add(keys, "k4", 1, nullptr) == CC_ERR_RENDEZVOUS);
  int swapped = -1;
  CHECK(cc_store_compare_set(keys, "k4", nullptr, 0, "v", 1, &swapped) == CC_ERR_RENDEZVOUS);
  CHECK(swapped == 0);
  CHECK(get_text(keys, "k1") == "v");  // nothing was evicted

  cc_store_t bytes = connect(*run.server, "bytes");
  const std::string kb(1000, 'x');
  REQUIRE(cc_store_set(bytes, "big", kb.data(), kb.size()) == CC_SUCCESS);  // 1003 bytes and k
  CHECK(cc_store_set(bytes, "more", kb.data(), 100) == CC_ERR_RENDEZVOUS);
  CHECK_THAT(last_error(), Catch::Contains("job 'bytes' holds " + n(1003 + k) + " bytes") &&
                               Catch::Contains("limit of " + n(1024 + k) + " bytes per job") &&
                               Catch::Contains("cc-rendezvous --max-bytes-per-job"));

  // 1003 + 3 x 3 bytes and 4 k held; 600 more pass the 1536 and 4 k in all.
  CHECK(cc_store_set(keys, "k1", kb.data(), 600) == CC_ERR_RENDEZVOUS);
  CHECK_THAT(last_error(), Catch::Contains("server holds " + n(1012 + 4 * k) + " bytes") &&
                               Catch::Contains("limit of " + n(1536 + 4 * k) + " bytes in all") &&
                               Catch::Contains("cc-rendezvous --max-total-bytes"));
  CHECK(get_text(keys, "k1") == "v");

  // Jobs kept without a connection count: a third job is refused at connect.
  cc_store_close(bytes);
  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 5000;
  cc_store_t third = nullptr;
  CHECK(cc_store_connect(&third, "127.0.0.1", run.server->port(), "third", &config) ==
        CC_ERR_RENDEZVOUS);
  CHECK_THAT(last_error(), Catch::Contains("limit of 2 jobs (1 of them have no connection") &&
                               Catch::Contains("cc-rendezvous --max-jobs"));
  cc_store_t again = connect(*run.server, "bytes");  // the kept job is whole
  std::vector<char> back(kb.size());
  size_t len = 0;
  CHECK(cc_store_get(again, "big", back.data(), back.size(), &len, 0) == CC_SUCCESS);
  CHECK(std::string(back.data(), len) == kb);
  cc_store_close(again);
  cc_store_close(keys);
}

TEST_CASE("retention: the embedded server's full store refuses at its default 64 MiB a job") {
  const Run run("embedded");
  cc_store_t s = connect(*run.server, "full");
  const std::vector<char> mib(1u << 20, 'x');
  int stored = 0;
  cc_result_t r = CC_SUCCESS;
  for (int i = 0; i < 70 && r == CC_SUCCESS; ++i) {
    const std::string key = "blob/" + std::to_string(i);
    r = cc_store_set(s, key.c_str(), mib.data(), mib.size());
    if (r == CC_SUCCESS) ++stored;
  }
  CHECK(stored == 63);  // 64 values of 1 MiB and their keys pass 64 MiB
  CHECK(r == CC_ERR_RENDEZVOUS);
  CHECK_THAT(last_error(), Catch::Contains("key 'blob/63' of job 'full'") &&
                               Catch::Contains("limit of 67108864 bytes per job") &&
                               Catch::Contains("cc-rendezvous --max-bytes-per-job"));
  size_t len = 0;
  std::vector<char> back(mib.size());
  CHECK(cc_store_get(s, "blob/0", back.data(), back.size(), &len, 0) == CC_SUCCESS);
  CHECK(len == mib.size());
  REQUIRE(cc_store_delete(s, "blob/0") == CC_SUCCESS);  // room again
  CHECK(cc_store_set(s, "blob/63", mib.data(), mib.size()) == CC_SUCCESS);
  cc_store_close(s);
}

TEST_CASE("retention: delete and compare-set through the C API") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"));
  INFO(run.kind);
  cc_store_t s = connect(*run.server, "calls");

  CHECK(cc_store_delete(s, "never-set") == CC_SUCCESS);
  REQUIRE(cc_store_set(s, "k", "v", 1) == CC_SUCCESS);
  CHECK(cc_store_delete(s, "k") == CC_SUCCESS);
  char buf[64];
  size_t len = 0;
  CHECK(cc_store_get(s, "k", buf, sizeof(buf), &len, 0) == CC_ERR_TIMEOUT);

  // A get waiting on a key keeps waiting through a delete; a later set answers it.
  auto waiter = wait_for(*run.server, "calls", "later");
  std::this_thread::sleep_for(200ms);
  CHECK(cc_store_delete(s, "later") == CC_SUCCESS);
  std::this_thread::sleep_for(200ms);
  CHECK(waiter.wait_for(0ms) == std::future_status::timeout);
  REQUIRE(cc_store_set(s, "later", "now", 3) == CC_SUCCESS);
  const Waited later = waiter.get();
  CHECK(later.result == CC_SUCCESS);
  CHECK(later.value == "now");

  int swapped = -1;
  CHECK(cc_store_compare_set(s, "leader", nullptr, 0, "rank-3", 6, &swapped) == CC_SUCCESS);
  CHECK(swapped == 1);
  CHECK(cc_store_compare_set(s, "leader", nullptr, 0, "rank-5", 6, &swapped) == CC_SUCCESS);
  CHECK(swapped == 0);
  CHECK(get_text(s, "leader") == "rank-3");
  CHECK(cc_store_compare_set(s, "leader", "rank-5", 6, "rank-7", 6, &swapped) == CC_SUCCESS);
  CHECK(swapped == 0);
  CHECK(cc_store_compare_set(s, "leader", "rank-3", 6, "rank-7", 6, &swapped) == CC_SUCCESS);
  CHECK(swapped == 1);
  CHECK(get_text(s, "leader") == "rank-7");
  CHECK(cc_store_compare_set(s, "leader", "rank-7", 6, "", 0, nullptr) == CC_SUCCESS);
  CHECK(get_text(s, "leader").empty());
  CHECK(cc_store_compare_set(s, "leader", "", 0, "x", 1, &swapped) == CC_SUCCESS);
  CHECK(swapped == 1);  // an empty expected value matches an empty value
  CHECK(cc_store_compare_set(s, "absent", "", 0, "x", 1, &swapped) == CC_SUCCESS);
  CHECK(swapped == 0);  // ... never an absent key

  // A compare-set that creates a key wakes the get waiting for it.
  auto woken = wait_for(*run.server, "calls", "woken");
  std::this_thread::sleep_for(200ms);
  CHECK(cc_store_compare_set(s, "woken", nullptr, 0, "yes", 3, &swapped) == CC_SUCCESS);
  CHECK(woken.get().value == "yes");

  // Argument checks, with their messages.
  CHECK(cc_store_compare_set(s, "k", nullptr, 3, "x", 1, &swapped) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("expected is NULL but expected_len is 3"));
  CHECK(swapped == 0);
  CHECK(cc_store_compare_set(s, "k", nullptr, 0, nullptr, 2, &swapped) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("desired is NULL but desired_len is 2"));
  const std::vector<char> huge((1u << 20) + 1, 'x');
  CHECK(cc_store_compare_set(s, "k", nullptr, 0, huge.data(), huge.size(), &swapped) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("the desired value of key 'k' is 1048577 bytes"));
  CHECK(cc_store_compare_set(nullptr, "k", nullptr, 0, "x", 1, &swapped) ==
        CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_delete(nullptr, "k") == CC_ERR_INVALID_ARGUMENT);
  CHECK(cc_store_delete(s, nullptr) == CC_ERR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("cc_store_delete: key is NULL"));
  cc_store_close(s);
}

TEST_CASE("retention: 64 processes racing compare-sets have exactly one winner") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"));
  INFO(run.kind);
  // Create-if-absent: leader election.
  std::vector<std::string> out = race(*run.server, "election", "1", "leader", "-", run.dir);
  int winners = 0;
  std::string winner;
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK((out[i] == "0" || out[i] == "1"));
    if (out[i] == "1") {
      ++winners;
      winner = "1-racer-" + std::to_string(i);
    }
  }
  CHECK(winners == 1);
  cc_store_t s = connect(*run.server, "election");
  CHECK(get_text(s, "leader") == winner);
  // Replacing the winner's value: again exactly one.
  out = race(*run.server, "election", "2", "leader", winner, run.dir);
  winners = 0;
  for (const std::string& o : out) winners += o == "1" ? 1 : 0;
  CHECK(winners == 1);
  CHECK_THAT(get_text(s, "leader"), Catch::StartsWith("2-racer-"));
  cc_store_close(s);
}

TEST_CASE("retention: communicator state is not handed out stale once a job's ranks left") {
  const Run run(GENERATE(as<std::string>{}, "daemon", "embedded"));
  INFO(run.kind);
  auto rank = [&](int r, uint8_t id) {
    rv::FrameClientOptions o;
    o.addr = "127.0.0.1";
    o.port = run.server->port();
    o.job_id = "comm";
    o.connect_timeout = 10s;
    o.request_timeout = 10s;
    // TLS as a rank has it from CC_TLS_CA (the store-tls run)
    // Rank 1 runs on a thread of its own, where Catch's macros must not be
    // used (their message streams are not thread-safe): failures come back
    // as the status, checked by the caller.
    const rv::tls::ClientFiles tls = rv::tls::client_files_from(cc::settings::process_env());
    std::unique_ptr<rv::Client> c;
    if (tls.on()) {
      const cc::Status ts = rv::tls::ClientContext::open(tls, &o.tls);
      if (!ts.ok()) return std::make_tuple(ts, std::vector<uint8_t>{}, std::move(c));
    }
    const cc::Status st = rv::connect_frame_client(o, &c);
    if (!st.ok()) return std::make_tuple(st, std::vector<uint8_t>{}, std::move(c));
    rv::Join j;
    j.info.rank = r;
    j.info.world_size = 2;
    j.info.comm_number = 1;  // what every process's first communicator of the job says
    j.info.host = "host-" + std::to_string(r);
    j.info.pid = static_cast<uint32_t>(100 + r);
    j.info.nccl_version = 22809;
    if (r == 0) j.unique_id = {id};
    j.timeout_ms = 10000;
    rv::Joined joined;
    const cc::Status js = c->join(j, &joined);
    return std::make_tuple(js, joined.unique_id, std::move(c));
  };
  // Ranks 0 and 1 join, rank 0 with the unique id `id`: both succeed and
  // receive it. Their clients.
  auto join_both = [&](uint8_t id) {
    auto one = std::async(std::launch::async, [&] { return rank(1, 0); });
    auto [s0, id0, c0] = rank(0, id);
    auto [s1, id1, c1] = one.get();
    INFO(s0.message << " / " << s1.message);
    REQUIRE(s0.ok());
    REQUIRE(s1.ok());
    CHECK(id0 == std::vector<uint8_t>{id});
    CHECK(id1 == std::vector<uint8_t>{id});
    return std::make_pair(std::move(c0), std::move(c1));
  };
  // A store connection of the job stays all along, holding a key.
  cc_store_t store = connect(*run.server, "comm");
  REQUIRE(cc_store_set(store, "phase", "1", 1) == CC_SUCCESS);

  auto [c0, c1] = join_both(7);
  // While a rank remains, the completed communicator is refused to a latecomer.
  CHECK(c0->leave().ok());
  c0.reset();
  auto [late, late_id, late_client] = rank(1, 0);
  CHECK(late.code == CC_ERR_MISMATCH);
  CHECK_THAT(late.message, Catch::Contains("after it had completed"));
  late_client.reset();
  CHECK(c1->leave().ok());
  c1.reset();

  // Every rank left: the same job id and generation start fresh, with the new id.
  const auto fresh = join_both(8);
  CHECK(get_text(store, "phase") == "1");  // the keys were never touched
  cc_store_close(store);
  if (run.kind == "daemon")
    CHECK_THAT(run.server->log(),
               Catch::Contains("job 'comm': communicator state forgotten (its last rank left)"));
}
