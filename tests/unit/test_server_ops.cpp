// What an operator sees of the rendezvous server, driven through ServerCore
// with a fake Sink and clock: the status report (who joined, who is missing,
// who failed, left or aborted, with host and pid), who may ask for it, the
// counters behind the metrics endpoint and their Prometheus text, a token
// replaced while jobs run, and `cc-rendezvous status`'s a message about it.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "rendezvous/auth.hpp"
#include "rendezvous/server_core.hpp"
#include "rendezvous/server_metrics.hpp"
#include "tests/unit/server_core_harness.hpp"
#include "tools/cc-rendezvous/status_render.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;

namespace {

struct Harness : cc::test::Harness {
  using cc::test::Harness::Harness;

  void drain(rv::ConnId id) { sink.out[id].clear(); }
  // Connects and says hello; with a token, authenticates with `token`.
  void client(rv::ConnId id, const std::string& job, const std::string& token = "") {
    connect(id);
    feed(id, rv::Hello{job, "host-" + std::to_string(id), static_cast<uint32_t>(100 + id), "test"});
    auto ch = std::get<rv::Challenge>(one(id));
    if (ch.auth_required) {
      feed(id, rv::Auth{rv::auth_mac(token, ch.nonce, job)});
      one(id);
    }
  }
  void join(rv::ConnId id, int rank, int world, const std::string& host) {
    rv::Join j;
    j.info.rank = rank;
    j.info.world_size = world;
    j.info.comm_number = 1;
    j.info.host = host;
    j.info.pid = static_cast<uint32_t>(4000 + rank);
    j.info.nccl_version = 22809;
    j.info.nccl_addr = "10.0.0." + std::to_string(id);
    j.timeout_ms = 60000;
    feed(id, j);
  }
  rv::StatusReport status(rv::ConnId observer) {
    feed(observer, rv::StatusQuery{});
    return one_as<rv::StatusReport>(observer);
  }
  rv::ServerMetrics metrics() const { return core.metrics(now); }
};

const rv::MemberStatus& member(const rv::CommStatus& g, int rank) {
  for (const auto& m : g.members)
    if (m.rank == rank) return m;
  FAIL("rank " << rank << " is not in the report");
  throw;
}

uint64_t failures(const rv::ServerMetrics& m, rv::FailureCause c) {
  return m.counters.failures[static_cast<size_t>(c)];
}
uint64_t frame_errors(const rv::ServerMetrics& m, rv::FrameErrorKind k) {
  return m.counters.frame_errors[static_cast<size_t>(k)];
}
uint64_t limits(const rv::ServerMetrics& m, rv::LimitKind k) {
  return m.counters.limits[static_cast<size_t>(k)];
}

// Why a frame reader refuses `bytes`, which must not decode.
rv::DecodeError refusal(const std::vector<uint8_t>& bytes) {
  rv::FrameReader reader;
  reader.feed(bytes);
  CHECK_FALSE(reader.next());
  return reader.error();
}

}  // namespace

TEST_CASE("ops: the status messages round-trip through a frame") {
  rv::StatusReport r;
  r.server = "cc-rendezvous 0.1.0";
  r.uptime_ms = 1234567;
  r.jobs_total = 3;
  r.members_omitted = 2;
  r.store_bytes = 5000;
  r.store_bytes_limit = 1u << 30;
  rv::CommStatus g{7, rv::JoinState::joining, 4, 2, "", {2, 3}, {}};
  g.members.push_back(
      {0, rv::MemberState::member, "gpu-a", 42, "10.0.0.2:5000", "10.0.0.2", 41, 300, 5000, ""});
  g.members.push_back({1, rv::MemberState::failed, "gpu-b", 43, "10.0.0.3:5000", "", 40, 0, 0,
                       "connection reset by peer"});
  r.jobs.push_back({"train", 3, 12, 4321, 0, {g}});
  r.jobs.push_back({"kept", 0, 2, 80, 59000, {}});
  cc::test::check_round_trip(rv::StatusQuery{"train"});
  cc::test::check_round_trip(r);
  CHECK(std::string(rv::type_name(rv::MsgType::status_report)) == "status-report");
  // A member state out of range is refused.
  auto bytes = rv::encode_frame(1, r);
  const std::string marker = "gpu-a";
  auto at = std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end());
  REQUIRE(at != bytes.end());
  *(at - 5) = 9;  // the state byte sits before the host's length
  CHECK(refusal(bytes) == rv::DecodeError::bad_field);
}

