// The cases of the conformance table (see rules_table.hpp).
#include "tests/rendezvous/rules_table.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include "rendezvous/frame_client.hpp"
#include "tests/common/peer_event_kind_name.hpp"

namespace cc::test {

BackendWords server_words() {
  return {"MASTER_ADDR, MASTER_PORT and job id, and can reach the server",
          "MASTER_ADDR, MASTER_PORT and job id"};
}

BackendWords etcd_words(const std::string& endpoint_list) {
  return {"MASTER_ADDR (the etcd endpoints " + endpoint_list + ") and job id, and can reach etcd",
          "MASTER_ADDR and job id"};
}

namespace {

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

}  // namespace

std::string expand(const std::string& words, const std::string& job, const BackendWords& b) {
  std::string out = words;
  replace_all(&out, "{job}", job);
  replace_all(&out, "{join-settings}", b.join_settings);
  replace_all(&out, "{recover-settings}", b.recover_settings);
  return out;
}

rv::Join table_join(int rank, int world, int timeout_ms) {
  rv::Join j;
  j.info.rank = rank;
  j.info.world_size = world;
  j.info.comm_number = 1;
  j.info.host = "host-" + std::string(1, static_cast<char>('a' + rank % 26));
  j.info.pid = static_cast<uint32_t>(1000 + rank);
  j.info.nccl_version = 22809;
  j.info.gpu_uuid = "GPU-" + std::to_string(rank);
  if (rank == 0) j.unique_id = std::vector<uint8_t>(128, 0x42);
  j.timeout_ms = static_cast<uint32_t>(timeout_ms);
  return j;
}

std::vector<JoinCase> join_cases() {
  const std::string at = "communicator 1 of job '{job}'";
  std::vector<JoinCase> cases;
  // Rank 0 said a world of 2, rank 1 of 3 (two cases end so).
  const std::string world_2_and_3 =
      "ranks disagree on the world size of " + at +
      ": rank 0 (host host-a, pid 1000) said 2, rank 1 (host host-b, pid 1001) said 3; give "
      "every rank the same WORLD_SIZE";
  // Ranks 0 (on host-a) and 1 (on host_1) found on one GPU, GPU-0.
  const auto gpu_0_twice = [&](const std::string& host_1) {
    return "rank 0 (host host-a, pid 1000) and rank 1 (host " + host_1 + ", pid 1001) of " + at +
           " use the same GPU GPU-0; give each local rank its own device (LOCAL_RANK, CC_DEVICE)";
  };

  cases.push_back(
      {"world-size", {table_join(0, 2), table_join(1, 3)}, CC_ERR_MISMATCH, world_2_and_3});

  cases.push_back({"out-of-range",
                   {table_join(0, 2), table_join(5, 2)},
                   CC_ERR_INVALID_ARGUMENT,
                   "rank 5 (host host-f, pid 1005) is out of range for " + at +
                       " of 2 ranks (valid: 0-1); check RANK and WORLD_SIZE"});

  rv::Join twin = table_join(1, 3);
  twin.info.host = "host-z";
  twin.info.pid = 4242;
  twin.info.gpu_uuid = "GPU-other";
  cases.push_back({"claimed-twice",
                   {table_join(0, 3), table_join(1, 3), twin},
                   CC_ERR_MISMATCH,
                   "rank 1 of " + at +
                       " was claimed twice: by rank 1 (host host-b, pid 1001) and by rank 1 "
                       "(host host-z, pid 4242); give every process its own RANK"});

  rv::Join older = table_join(1, 2);
  older.info.nccl_version = 22605;
  cases.push_back({"nccl-version",
                   {table_join(0, 2), older},
                   CC_ERR_MISMATCH,
                   "ranks of " + at +
                       " load different NCCL versions: rank 0 (host host-a, pid 1000) has 2.28.9, "
                       "rank 1 (host host-b, pid 1001) has 2.26.5; install the same NCCL "
                       "major.minor everywhere"});

  rv::Join same_gpu = table_join(1, 2);
  same_gpu.info.host = "host-a";
  same_gpu.info.gpu_uuid = "GPU-0";
  cases.push_back(
      {"same-gpu", {table_join(0, 2), same_gpu}, CC_ERR_MISMATCH, gpu_0_twice("host-a")});

  // One NCCL host identity (NCCL_HOSTID) is one host, whatever the host names.
  rv::Join key0 = table_join(0, 2), key1 = table_join(1, 2);
  key1.info.gpu_uuid = "GPU-0";
  key0.info.host_key = key1.info.host_key = "rack-1";
  cases.push_back({"same-gpu-by-host-key", {key0, key1}, CC_ERR_MISMATCH, gpu_0_twice("host-b")});

  // Two faults in one arrival: the world size is checked first, everywhere.
  rv::Join two_faults = table_join(1, 3);
  two_faults.info.nccl_version = 22605;
  cases.push_back(
      {"world-size-before-nccl", {table_join(0, 2), two_faults}, CC_ERR_MISMATCH, world_2_and_3});

  // NCCL sees two hosts (two host identities): one GPU may serve both.
  rv::Join shared0 = table_join(0, 2), shared1 = table_join(1, 2);
  shared1.info.host = shared0.info.host;
  shared1.info.gpu_uuid = shared0.info.gpu_uuid;
  shared0.info.host_key = shared0.info.host + "-rank0";
  shared1.info.host_key = shared0.info.host + "-rank1";
  cases.push_back({"one-gpu-two-host-ids", {shared0, shared1}, CC_SUCCESS, ""});

  cases.push_back({"missing-ranks",
                   {table_join(0, 4, 1500), table_join(2, 4, 1500)},
                   CC_ERR_TIMEOUT,
                   "ranks 1, 3 of 4 never joined " + at +
                       " within 1500 ms (2 joined); check that they started, use the same "
                       "{join-settings}"});
  cases.push_back({"missing-rank",
                   {table_join(0, 3, 1500), table_join(2, 3, 1500)},
                   CC_ERR_TIMEOUT,
                   "rank 1 of 3 never joined " + at +
                       " within 1500 ms (2 joined); check that it started, use the same "
                       "{join-settings}"});
  return cases;
}

std::vector<JoinOutcome> run_joins(const Connect& connect, const std::vector<rv::Join>& joins,
                                   int later_ms) {
  std::vector<std::unique_ptr<rv::Client>> conns;
  for (size_t i = 0; i < joins.size(); ++i) conns.push_back(connect());
  std::vector<std::future<JoinOutcome>> pending;
  for (size_t i = 0; i < joins.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(later_ms));
    pending.push_back(std::async(std::launch::async, [&, i] {
      JoinOutcome o;
      o.status = conns[i]->join(joins[i], &o.joined);
      return o;
    }));
  }
  std::vector<JoinOutcome> out;
  for (auto& p : pending) out.push_back(p.get());
  return out;
}

