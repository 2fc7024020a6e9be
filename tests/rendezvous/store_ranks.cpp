// One rank of a multi-process store test, run under cc-run or mpirun. Reads
// its rank from the environment (cc-run's or Open MPI's variables), then
// exercises cc_store_* against the job's rendezvous server and exits non-zero
// with the failed check's message on any surprise.
//
//   store_ranks             set/get/wait/add, a 64 KiB binary value, a buffer
//                           too small, a get that times out, two job ids
//   store_ranks adders      every rank adds 1 to one counter 20 times; the
//                           total must be exact
//   store_ranks --free-port prints a free TCP port of 127.0.0.1 (for scripts)
//
// With CC_TEST_HOST_SERVER=1, rank 0 hosts the server on MASTER_PORT itself
// (for mpirun, where no launcher hosts one).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cc/cc.h"
#include "lib/launch/env.hpp"
#include "tests/common/free_port.hpp"

namespace {

int g_rank = -1;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: check failed at %s:%d: %s\n  last error: %s\n", g_rank, \
                   __FILE__, __LINE__, #cond, cc_last_error());                              \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

#define CHECK_OK(call) CHECK((call) == CC_SUCCESS)

bool contains(const char* text, const std::string& part) {
  return std::strstr(text, part.c_str()) != nullptr;
}

std::string key(const std::string& prefix, int r) { return prefix + "/" + std::to_string(r); }

// Every rank sets prefix/<rank>, then waits for all of them.
void barrier(cc_store_t store, const std::string& prefix, int world) {
  CHECK_OK(cc_store_set(store, key(prefix, g_rank).c_str(), "", 0));
  std::vector<std::string> names;
  for (int r = 0; r < world; ++r) names.push_back(key(prefix, r));
  std::vector<const char*> ptrs;
  for (const auto& n : names) ptrs.push_back(n.c_str());
  CHECK_OK(cc_store_wait(store, ptrs.data(), static_cast<int>(ptrs.size()), 60000));
}

long long ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

void basic(cc_store_t store, int world, const cc::launch::LaunchInfo& info) {
  // set/get/wait across processes
  const std::string mine = "value of rank " + std::to_string(g_rank);
  CHECK_OK(cc_store_set(store, key("rank", g_rank).c_str(), mine.data(), mine.size()));
  barrier(store, "set", world);
  for (int r = 0; r < world; ++r) {
    char buf[64];
    size_t len = 0;
    CHECK_OK(cc_store_get(store, key("rank", r).c_str(), buf, sizeof(buf), &len, 10000));
    const std::string want = "value of rank " + std::to_string(r);
    CHECK(std::string(buf, len) == want);
  }

  // add: every rank adds rank+1
  int64_t after = 0;
  CHECK_OK(cc_store_add(store, "sum", g_rank + 1, &after));
  CHECK(after >= g_rank + 1);
  barrier(store, "added", world);
  int64_t total = -1;
  CHECK_OK(cc_store_add(store, "sum", 0, &total));
  CHECK(total == static_cast<int64_t>(world) * (world + 1) / 2);

  // a 64 KiB binary value with zero bytes, from the last rank to everyone
  std::vector<unsigned char> blob(64 * 1024);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<unsigned char>((i * 7919u) % 251u);
  for (size_t i = 0; i < blob.size(); i += 1000) blob[i] = 0;
  if (g_rank == world - 1) CHECK_OK(cc_store_set(store, "blob", blob.data(), blob.size()));
  std::vector<unsigned char> got(blob.size());
  size_t len = 0;
  CHECK_OK(cc_store_get(store, "blob", got.data(), got.size(), &len, 10000));
  CHECK(len == blob.size());
  CHECK(got == blob);

  // a buffer too small reports the length it needs and copies nothing
  unsigned char small[16];
  std::memset(small, 0xab, sizeof(small));
  len = 0;
  CHECK(cc_store_get(store, "blob", small, sizeof(small), &len, 0) == CC_ERR_BUFFER_TOO_SMALL);
  CHECK(len == blob.size());
  CHECK(small[0] == 0xab);
  CHECK(contains(cc_last_error(), "65536 bytes"));

  // a get that times out does so close to its deadline and names the key
  const std::string never = key("never", g_rank);
  const auto t0 = std::chrono::steady_clock::now();
  char buf[8];
  CHECK(cc_store_get(store, never.c_str(), buf, sizeof(buf), &len, 400) == CC_ERR_TIMEOUT);
  const long long elapsed = ms_since(t0);
  CHECK(elapsed >= 350);
  CHECK(elapsed < 4000);
  CHECK(contains(cc_last_error(), "'" + never + "'"));

  // a wait that times out names the missing key
  const char* some[] = {"rank/0", never.c_str()};
  CHECK(cc_store_wait(store, some, 2, 200) == CC_ERR_TIMEOUT);
  CHECK(contains(cc_last_error(), never));

  // another job id sees none of these keys and keeps its own
  const char* job = std::getenv("CC_JOB_ID");
  CHECK(job != nullptr);
  const std::string other_job = std::string(job) + "-other";
  cc_store_t other = nullptr;
  CHECK_OK(cc_store_connect(&other, info.master_addr.c_str(), info.master_port, other_job.c_str(),
                            nullptr));
  CHECK(cc_store_get(other, "rank/0", buf, sizeof(buf), &len, 0) == CC_ERR_TIMEOUT);
  CHECK(cc_store_get(other, "blob", buf, sizeof(buf), &len, 0) == CC_ERR_TIMEOUT);
  barrier(store, "other-checked", world);  // before anyone writes to the other job
  const std::string theirs = "other job " + std::to_string(g_rank);
  CHECK_OK(cc_store_set(other, key("rank", g_rank).c_str(), theirs.data(), theirs.size()));
  barrier(store, "other-set", world);
  char b64[64];
  CHECK_OK(cc_store_get(store, key("rank", g_rank).c_str(), b64, sizeof(b64), &len, 0));
  CHECK(std::string(b64, len) == mine);
  CHECK_OK(cc_store_get(other, key("rank", g_rank).c_str(), b64, sizeof(b64), &len, 0));
  CHECK(std::string(b64, len) == theirs);
  CHECK_OK(cc_store_close(other));
}

void adders(cc_store_t store, int world) {
  constexpr int kTimes = 20;
  for (int i = 0; i < kTimes; ++i) CHECK_OK(cc_store_add(store, "counter", 1, nullptr));
  barrier(store, "adders-done", world);
  int64_t total = -1;
  CHECK_OK(cc_store_add(store, "counter", 0, &total));
  CHECK(total == static_cast<int64_t>(world) * kTimes);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "basic";
  if (mode == "--free-port") {
    const int port = cc::test::free_port();
    if (port <= 0) return 1;
    std::printf("%d\n", port);
    return 0;
  }

  cc::launch::LaunchInfo info;
  if (cc::Status s = cc::launch::read_launch_info(cc::settings::process_env(), &info); !s.ok()) {
    std::fprintf(stderr, "store_ranks: %s\n", s.message.c_str());
    return 1;
  }
  g_rank = info.rank;
  if (const char* want = std::getenv("CC_TEST_EXPECT_RANK_VAR")) {
    CHECK(info.rank_var == want);
    CHECK(info.world_size_var ==
          std::string(want).replace(std::string(want).rfind("RANK"), 4, "SIZE"));
  }

  cc_server_t server = nullptr;
  const char* host = std::getenv("CC_TEST_HOST_SERVER");
  if (host != nullptr && std::string(host) == "1" && g_rank == 0) {
    CHECK_OK(cc_server_start(&server, "127.0.0.1", info.master_port, nullptr));
  }

  cc_config_t config = CC_CONFIG_INIT;
  config.timeout_ms = 60000;
  cc_store_t store = nullptr;
  CHECK_OK(cc_store_connect(&store, info.master_addr.c_str(), info.master_port, nullptr, &config));

  if (mode == "basic") {
    basic(store, info.world_size, info);
  } else if (mode == "adders") {
    adders(store, info.world_size);
  } else {
    std::fprintf(stderr, "store_ranks: unknown mode '%s'\n", mode.c_str());
    return 2;
  }

  // Nobody leaves before everyone is done (rank 0 may host the server).
  barrier(store, "finished", info.world_size);
  if (server != nullptr) {
    // Keep serving until every other rank has had its last answer.
    const auto t0 = std::chrono::steady_clock::now();
    int64_t gone = 0;
    while (gone < info.world_size - 1 && ms_since(t0) < 30000) {
      CHECK_OK(cc_store_add(store, "bye", 0, &gone));
      ::usleep(10000);
    }
    CHECK(gone == info.world_size - 1);
  } else {
    CHECK_OK(cc_store_add(store, "bye", 1, nullptr));
  }
  CHECK_OK(cc_store_close(store));
  CHECK_OK(cc_server_stop(server));
  std::printf("rank %d of %d: ok\n", g_rank, info.world_size);
  return 0;
}