TEST_CASE("ops: a status report that claims more entries than its bytes hold is refused") {
  // A report with no jobs ends in its job count; claiming 100000 jobs in a
  // frame that holds none is refused by size before any room is made for them.
  rv::StatusReport r;
  r.server = "cc-rendezvous 0.1.0";
  auto bytes = rv::encode_frame(1, r);
  const size_t count_at = bytes.size() - 4;
  for (int i = 0; i < 4; ++i) bytes[count_at + i] = static_cast<uint8_t>(100000u >> (8 * i));
  CHECK(refusal(bytes) == rv::DecodeError::field_too_large);
}

TEST_CASE("ops: status is answered only after authentication, to a connection of no job") {
  rv::ServerOptions o;
  o.token = "secret";
  Harness h(o);
  REQUIRE(h.core.on_connect(1, "10.0.0.1:5000", h.now));
  h.feed(1, rv::Hello{"", "ops", 1, "cc-rendezvous status"});
  REQUIRE(std::get<rv::Challenge>(h.one(1)).auth_required);
  h.feed(1, rv::StatusQuery{});  // before authenticating
  CHECK(std::get<rv::Error>(h.one(1)).code == CC_ERR_AUTH);
  CHECK(h.sink.closed.count(1));
  CHECK(h.metrics().counters.auth_refusals == 1);

  h.client(2, "", "wrong");
  CHECK(h.sink.closed.count(2));
  CHECK(h.metrics().counters.auth_refusals == 2);

  h.client(3, "", "secret");
  const rv::StatusReport r = h.status(3);
  CHECK(r.jobs.empty());
  CHECK(h.core.job_count() == 0);  // the status tool made no job
  // It may ask nothing of a job.
  h.feed(3, rv::Set{"k", {1}});
  const auto e = std::get<rv::Error>(h.one(3));
  CHECK(e.code == CC_ERR_INVALID_USAGE);
  CHECK_THAT(e.message, Catch::Contains("may only ask for status, not set"));
  CHECK(h.sink.closed.count(3));
  CHECK(h.metrics().counters.status_queries == 1);
}