std::vector<std::unique_ptr<rv::Client>> join_world(const Connect& connect, int world) {
  std::vector<std::unique_ptr<rv::Client>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(connect());
  std::vector<std::future<Status>> joins;
  for (int r = 0; r < world; ++r)
    joins.push_back(std::async(std::launch::async, [&, r] {
      rv::Joined j;
      return ranks[static_cast<size_t>(r)]->join(table_join(r, world), &j);
    }));
  for (auto& j : joins) {
    const Status s = j.get();
    INFO(s.message);
    REQUIRE(s.ok());
  }
  return ranks;
}

std::vector<EventCase> event_cases() {
  using K = rv::PeerEventKind;
  const std::string cuda = "rank 1: cudaSetDevice(3) failed: invalid device ordinal";
  // A client destroyed without leave(): cc's server sees its connection end,
  // etcd is told by the client itself; both know the same, and say it so.
  const std::string closed =
      "it closed its connection to the rendezvous without leaving (the process exited or "
      "dropped the communicator without destroying it)";
  return {
      {"init-failed", 3, 1, Going::init_failed, cuda, K::init_failed, cuda},
      {"init-failed-no-reason", 2, 0, Going::init_failed, "", K::init_failed, "no reason given"},
      {"abort", 3, 2, Going::abort, "rank 2 saw a NaN", K::aborted, "rank 2 saw a NaN"},
      {"abort-no-reason", 2, 1, Going::abort, "", K::aborted, "the rank called abort"},
      {"dies", 3, 1, Going::dies, "", K::failed, closed},
      {"rank-0-dies", 2, 0, Going::dies, "", K::failed, closed},
  };
}

std::vector<JoiningCase> joining_cases() {
  const std::string at = "communicator 1 of job '{job}'";
  return {
      {"abort-while-joining", 3, 2, 0, Going::abort, "the test gives up", CC_ERR_ABORTED,
       "rank 0 (host host-a, pid 1000) aborted while joining " + at + ": the test gives up"},
      {"abort-while-joining-no-reason", 3, 2, 1, Going::abort, "", CC_ERR_ABORTED,
       "rank 1 (host host-b, pid 1001) aborted while joining " + at + ": the rank called abort"},
      {"init-failed-while-joining", 4, 3, 1, Going::init_failed,
       "rank 1: cudaSetDevice(3) failed: invalid device ordinal", CC_ERR_PEER_FAILED,
       "rank 1 (host host-b, pid 1001) could not start while joining " + at +
           ": rank 1: cudaSetDevice(3) failed: invalid device ordinal"},
  };
}