TEST_CASE("ops: the report names who joined, who is missing, failed, aborted or left") {
  Harness h;
  h.client(9, "");
  for (rv::ConnId id = 1; id <= 4; ++id) h.client(id, "train");
  h.join(1, 0, 4, "gpu-a");
  h.join(2, 1, 4, "gpu-b");
  rv::StatusReport r = h.status(9);
  REQUIRE(r.jobs.size() == 1);
  CHECK(r.jobs_total == 1);
  CHECK(r.jobs[0].id == "train");
  CHECK(r.jobs[0].connections == 4);
  REQUIRE(r.jobs[0].comms.size() == 1);
  const rv::CommStatus& joining = r.jobs[0].comms[0];
  CHECK(joining.state == rv::JoinState::joining);
  CHECK(joining.joined == 2);
  CHECK(joining.missing == std::vector<int32_t>{2, 3});
  CHECK(member(joining, 1).state == rv::MemberState::joining);
  CHECK(member(joining, 1).host == "gpu-b");
  CHECK(member(joining, 1).pid == 4001);
  CHECK(member(joining, 1).peer == "10.0.0.2:5000");

  h.join(3, 2, 4, "gpu-c");
  h.join(4, 3, 4, "gpu-d");
  for (rv::ConnId id = 1; id <= 4; ++id) REQUIRE(std::holds_alternative<rv::Joined>(h.one(id)));
  h.feed(1, rv::HeartbeatWindow{5000});
  h.drain(1);
  h.now += 2s;
  for (rv::ConnId id : {1, 2}) {
    h.feed(id, rv::Heartbeat{44});
    h.drain(id);
  }
  h.feed(3, rv::Heartbeat{41});
  h.drain(3);
  h.now += 100ms;
  r = h.status(9);
  const rv::CommStatus& complete = r.jobs[0].comms[0];
  CHECK(complete.state == rv::JoinState::complete);
  CHECK(complete.missing.empty());
  CHECK(member(complete, 0).state == rv::MemberState::member);
  CHECK(member(complete, 0).last_completed == 44);
  CHECK(member(complete, 0).heartbeat_age_ms == 100);
  CHECK(member(complete, 0).heartbeat_window_ms == 5000);
  CHECK(member(complete, 0).nccl_addr == "10.0.0.1");
  CHECK(member(complete, 3).heartbeat_age_ms == 2100);  // never beat since joining

  h.core.on_disconnect(2, "connection reset by peer");  // rank 1 dies
  h.feed(3, rv::Abort{"CUDA error on rank 2"});
  h.drain(3);
  h.feed(4, rv::Leave{});
  h.drain(4);
  r = h.status(9);
  const rv::CommStatus& after = r.jobs[0].comms[0];
  const rv::MemberStatus& dead = member(after, 1);
  CHECK(dead.state == rv::MemberState::failed);
  CHECK(dead.host == "gpu-b");
  CHECK(dead.pid == 4001);
  CHECK(dead.peer == "10.0.0.2:5000");  // kept after the connection went
  CHECK(dead.last_completed == 44);
  CHECK_THAT(dead.reason, Catch::Contains("connection reset by peer"));
  CHECK(member(after, 2).state == rv::MemberState::aborted);
  CHECK(member(after, 2).reason == "CUDA error on rank 2");
  CHECK(member(after, 3).state == rv::MemberState::left);
  CHECK(member(after, 0).state == rv::MemberState::member);

  // One job asked for by name; another job is left out.
  h.client(5, "other");
  h.feed(9, rv::StatusQuery{"other"});
  const auto only = std::get<rv::StatusReport>(h.one(9));
  REQUIRE(only.jobs.size() == 1);
  CHECK(only.jobs[0].id == "other");
  CHECK(only.jobs_total == 1);
}

TEST_CASE("ops: the report stays bounded in a huge job") {
  Harness h;
  h.client(1, "");
  // 1500 joined members with 1 KiB host names: more than kStatusBudget. Rank
  // 1500 never joins, so nobody is sent the whole member list.
  const int joined = 1500;
  for (int r = 0; r < joined; ++r) {
    const auto id = static_cast<rv::ConnId>(10 + r);
    h.client(id, "big");
    h.join(id, r, joined + 1, std::string(1000, 'h') + std::to_string(r));
  }
  const rv::StatusReport report = h.status(1);
  REQUIRE(report.jobs.size() == 1);
  const rv::CommStatus& g = report.jobs[0].comms[0];
  CHECK(report.members_omitted > 0);
  CHECK(g.members.size() + report.members_omitted == joined);
  CHECK(g.missing == std::vector<int32_t>{joined});
  CHECK(rv::encode_frame(1, report).size() < rv::kStatusBudget + 64 * 1024);
}