namespace {

std::string describe(const rv::PeerEvent& e) {
  std::string with;
  for (int32_t r : e.with) with += (with.empty() ? "" : ",") + std::to_string(r);
  return std::string(peer_event_kind_name(e.kind)) + " rank " + std::to_string(e.rank) + " host " +
         e.host + " pid " + std::to_string(e.pid) + " split " + std::to_string(e.split) +
         " with [" + with + "]: " + e.reason;
}

Status go(rv::Client& c, const Going how, const std::string& reason) {
  if (how == Going::abort) return c.abort(reason);
  return c.init_failed(1, reason, std::chrono::milliseconds(5000));
}

}  // namespace

void check_next_event(rv::Client& c, const rv::PeerEvent& want, std::chrono::milliseconds timeout) {
  const std::optional<rv::PeerEvent> e = c.next_event(timeout);
  INFO("want: " << describe(want));
  INFO("got:  " << (e ? describe(*e)
                      : "(no event within " + std::to_string(timeout.count()) + " ms)"));
  REQUIRE(e.has_value());
  CHECK(e->kind == want.kind);
  CHECK(e->rank == want.rank);
  CHECK(e->host == want.host);
  CHECK(e->pid == want.pid);
  CHECK(e->reason == want.reason);
  CHECK(e->split == want.split);
  CHECK(e->split_color == want.split_color);
  CHECK(e->with == want.with);
}

void check_no_event(rv::Client& c, std::chrono::milliseconds quiet) {
  const std::optional<rv::PeerEvent> e = c.next_event(quiet);
  INFO("got: " << (e ? describe(*e) : "(none)"));
  CHECK_FALSE(e.has_value());
}

void check_event_case(const Connect& connect, const EventCase& c, const BackendWords& b) {
  auto ranks = join_world(connect, c.world);
  const size_t going = static_cast<size_t>(c.rank);
  if (c.how == Going::dies) {
    ranks[going].reset();
  } else {
    const Status s = go(*ranks[going], c.how, c.reason);
    INFO(s.message);
    REQUIRE(s.ok());
  }
  const rv::MemberInfo who = table_join(c.rank, c.world).info;
  const rv::PeerEvent want{c.kind, c.rank, who.host, who.pid, expand(c.words, c.name, b)};
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (r == going) continue;
    INFO("rank " << r);
    check_next_event(*ranks[r], want);
  }
  // Told once: not to the one that went, and not again when its connection ends.
  if (ranks[going]) {
    INFO("rank " << c.rank << " (the one that went)");
    check_no_event(*ranks[going], std::chrono::milliseconds(300));
    ranks[going].reset();
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (r == going) continue;
    INFO("rank " << r << ", after rank " << c.rank << "'s connection ended");
    check_no_event(*ranks[r], std::chrono::milliseconds(r == 0 ? 500 : 10));
  }
}

void check_joining_case(const Connect& connect, const JoiningCase& c, const BackendWords& b) {
  using std::chrono::milliseconds;
  std::vector<std::unique_ptr<rv::Client>> conns;
  for (int r = 0; r < c.joining; ++r) conns.push_back(connect());
  std::vector<std::future<JoinOutcome>> pending;
  for (int r = 0; r < c.joining; ++r) {
    rv::Client* conn = conns[static_cast<size_t>(r)].get();
    pending.push_back(std::async(std::launch::async, [conn, r, &c] {
      JoinOutcome o;
      o.status = conn->join(table_join(r, c.world, 20000), &o.joined);
      return o;
    }));
  }
  std::this_thread::sleep_for(milliseconds(700));  // every join is in
  const auto asked = std::chrono::steady_clock::now();
  {
    const Status s = go(*conns[static_cast<size_t>(c.rank)], c.how, c.reason);
    INFO(s.message);
    REQUIRE(s.ok());
  }
  for (size_t r = 0; r < pending.size(); ++r) {
    INFO("rank " << r);
    // At once, not at the join's 20 s deadline.
    REQUIRE(pending[r].wait_until(asked + milliseconds(5000)) == std::future_status::ready);
    const JoinOutcome o = pending[r].get();
    INFO(o.status.message);
    CHECK(o.status.code == c.code);
    CHECK(o.status.message == expand(c.words, c.name, b));
  }
}

LoopbackServer::LoopbackServer() {
  rv::ServerOptions o;
  o.bind_addr = "127.0.0.1";
  REQUIRE(rv::Server::start(o, &server).ok());
}

Connect LoopbackServer::connect(const std::string& job) const {
  const int port = server->port();
  return [port, job] {
    rv::FrameClientOptions o;
    o.addr = "127.0.0.1";
    o.port = port;
    o.job_id = job;
    std::unique_ptr<rv::Client> c;
    REQUIRE(rv::connect_frame_client(o, &c).ok());
    return c;
  };
}

}  // namespace cc::test