TEST_CASE("ops: the counters move as jobs join, fail and leave") {
  rv::ServerOptions o;
  o.max_keys_per_job = 1;
  Harness h(o);
  for (rv::ConnId id = 1; id <= 3; ++id) h.client(id, "job");
  for (int r = 0; r < 3; ++r) h.join(static_cast<rv::ConnId>(r + 1), r, 3, "h");
  rv::ServerMetrics m = h.metrics();
  CHECK(m.counters.connections_accepted == 3);
  CHECK(m.connections_open == 3);
  CHECK(m.jobs == 1);
  CHECK(m.counters.joins == 3);
  CHECK(m.counters.generations_completed == 1);
  REQUIRE(m.job_members.size() == 1);
  CHECK(m.job_members[0].job == "job");
  CHECK(m.job_members[0].members == 3);
  CHECK(m.counters.bytes_in > 0);

  h.feed(1, rv::HeartbeatWindow{300});
  h.feed(2, rv::Abort{"gave up"});
  h.core.on_disconnect(3, "reset");
  h.core.on_disconnect(2, "the client closed the connection");  // after its abort: no second event
  h.now += 400ms;
  h.core.expire(h.now);  // rank 0 missed its heartbeats
  m = h.metrics();
  CHECK(failures(m, rv::FailureCause::abort) == 1);
  CHECK(failures(m, rv::FailureCause::disconnect) == 1);
  CHECK(failures(m, rv::FailureCause::heartbeat) == 1);

  h.client(4, "job2");
  h.client(5, "job2");
  h.join(4, 0, 2, "a");
  h.join(5, 1, 2, "b");
  h.feed(4, rv::Leave{});
  h.feed(4, rv::Set{"a", {1}});
  h.feed(4, rv::Set{"b", {1}});  // over max_keys_per_job
  h.feed(5, rv::Get{"never", 1000});
  m = h.metrics();
  CHECK(m.counters.leaves == 1);
  CHECK(limits(m, rv::LimitKind::max_keys_per_job) == 1);
  CHECK(m.parked_gets == 1);
  REQUIRE(m.job_members.size() == 1);
  CHECK(m.job_members[0].members == 1);

  REQUIRE(h.core.on_connect(6, "10.0.0.6:1", h.now));
  h.core.on_bytes(6, std::vector<uint8_t>{'G', 'E', 'T', ' '}, h.now);
  REQUIRE(h.core.on_connect(7, "10.0.0.7:1", h.now));
  h.feed(7, rv::Set{"k", {1}});  // no hello first
  m = h.metrics();
  CHECK(frame_errors(m, rv::FrameErrorKind::bad_magic) == 1);
  CHECK(frame_errors(m, rv::FrameErrorKind::out_of_order) == 1);

  const std::string text = rv::prometheus_text(m);
  CHECK_THAT(text, Catch::Contains("cc_rendezvous_build_info{version=\""));
  CHECK_THAT(text, Catch::Contains("nccl=\"none\"} 1\n"));
  CHECK_THAT(text,
             Catch::Contains("cc_rendezvous_failures_announced_total{cause=\"heartbeat\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("cc_rendezvous_frame_errors_total{kind=\"bad_magic\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("cc_rendezvous_job_members{job=\"job2\",state=\"member\"} 1\n"));
  CHECK_THAT(text,
             Catch::Contains("cc_rendezvous_limits_hit_total{limit=\"max_keys_per_job\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("cc_rendezvous_parked{kind=\"get\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE cc_rendezvous_joins_total counter\n"));
}

TEST_CASE("ops: what the store holds, its limits hit and the jobs that expire") {
  // Each key holds kKeyOverhead bytes beyond its key and value.
  constexpr size_t k = rv::ServerCore::kKeyOverhead;
  const auto n = [](size_t v) { return std::to_string(v); };
  rv::ServerOptions o;
  o.max_bytes_per_job = 100 + 2 * k;
  o.max_total_bytes = 150 + 3 * k;
  o.job_ttl = 60s;
  Harness h(o);
  h.client(1, "a");
  h.client(2, "b");
  h.feed(1, rv::Set{"k1", std::vector<uint8_t>(38, 1)});  // 40 bytes with its key, and k
  h.feed(1, rv::Set{"k2", std::vector<uint8_t>(18, 1)});  // 20 and k
  h.feed(2, rv::Set{"k1", std::vector<uint8_t>(58, 1)});  // 60 and k
  h.drain(1);
  h.drain(2);
  rv::ServerMetrics m = h.metrics();
  CHECK(m.store_keys == 3);
  CHECK(m.store_bytes == 120 + 3 * k);
  CHECK(m.store_bytes_limit == 150 + 3 * k);
  CHECK(m.jobs_without_connection == 0);

  h.feed(1, rv::Set{"k3", std::vector<uint8_t>(48, 1)});  // a's 60 + 50 > 100 per job
  CHECK(std::holds_alternative<rv::Error>(h.one(1)));
  h.feed(2, rv::Set{"k2", std::vector<uint8_t>(38, 1)});  // 120 + 40 > 150 in all
  CHECK(std::holds_alternative<rv::Error>(h.one(2)));
  m = h.metrics();
  CHECK(limits(m, rv::LimitKind::max_bytes_per_job) == 1);
  CHECK(limits(m, rv::LimitKind::max_total_bytes) == 1);
  CHECK(m.store_bytes == 120 + 3 * k);

  // Job a loses its connection: kept for its keys, the TTL running.
  h.core.on_disconnect(1, "the client closed the connection", h.now);
  h.client(9, "");
  h.now += 15s;
  rv::StatusReport r = h.status(9);
  CHECK(r.store_bytes == 120 + 3 * k);
  CHECK(r.store_bytes_limit == 150 + 3 * k);
  REQUIRE(r.jobs.size() == 2);
  CHECK(r.jobs[0].id == "a");
  CHECK(r.jobs[0].connections == 0);
  CHECK(r.jobs[0].keys == 2);
  CHECK(r.jobs[0].bytes == 60 + 2 * k);
  CHECK(r.jobs[0].expires_in_ms == 45000);
  CHECK(r.jobs[1].bytes == 60 + k);
  CHECK(r.jobs[1].expires_in_ms == 0);  // connected: not expiring
  const std::string text = cc::tools::rendezvous::status_text(r, "127.0.0.1:29500");
  CHECK_THAT(text,
             Catch::Contains("; store " + n(120 + 3 * k) + " B of " + n(150 + 3 * k) + " B\n"));
  CHECK_THAT(text, Catch::Contains("job 'a': no connection; 2 keys (" + n(60 + 2 * k) +
                                   " B) kept 45 s more (job TTL)"));
  CHECK_THAT(text, Catch::Contains("job 'b': 1 connection, 1 key (" + n(60 + k) + " B)"));
  const auto json = cc::tools::rendezvous::status_json(r, "127.0.0.1:29500");
  CHECK(json["store_bytes"] == 120 + 3 * k);
  CHECK(json["jobs"][0]["expires_in_ms"] == 45000);
  CHECK(json["jobs"][1]["expires_in_ms"].is_null());
  m = h.metrics();
  CHECK(m.jobs == 2);
  CHECK(m.jobs_without_connection == 1);

  h.now += 45s;
  h.core.expire(h.now);
  m = h.metrics();
  CHECK(m.jobs == 1);
  CHECK(m.jobs_without_connection == 0);
  CHECK(m.counters.jobs_expired == 1);
  CHECK(m.counters.keys_expired == 2);
  CHECK(m.store_keys == 1);
  CHECK(m.store_bytes == 60 + k);
  const std::string exposition = rv::prometheus_text(m);
  CHECK_THAT(exposition, Catch::Contains("cc_rendezvous_store_bytes " + n(60 + k) + "\n"));
  CHECK_THAT(exposition,
             Catch::Contains("cc_rendezvous_store_bytes_limit " + n(150 + 3 * k) + "\n"));
  CHECK_THAT(exposition, Catch::Contains("cc_rendezvous_jobs_expired_total 1\n"));
  CHECK_THAT(exposition, Catch::Contains("cc_rendezvous_keys_expired_total 2\n"));
  CHECK_THAT(exposition,
             Catch::Contains("cc_rendezvous_limits_hit_total{limit=\"max_total_bytes\"} 1\n"));

  // Without a TTL a job is kept until deleted, and says so.
  r.jobs[0].expires_in_ms = 0;
  CHECK_THAT(cc::tools::rendezvous::status_text(r, "x"),
             Catch::Contains("job 'a': no connection; 2 keys (" + n(60 + 2 * k) +
                             " B) kept until deleted"));
}

TEST_CASE("ops: label values are escaped, bounded and ASCII") {
  CHECK(rv::prometheus_label("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(rv::prometheus_label(std::string("x\x01\xff", 3)) == "x??");
  CHECK(rv::prometheus_label(std::string(500, 'j')).size() == 128);
}

TEST_CASE("ops: a new token: connected jobs keep going, new connections need it") {
  rv::ServerOptions o;
  o.token = "old";
  Harness h(o);
  h.client(1, "job", "old");
  h.client(2, "job", "old");
  h.join(1, 0, 2, "a");
  h.join(2, 1, 2, "b");
  REQUIRE(std::holds_alternative<rv::Joined>(h.one(1)));
  REQUIRE(std::holds_alternative<rv::Joined>(h.one(2)));
  h.core.set_token("new");
  h.feed(1, rv::Set{"k", {1}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
  h.feed(2, rv::Heartbeat{3});
  CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(2)));

  h.client(3, "job", "old");
  CHECK(h.sink.closed.count(3));
  h.client(4, "job", "new");
  CHECK_FALSE(h.sink.closed.count(4));
  h.feed(4, rv::Get{"k", 0});
  CHECK(std::holds_alternative<rv::Value>(h.one(4)));
}

TEST_CASE("ops: status words: who is behind, who failed, who is missing") {
  rv::StatusReport r;
  r.server = "cc-rendezvous 0.1.0";
  r.jobs_total = 1;
  rv::CommStatus g{1, rv::JoinState::complete, 4, 4, "", {}, {}};
  g.members.push_back(
      {0, rv::MemberState::member, "gpu-a", 10, "10.0.0.1:1", "", 44, 200, 5000, ""});
  g.members.push_back(
      {1, rv::MemberState::member, "gpu-b", 11, "10.0.0.2:1", "", 44, 4200, 5000, ""});
  g.members.push_back(
      {2, rv::MemberState::member, "gpu-c", 12, "10.0.0.3:1", "", 41, 300, 5000, ""});
  g.members.push_back({3, rv::MemberState::failed, "gpu-d", 13, "10.0.0.4:1", "", 44, 0, 0,
                       "the client closed the connection"});
  rv::CommStatus joining{2, rv::JoinState::joining, 3, 1, "", {1, 2}, {}};
  joining.members.push_back(
      {0, rv::MemberState::joining, "gpu-a", 10, "10.0.0.1:1", "", 0, 0, 0, ""});
  r.jobs.push_back({"train", 4, 0, 0, 0, {g, joining}});

  const auto late = cc::tools::rendezvous::behind(r.jobs[0].comms[0]);
  REQUIRE(late.size() == 2);
  CHECK(late[0].rank == 1);
  CHECK(late[0].why == "silent for 4.2 s");
  CHECK(late[1].rank == 2);
  CHECK(late[1].why == "3 ops behind rank 0 (op #41 against #44)");

  // Of two members (the seed's two hosts), the silent one is behind.
  rv::CommStatus pair{3, rv::JoinState::complete, 2, 2, "", {}, {}};
  pair.members.push_back({0, rv::MemberState::member, "gpu-a", 10, "", "", 9, 150, 5000, ""});
  pair.members.push_back({1, rv::MemberState::member, "gpu-b", 11, "", "", 9, 3000, 5000, ""});
  const auto stopped = cc::tools::rendezvous::behind(pair);
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].rank == 1);
  CHECK(stopped[0].why == "silent for 3.0 s");
  pair.members[1].heartbeat_age_ms = 900;  // under kSilentMs: a heartbeat a little late
  CHECK(cc::tools::rendezvous::behind(pair).empty());

  const std::string text = cc::tools::rendezvous::status_text(r, "127.0.0.1:29500");
  CHECK_THAT(text, Catch::Contains("behind: rank 1 (host gpu-b, pid 11): silent for 4.2 s"));
  CHECK_THAT(text, Catch::Contains("failed: rank 3 (host gpu-d, pid 13) at 10.0.0.4:1: the client "
                                   "closed the connection"));
  CHECK_THAT(text, Catch::Contains("missing: ranks 1, 2 (2 of 3) not joined yet"));

  const auto json = cc::tools::rendezvous::status_json(r, "127.0.0.1:29500");
  const auto& m1 = json["jobs"][0]["communicators"][0]["members"][1];
  CHECK(m1["behind"] == "silent for 4.2 s");
  CHECK(m1["host"] == "gpu-b");
  CHECK(json["jobs"][0]["communicators"][0]["members"][3]["state"] == "failed");
  CHECK(json["jobs"][0]["communicators"][0]["members"][0]["behind"].is_null());
}

TEST_CASE("ops: tokens per job prefix: a job's token opens its jobs alone, and status shows them") {
  rv::ServerOptions o;
  o.token = "admin";
  o.job_tokens = {{"train-", "t1"}, {"eval-", "e1"}};
  Harness h(o);
  h.client(1, "train-1", "t1");
  CHECK_FALSE(h.sink.closed.count(1));
  h.client(2, "eval-1", "e1");
  CHECK_FALSE(h.sink.closed.count(2));
  h.client(3, "eval-2", "admin");  // the admin token opens every job
  CHECK_FALSE(h.sink.closed.count(3));
  for (const auto& [id, job] : std::vector<std::pair<rv::ConnId, std::string>>{
           {4, "eval-1"}, {5, "other"}}) {
    INFO("job " << job << " with train-'s token");
    h.connect(id);
    h.feed(id, rv::Hello{job, "h", 1, "test"});
    const auto ch = h.one_as<rv::Challenge>(id);
    REQUIRE(ch.auth_required);
    h.feed(id, rv::Auth{rv::auth_mac("t1", ch.nonce, job)});
    CHECK_THAT(h.refusal(id, CC_ERR_AUTH),
               Catch::Contains("refused by the server for job '" + job + "'") &&
                   Catch::Contains("a token per job prefix"));
    CHECK(h.sink.closed.count(id));
  }
  h.feed(1, rv::Set{"k", {1}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));

  // Status with eval-'s token: the eval- jobs alone, named or not.
  h.client(6, "", "e1");
  CHECK_FALSE(h.sink.closed.count(6));
  rv::StatusReport seen = h.status(6);
  std::vector<std::string> ids;
  for (const auto& j : seen.jobs) ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"eval-1", "eval-2"});
  CHECK(seen.jobs_total == 2);
  h.feed(6, rv::StatusQuery{"train-1"});
  CHECK(h.one_as<rv::StatusReport>(6).jobs.empty());

  // The admin token sees every job.
  h.client(7, "", "admin");
  CHECK(h.status(7).jobs.size() == 3);

  // A token of no line is refused.
  h.connect(8);
  h.feed(8, rv::Hello{"", "h", 1, "test"});
  const auto ch = h.one_as<rv::Challenge>(8);
  h.feed(8, rv::Auth{rv::auth_mac("nope", ch.nonce, "")});
  CHECK_THAT(h.refusal(8, CC_ERR_AUTH), Catch::Contains("names no job (status)"));
  CHECK(h.sink.closed.count(8));
}
