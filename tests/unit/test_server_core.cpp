// ServerCore driven directly, with a fake Sink and a fake clock: no sockets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include "rendezvous/auth.hpp"
#include "rendezvous/server_core.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;

using namespace cc::test;

namespace {

// A client of `job` sets key "k" to `value` and goes away: the job keeps the
// key and has no connection.
void leave_a_key(Harness& h, rv::ConnId id, const std::string& job,
                 std::vector<uint8_t> value = {'v'}) {
  h.client(id, job);
  h.feed(id, rv::Set{"k", std::move(value)});
  h.take(id);
  h.core.on_disconnect(id, "end of stream");
}

// A new client `id` of `job` asks for key "k" without waiting: the answer.
rv::Message read_k(Harness& h, rv::ConnId id, const std::string& job) {
  h.client(id, job);
  h.feed(id, rv::Get{"k", 0});
  return h.one(id);
}

rv::ServerOptions with_job_ttl(std::chrono::milliseconds ttl) {
  rv::ServerOptions o;
  o.job_ttl = ttl;
  return o;
}

}  // namespace

TEST_CASE("core: handshake without a token") {
  Harness h;
  h.connect(1);
  h.feed(1, rv::Hello{"job", "h", 1, "test"}, 7);
  auto v = h.take(1);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 7);
  auto& ch = std::get<rv::Challenge>(v[0].message);
  CHECK_FALSE(ch.auth_required);
  CHECK_THAT(ch.server, Catch::StartsWith("cc-rendezvous "));
  CHECK(h.core.job_exists("job"));

  h.connect(2);
  h.feed(2, rv::Set{"k", {1}});
  CHECK_THAT(h.error_of(h.one(2)).message, Catch::Contains("first message must be hello, not set"));
  CHECK(h.sink.closed.count(2));

  h.feed(1, rv::Hello{"job", "h", 1, "test"});  // a second hello is a protocol error
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("unexpected message hello"));
  CHECK(h.core.connection_count() == 0);
}

TEST_CASE("core: authentication with a token") {
  rv::ServerOptions o;
  o.token = "tok";
  Harness h(o);
  auto start = [&](rv::ConnId id) {
    h.connect(id);
    h.feed(id, rv::Hello{"job", "h", 1, "test"});
    auto ch = std::get<rv::Challenge>(h.one(id));
    REQUIRE(ch.auth_required);
    REQUIRE(ch.nonce.size() == rv::kNonceSize);
    return ch.nonce;
  };
  auto n1 = start(1);
  CHECK_FALSE(h.core.job_exists("job"));  // nothing exists before authentication
  h.feed(1, rv::Auth{rv::auth_mac("tok", n1, "job")});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
  h.feed(1, rv::Set{"k", {1}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));

  auto n2 = start(2);
  CHECK(n2 != n1);                                      // fresh nonce: a recorded answer is useless
  h.feed(2, rv::Auth{rv::auth_mac("tok", n1, "job")});  // replayed
  CHECK_THAT(h.refusal(2, CC_ERR_AUTH), Catch::Contains("token was refused"));
  CHECK(h.sink.closed.count(2));

  start(3);
  h.feed(3, rv::Get{"k", 0});  // reads nothing without auth
  CHECK(h.error_of(h.one(3)).code == CC_ERR_AUTH);
  CHECK(h.sink.closed.count(3));
}

TEST_CASE("core: set, get, add, wait, delete") {
  Harness h;
  h.client(1);
  h.feed(1, rv::Set{"k", {0, 9}}, 3);
  auto v = h.take(1);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 3);
  CHECK(std::holds_alternative<rv::Ok>(v[0].message));
  h.feed(1, rv::Get{"k", 0});
  CHECK(std::get<rv::Value>(h.one(1)).value == std::vector<uint8_t>{0, 9});
  h.feed(1, rv::Get{"missing", 0});
  CHECK_THAT(h.refusal(1, CC_ERR_TIMEOUT),
             Catch::Contains("'missing'") && Catch::Contains("not set"));

  h.feed(1, rv::Add{"n", 5});
  CHECK(std::get<rv::Integer>(h.one(1)).value == 5);
  h.feed(1, rv::Add{"n", -7});
  CHECK(std::get<rv::Integer>(h.one(1)).value == -2);
  h.feed(1, rv::Get{"n", 0});
  CHECK(text(h.one(1)) == "-2");
  h.feed(1, rv::Add{"k", 1});
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("not a decimal integer"));
  h.feed(1, rv::Set{"big",
                    {'9', '2', '2', '3', '3', '7', '2', '0', '3', '6', '8', '5', '4', '7', '7', '5',
                     '8', '0', '7'}});
  h.one(1);
  h.feed(1, rv::Add{"big", 1});
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("overflows"));

  h.feed(1, rv::Wait{{"k", "n"}, 0});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
  h.feed(1, rv::Del{"k"});
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
  h.feed(1, rv::Wait{{"k", "n"}, 0});
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("'k'"));
}

TEST_CASE("core: parked get and wait are answered by set, or at their deadline") {
  Harness h;
  h.client(1);
  h.client(2);
  h.client(3);
  h.feed(1, rv::Get{"k", 200}, 11);
  h.feed(2, rv::Wait{{"k", "other"}, 300}, 12);
  CHECK(h.take(1).empty());
  CHECK(h.take(2).empty());
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() == h.now + 200ms);

  h.feed(3, rv::Set{"k", {'v'}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(3)));
  auto v = h.take(1);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 11);
  CHECK(text(v[0].message) == "v");
  CHECK(h.take(2).empty());  // still waits for "other"

  h.advance(299ms);
  CHECK(h.take(2).empty());
  h.advance(1ms);
  auto w = h.take(2);
  REQUIRE(w.size() == 1);
  CHECK(w[0].request_id == 12);
  const auto& e = h.error_of(w[0].message);
  CHECK(e.code == CC_ERR_TIMEOUT);
  CHECK_THAT(e.message, Catch::Contains("still missing: 'other'") && !Catch::Contains("'k'"));
  CHECK_FALSE(h.core.next_deadline());

  h.feed(1, rv::Get{"late", 100});
  h.advance(100ms);
  CHECK_THAT(h.error_of(h.one(1)).message,
             Catch::Contains("'late'") && Catch::Contains("within 100 ms"));

  h.feed(1, rv::Wait{{"a", "b"}, 1000});
  h.feed(2, rv::Add{"a", 1});
  h.feed(2, rv::Add{"b", 1});
  h.take(2);
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
}

TEST_CASE("core: handshake and frame deadlines") {
  rv::ServerOptions o;
  o.handshake_timeout = 100ms;
  o.frame_timeout = 50ms;
  Harness h(o);
  h.connect(1);
  h.advance(99ms);
  CHECK_FALSE(h.sink.closed.count(1));
  h.advance(1ms);
  CHECK_THAT(h.sink.closed[1], Catch::Contains("no hello within 100 ms"));

  h.client(2);
  auto frame = rv::encode_frame(1, rv::Set{"k", {1}});
  h.core.on_bytes(2, std::span(frame.data(), 5), h.now);
  h.advance(49ms);
  CHECK_FALSE(h.sink.closed.count(2));
  h.advance(1ms);
  CHECK_THAT(h.sink.closed[2], Catch::Contains("a frame stalled"));
  CHECK_THAT(h.error_of(h.one(2)).message, Catch::Contains("a frame stalled"));

  h.client(3);  // bytes that complete a frame clear the deadline
  h.core.on_bytes(3, std::span(frame.data(), 5), h.now);
  h.core.on_bytes(3, std::span(frame.data() + 5, frame.size() - 5), h.now);
  h.take(3);
  h.advance(1000ms);
  CHECK_FALSE(h.sink.closed.count(3));
}

TEST_CASE("core: malformed bytes drop only that connection") {
  Harness h;
  h.client(1);
  h.client(2);
  std::vector<uint8_t> junk = {'G', 'E', 'T', ' '};
  h.core.on_bytes(1, junk, h.now);
  CHECK_THAT(h.sink.closed[1], Catch::Contains("bad magic"));
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("bad magic"));
  h.feed(2, rv::Set{"k", {1}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(2)));

  // A frame fed one byte at a time works.
  auto frame = rv::encode_frame(9, rv::Get{"k", 0});
  for (uint8_t b : frame) h.core.on_bytes(2, std::span(&b, 1), h.now);
  auto v = h.take(2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 9);

  h.client(3);
  h.core.on_bytes(3, std::span(frame.data(), 20), h.now);
  h.core.on_disconnect(3, "the client closed the connection");
  CHECK_THAT(h.sink.closed[3], Catch::Contains("truncated frame"));
}

TEST_CASE("core: join checks") {
  Harness h;
  for (rv::ConnId i = 1; i <= 6; ++i) h.client(i);

  SECTION("complete join") {
    h.feed(2, join_msg(1, 3, "b"), 21);
    h.feed(1, join_msg(0, 3, "a"), 20);
    CHECK(h.take(1).empty());
    CHECK(h.core.job_busy("job"));
    h.feed(3, join_msg(2, 3, "c"), 22);
    for (rv::ConnId i = 1; i <= 3; ++i) {
      auto v = h.take(i);
      REQUIRE(v.size() == 1);
      CHECK(v[0].request_id == 19 + i);
      auto& j = std::get<rv::Joined>(v[0].message);
      CHECK(j.unique_id == std::vector<uint8_t>{4, 2});
      REQUIRE(j.members.size() == 1);  // rank 0 only: the others come named in their events
      CHECK(j.members[0].rank == 0);
      CHECK(j.members[0].host == "a");
      CHECK(j.members[0].pid == 1000);
    }
    h.feed(4, join_msg(1, 3, "late"));
    CHECK_THAT(h.error_of(h.one(4)).message, Catch::Contains("after it had completed"));
  }
  SECTION("world size differs") {
    h.feed(1, join_msg(0, 2, "a"));
    h.feed(2, join_msg(1, 3, "b"));
    for (rv::ConnId i : {1, 2}) {
      CHECK_THAT(h.refusal(i, CC_ERR_MISMATCH),
                 Catch::Contains("rank 0 (host a, pid 1000) said 2") &&
                     Catch::Contains("rank 1 (host b, pid 1001) said 3"));
    }
    h.feed(3, join_msg(1, 2, "c"));  // the failed generation hands out nothing
    CHECK_THAT(h.error_of(h.one(3)).message, Catch::Contains("already failed"));
    CHECK_FALSE(h.core.job_busy("job"));
  }
  SECTION("rank out of range") {
    h.feed(1, join_msg(0, 2, "a"));
    h.feed(2, join_msg(5, 2, "b"));
    for (rv::ConnId i : {1, 2}) {
      CHECK_THAT(h.refusal(i, CC_ERR_INVALID_ARGUMENT),
                 Catch::Contains("out of range") && Catch::Contains("0-1"));
    }
  }
  SECTION("rank taken twice") {
    h.feed(1, join_msg(1, 3, "a"));
    h.feed(2, join_msg(1, 3, "b"));
    for (rv::ConnId i : {1, 2})
      CHECK_THAT(h.error_of(h.one(i)).message,
                 Catch::Contains("claimed twice: by rank 1 (host a, pid 1001) and by rank 1 "
                                 "(host b, pid 1001)"));
  }
  SECTION("NCCL major.minor differs; patch may differ") {
    auto j0 = join_msg(0, 3, "a");
    auto j1 = join_msg(1, 3, "b");
    j1.info.nccl_version = 22805;
    auto j2 = join_msg(2, 3, "c");
    j2.info.nccl_version = 22703;
    h.feed(1, j0);
    h.feed(2, j1);
    CHECK(h.take(1).empty());
    h.feed(3, j2);
    for (rv::ConnId i : {1, 2, 3})
      CHECK_THAT(h.error_of(h.one(i)).message,
                 Catch::Contains("rank 0 (host a, pid 1000) has 2.28.9") &&
                     Catch::Contains("rank 2 (host c, pid 1002) has 2.27.3"));
  }
  SECTION("same GPU twice on one host") {
    auto j0 = join_msg(0, 3, "a");
    auto j1 = join_msg(1, 3, "a");
    auto j2 = join_msg(2, 3, "b");
    j0.info.gpu_uuid = j1.info.gpu_uuid = j2.info.gpu_uuid = "GPU-x";
    h.feed(3, j2);  // same uuid on another host is fine
    h.feed(1, j0);
    CHECK(h.take(1).empty());
    h.feed(2, j1);
    for (rv::ConnId i : {1, 2, 3})
      CHECK_THAT(h.error_of(h.one(i)).message, Catch::Contains("same GPU GPU-x"));
  }
  SECTION("one GPU of one host is two GPUs when NCCL sees two hosts (CC_SHARE_GPU)") {
    auto j0 = join_msg(0, 2, "a");
    auto j1 = join_msg(1, 2, "a");
    j0.info.gpu_uuid = j1.info.gpu_uuid = "GPU-x";
    j0.info.host_key = "a-rank0";
    j1.info.host_key = "a-rank1";
    h.feed(1, j0);
    h.feed(2, j1);
    for (rv::ConnId i : {1, 2}) h.one_as<rv::Joined>(i);
  }
  SECTION("one GPU under one NCCL host identity is refused, whatever the host names") {
    auto j0 = join_msg(0, 2, "a");
    auto j1 = join_msg(1, 2, "b");
    j0.info.gpu_uuid = j1.info.gpu_uuid = "GPU-x";
    j0.info.host_key = j1.info.host_key = "rack1-node1";
    h.feed(1, j0);
    h.feed(2, j1);
    for (rv::ConnId i : {1, 2})
      CHECK_THAT(h.error_of(h.one(i)).message,
                 Catch::Contains("rank 0 (host a, pid 1000) and rank 1 (host b, pid 1001)") &&
                     Catch::Contains("use the same GPU GPU-x"));
  }
  SECTION("missing ranks are named at the deadline") {
    h.feed(1, join_msg(0, 6, "a", 500));
    h.feed(2, join_msg(2, 6, "b", 800));
    h.feed(3, join_msg(3, 6, "c", 800));
    h.advance(499ms);
    CHECK(h.take(1).empty());
    h.advance(1ms);
    for (rv::ConnId i : {1, 2, 3}) {
      CHECK_THAT(h.refusal(i, CC_ERR_TIMEOUT),
                 Catch::Contains("ranks 1, 4, 5 of 6 never joined communicator 0 of job 'job'"));
    }
  }
  SECTION("a joiner that vanishes fails its generation, named to every joiner") {
    h.feed(1, join_msg(0, 3, "a"));
    h.feed(2, join_msg(1, 3, "b"));
    h.core.on_disconnect(2, "end of stream");
    CHECK_THAT(h.refusal(1, CC_ERR_PEER_FAILED),
               Catch::Contains("rank 1 (host b, pid 1001) was lost while joining "
                               "communicator 0 of job 'job'") &&
                   Catch::Contains("end of stream") && Catch::Contains("2 of 3"));
    h.feed(3, join_msg(2, 3, "c"));  // a late rank learns the same
    CHECK_THAT(h.error_of(h.one(3)).message, Catch::Contains("was lost while joining"));
    CHECK_FALSE(h.core.job_busy("job"));
  }
}

TEST_CASE("core: membership events") {
  rv::ServerOptions o;
  o.heartbeat_timeout = 300ms;
  Harness h(o);
  for (rv::ConnId i = 1; i <= 4; ++i) h.client(i);
  for (int r = 0; r < 4; ++r)
    h.feed(static_cast<rv::ConnId>(r + 1), join_msg(r, 4, "h" + std::to_string(r)));
  for (rv::ConnId i = 1; i <= 4; ++i) REQUIRE(std::holds_alternative<rv::Joined>(h.one(i)));

  // Heartbeats keep a member alive and record its progress.
  h.advance(200ms);
  for (rv::ConnId i = 1; i <= 4; ++i) {
    h.feed(i, rv::Heartbeat{10 + i});
    CHECK(std::holds_alternative<rv::HeartbeatAck>(h.one(i)));
  }
  CHECK(h.core.member_progress("job", 0).at(2) == 13);

  // Abort is announced once, also when the connection then drops.
  h.feed(2, rv::Abort{"bad input"});
  CHECK(std::holds_alternative<rv::Ok>(h.one(2)));
  for (rv::ConnId i : {1, 3, 4}) {
    auto v = h.take(i);
    REQUIRE(v.size() == 1);
    CHECK(v[0].request_id == 0);
    auto& ev = std::get<rv::PeerEvent>(v[0].message);
    CHECK(ev.kind == rv::PeerEventKind::aborted);
    CHECK(ev.rank == 1);
    CHECK(ev.host == "h1");
    CHECK(ev.reason == "bad input");
  }
  h.core.on_disconnect(2, "reset");
  for (rv::ConnId i : {1, 3, 4}) CHECK(h.take(i).empty());

  // A clean leave is no event.
  h.feed(4, rv::Leave{});
  CHECK(std::holds_alternative<rv::Ok>(h.one(4)));
  CHECK(h.take(1).empty());

  // A vanished member is a failure.
  h.core.on_disconnect(3, "connection reset by peer");
  auto ev = std::get<rv::PeerEvent>(h.one(1));
  CHECK(ev.kind == rv::PeerEventKind::failed);
  CHECK(ev.rank == 2);
  CHECK_THAT(ev.reason, Catch::Contains("connection reset"));
  CHECK(h.take(4).empty());  // left: no longer a member

  // Missed heartbeats: rank 0 stops beating.
  h.client(5, "job");
  h.advance(300ms);
  CHECK_THAT(h.sink.closed[1], Catch::Contains("no heartbeat for 300 ms"));
  CHECK_FALSE(h.core.job_busy("job"));
}

TEST_CASE("core: a job's keys outlive its connections; jobs are separate namespaces") {
  Harness h;
  h.client(1, "a");
  h.client(2, "b");
  h.feed(1, rv::Set{"k", {1}});
  h.take(1);
  h.feed(2, rv::Get{"k", 0});  // jobs are separate namespaces
  CHECK(h.error_of(h.one(2)).code == CC_ERR_TIMEOUT);
  h.core.on_disconnect(1, "end of stream");
  CHECK(h.core.job_exists("a"));  // its last connection is gone, its key is not
  CHECK(h.core.job_key_count("a") == 1);
  h.core.on_disconnect(2, "end of stream");
  CHECK_FALSE(h.core.job_exists("b"));  // no keys: nothing to keep
  CHECK(h.core.job_count() == 1);
  CHECK(std::get<rv::Value>(read_k(h, 3, "a")).value == std::vector<uint8_t>{1});
}

TEST_CASE("core: 64 connections each add 100 and close; a new one reads 6400") {
  Harness h;
  for (rv::ConnId i = 1; i <= 64; ++i) {
    h.client(i, "adders");
    h.feed(i, rv::Add{"counter", 100});
    REQUIRE(std::holds_alternative<rv::Integer>(h.one(i)));
    h.core.on_disconnect(i, "the client closed the connection");
  }
  CHECK(h.core.connection_count() == 0);
  h.advance(30min);
  h.client(100, "adders");
  h.feed(100, rv::Get{"counter", 0});
  CHECK(text(h.one(100)) == "6400");
}

TEST_CASE("core: a job without a connection is forgotten when its TTL passes") {
  Harness h(with_job_ttl(10s));
  leave_a_key(h, 1, "kept");
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() == h.now + 10s);

  // A connection within the TTL keeps the job; the TTL counts again from its end.
  h.advance(9s);
  h.client(2, "kept");
  CHECK_FALSE(h.core.next_deadline());
  h.advance(20s);
  h.feed(2, rv::Get{"k", 0});
  CHECK(text(h.one(2)) == "v");
  h.core.on_disconnect(2, "end of stream");
  h.advance(9999ms);
  CHECK(h.core.job_exists("kept"));
  h.advance(1ms);
  CHECK_FALSE(h.core.job_exists("kept"));
  CHECK(h.core.job_count() == 0);
  CHECK_FALSE(h.core.next_deadline());

  // The same job id starts empty.
  CHECK(h.error_of(read_k(h, 3, "kept")).code == CC_ERR_TIMEOUT);
}

TEST_CASE("core: job TTL 0 keeps a job's keys for the server's lifetime") {
  Harness h(with_job_ttl(0ms));
  leave_a_key(h, 1, "forever");
  CHECK_FALSE(h.core.next_deadline());
  h.advance(24h * 30);
  CHECK(text(read_k(h, 2, "forever")) == "v");
}

TEST_CASE("core: a full store refuses writes with words and evicts nothing") {
  SECTION("keys per job") {
    rv::ServerOptions o;
    o.max_keys_per_job = 2;
    Harness h(o);
    h.client(1);
    h.feed(1, rv::Set{"k1", {1}});
    h.feed(1, rv::Add{"k2", 1});
    h.feed(1, rv::Set{"k2", {2}});  // replacing is fine
    REQUIRE(h.take(1).size() == 3);
    for (const rv::Message& m : std::vector<rv::Message>{rv::Set{"k3", {1}}, rv::Add{"k3", 1},
                                                         rv::CompareSet{"k3", false, {}, {1}}}) {
      h.feed(1, m);
      CHECK_THAT(h.refusal(1, CC_ERR_RENDEZVOUS),
                 Catch::Contains("store is full") && Catch::Contains("limit of 2 keys") &&
                     Catch::Contains("'k3'") &&
                     Catch::Contains("cc-rendezvous --max-keys-per-job"));
    }
    h.feed(1, rv::Get{"k1", 0});
    CHECK(std::get<rv::Value>(h.one(1)).value == std::vector<uint8_t>{1});
    h.feed(1, rv::Del{"k1"});  // a delete makes room
    h.feed(1, rv::Set{"k3", {3}});
    auto v = h.take(1);
    REQUIRE(v.size() == 2);
    CHECK(std::holds_alternative<rv::Ok>(v[1].message));
  }
  // Two clients, of jobs "a" (1) and "b" (2); what client c gets for setting
  // `key` to n bytes.
  const auto clients_a_and_b = [](Harness& h) {
    h.client(1, "a");
    h.client(2, "b");
  };
  const auto set_bytes = [](Harness& h, rv::ConnId c, const std::string& key, size_t n) {
    h.feed(c, rv::Set{key, std::vector<uint8_t>(n, 'x')});
    return h.one(c);
  };
  const auto set_ok = [&](Harness& h, rv::ConnId c, const std::string& key, size_t n) {
    return std::holds_alternative<rv::Ok>(set_bytes(h, c, key, n));
  };
  // Each key counts kKeyOverhead bytes beyond its key and value.
  constexpr size_t k = rv::ServerCore::kKeyOverhead;
  SECTION("bytes per job") {
    rv::ServerOptions o;
    o.max_bytes_per_job = 100 + 2 * k;
    Harness h(o);
    clients_a_and_b(h);
    CHECK(set_ok(h, 1, "k", 60));                         // 61 bytes and k
    const auto e = h.error_of(set_bytes(h, 1, "j", 39));  // 101 and 2 k in all
    CHECK_THAT(e.message,
               Catch::Contains("store is full") && Catch::Contains("job 'a'") &&
                   Catch::Contains("holds " + std::to_string(61 + k) + " bytes") &&
                   Catch::Contains("limit of " + std::to_string(100 + 2 * k) + " bytes per job") &&
                   Catch::Contains("cc-rendezvous --max-bytes-per-job"));
    CHECK(set_ok(h, 1, "j", 38));                                           // exactly the limit
    CHECK(h.error_of(set_bytes(h, 1, "k", 61)).code == CC_ERR_RENDEZVOUS);  // growing counts too
    CHECK(set_ok(h, 1, "k", 10));                                           // shrinking is fine
    CHECK(set_ok(h, 2, "k", 90 + k));  // another job: its own budget
    h.feed(1, rv::Get{"j", 0});
    CHECK(std::get<rv::Value>(h.one(1)).value.size() == 38);
  }
  SECTION("bytes in all") {
    rv::ServerOptions o;
    o.max_total_bytes = 100 + 2 * k;
    Harness h(o);
    clients_a_and_b(h);
    CHECK(set_ok(h, 1, "k", 59));
    const auto e = h.error_of(set_bytes(h, 2, "k", 59));
    CHECK_THAT(e.message,
               Catch::Contains("store is full") && Catch::Contains("'k' of job 'b'") &&
                   Catch::Contains("server holds " + std::to_string(60 + k) + " bytes") &&
                   Catch::Contains("limit of " + std::to_string(100 + 2 * k) + " bytes in all") &&
                   Catch::Contains("cc-rendezvous --max-total-bytes"));
    // A job forgotten at its TTL gives its bytes back.
    h.core.on_disconnect(1, "end of stream");
    h.advance(1h);
    CHECK_FALSE(h.core.job_exists("a"));
    CHECK(set_ok(h, 2, "k", 59));
  }
  SECTION("jobs, counting those kept without a connection") {
    rv::ServerOptions o;
    o.max_jobs = 1;
    Harness h(o);
    leave_a_key(h, 1, "a", {1});
    h.connect(2);
    h.feed(2, rv::Hello{"b", "h", 1, "t"});
    auto v = h.take(2);
    REQUIRE(v.size() == 1);  // the error is the answer to the hello
    CHECK_THAT(h.error_of(v[0].message).message,
               Catch::Contains("limit of 1 jobs (1 of them have no connection") &&
                   Catch::Contains("cc-rendezvous --max-jobs"));
    // The kept job is still there.
    CHECK(std::get<rv::Value>(read_k(h, 3, "a")).value == std::vector<uint8_t>{1});
  }
}

TEST_CASE("core: delete") {
  Harness h;
  h.client(1);
  h.client(2);
  h.feed(1, rv::Del{"never-set"});  // absent: success
  CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
  h.feed(1, rv::Set{"k", {1}});
  h.feed(1, rv::Del{"k"});
  REQUIRE(h.take(1).size() == 2);
  h.feed(1, rv::Get{"k", 0});
  CHECK(h.error_of(h.one(1)).code == CC_ERR_TIMEOUT);
  h.feed(1, rv::Add{"n", 10});
  h.feed(1, rv::Del{"n"});
  h.feed(1, rv::Add{"n", 3});
  CHECK(std::get<rv::Integer>(h.take(1).back().message).value == 3);  // starts from nothing

  // A get parked on a key keeps waiting through a delete, and a set answers it.
  h.feed(2, rv::Get{"later", 1000}, 7);
  h.feed(1, rv::Del{"later"});
  h.take(1);
  CHECK(h.take(2).empty());
  h.feed(1, rv::Set{"later", {'x'}});
  h.take(1);
  auto v = h.take(2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 7);
  CHECK(text(v[0].message) == "x");

  // A wait ends only when all its keys exist at once: one deleted meanwhile
  // is waited for again.
  h.feed(1, rv::Set{"a", {1}});
  h.take(1);
  h.feed(2, rv::Wait{{"a", "b"}, 1000}, 8);
  h.feed(1, rv::Del{"a"});
  h.feed(1, rv::Set{"b", {1}});
  h.take(1);
  CHECK(h.take(2).empty());
  h.feed(1, rv::Set{"a", {2}});
  h.take(1);
  v = h.take(2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 8);
  CHECK(std::holds_alternative<rv::Ok>(v[0].message));
}

TEST_CASE("core: compare-set") {
  Harness h;
  h.client(1);
  h.client(2);
  auto cas = [&](const std::string& key, std::optional<std::string> expected,
                 const std::string& desired) {
    rv::CompareSet m;
    m.key = key;
    m.has_expected = expected.has_value();
    if (expected) m.expected.assign(expected->begin(), expected->end());
    m.value.assign(desired.begin(), desired.end());
    h.feed(1, m);
    return std::get<rv::CompareSetResult>(h.one(1)).swapped;
  };
  auto value = [&](const std::string& key) {
    h.feed(1, rv::Get{key, 0});
    return text(h.one(1));
  };
  CHECK(cas("leader", std::nullopt, "rank-3"));  // absent: created
  CHECK_FALSE(cas("leader", std::nullopt, "rank-5"));
  CHECK(value("leader") == "rank-3");
  CHECK_FALSE(cas("leader", std::string("rank-5"), "rank-7"));
  CHECK(cas("leader", std::string("rank-3"), "rank-7"));
  CHECK(value("leader") == "rank-7");
  CHECK_FALSE(cas("nothing", std::string(""), "x"));  // an expected value never matches absence
  h.feed(1, rv::Set{"blank", {}});
  h.take(1);
  CHECK(cas("blank", std::string(""), "filled"));  // an empty value matches an empty expected
  CHECK(value("blank") == "filled");

  // A compare-set that sets a key wakes its waiters, as a set does.
  h.feed(2, rv::Get{"woken", 1000}, 5);
  h.feed(2, rv::Wait{{"woken"}, 1000}, 6);
  CHECK_FALSE(cas("woken", std::string("x"), "no"));
  CHECK(h.take(2).empty());
  CHECK(cas("woken", std::nullopt, "yes"));
  auto v = h.take(2);
  REQUIRE(v.size() == 2);
  CHECK(text(v[0].message) == "yes");
  CHECK(std::holds_alternative<rv::Ok>(v[1].message));

  // 64 connections racing to create one key: exactly one wins.
  int winners = 0;
  for (rv::ConnId i = 10; i < 74; ++i) h.client(i);
  for (rv::ConnId i = 10; i < 74; ++i) {
    const std::string me = "racer-" + std::to_string(i);
    h.feed(i, rv::CompareSet{"winner", false, {}, std::vector<uint8_t>(me.begin(), me.end())});
  }
  std::string won;
  for (rv::ConnId i = 10; i < 74; ++i)
    if (std::get<rv::CompareSetResult>(h.one(i)).swapped) {
      ++winners;
      won = "racer-" + std::to_string(i);
    }
  CHECK(winners == 1);
  CHECK(value("winner") == won);
}

TEST_CASE("core: communicator state is forgotten with the last rank; keys are not") {
  Harness h;
  h.client(9);  // a store connection that stays all along
  h.feed(9, rv::Set{"config", {'c'}});
  h.take(9);
  auto run = [&](rv::ConnId first, uint8_t id_byte) {
    for (rv::ConnId i = first; i < first + 2; ++i) h.client(i);
    rv::Join j0 = join_msg(0, 2, "a");
    j0.unique_id = {id_byte};
    h.feed(first, j0);
    h.feed(first + 1, join_msg(1, 2, "b"));
    for (rv::ConnId i = first; i < first + 2; ++i) {
      CHECK(h.one_as<rv::Joined>(i).unique_id == std::vector<uint8_t>{id_byte});
    }
  };
  run(1, 7);
  CHECK(h.core.job_has_communicators("job"));
  // While a rank of it remains, the completed generation is refused to latecomers.
  h.feed(1, rv::Leave{});
  h.take(1);
  h.client(5);
  h.feed(5, join_msg(1, 2, "late"));
  CHECK_THAT(h.error_of(h.one(5)).message, Catch::Contains("after it had completed"));
  h.core.on_disconnect(5, "end of stream");
  // The last rank goes (here without leaving): the state goes with it.
  h.core.on_disconnect(2, "end of stream");
  CHECK_FALSE(h.core.job_has_communicators("job"));
  CHECK(h.core.job_key_count("job") == 1);
  // A new run of the same job id gets a fresh generation 0 and its own id.
  run(11, 8);
  h.feed(9, rv::Get{"config", 0});
  CHECK(text(h.one(9)) == "c");

  // A failed generation's message stays while its failed joiners are connected,
  // and go with them.
  for (rv::ConnId i : {11, 12}) {
    h.feed(i, rv::Leave{});
    h.take(i);
  }
  h.client(21);
  h.client(22);
  h.feed(21, join_msg(0, 2, "a"));
  h.feed(22, join_msg(0, 2, "b"));  // rank 0 twice
  CHECK(h.error_of(h.one(21)).code == CC_ERR_MISMATCH);
  CHECK(h.error_of(h.one(22)).code == CC_ERR_MISMATCH);
  h.client(23);
  h.feed(23, join_msg(1, 2, "c"));
  CHECK_THAT(h.error_of(h.one(23)).message, Catch::Contains("already failed"));
  for (rv::ConnId i : {21, 22, 23}) h.core.on_disconnect(i, "end of stream");
  CHECK_FALSE(h.core.job_has_communicators("job"));
  run(31, 9);
}

TEST_CASE("core: limits refuse with an error") {
  rv::ServerOptions o;
  o.max_connections = 2;
  o.max_jobs = 1;
  o.max_keys_per_job = 2;
  Harness h(o);
  h.client(1, "a");
  h.connect(2);
  CHECK_FALSE(h.core.on_connect(3, "x:1", h.now));
  CHECK_THAT(h.error_of(h.one(3)).message, Catch::Contains("limit of 2 connections"));
  h.feed(2, rv::Hello{"b", "h", 1, "t"});
  auto v = h.take(2);
  REQUIRE(v.size() == 1);  // the error is the answer to the hello: connect fails with it
  CHECK_THAT(h.error_of(v[0].message).message, Catch::Contains("limit of 1 jobs"));
  h.feed(1, rv::Set{"k1", {1}});
  h.feed(1, rv::Set{"k2", {1}});
  h.feed(1, rv::Set{"k2", {2}});  // replacing is fine
  h.take(1);
  h.feed(1, rv::Add{"k3", 1});
  CHECK_THAT(h.error_of(h.one(1)).message, Catch::Contains("limit of 2 keys"));
  rv::Join j = join_msg(0, 1000, "a");
  h.feed(1, j);
  CHECK(h.error_of(h.one(1)).code == CC_ERR_INVALID_ARGUMENT);
}

TEST_CASE("core: stop releases every waiter and tells members") {
  Harness h;
  h.client(1);
  h.client(2);
  h.client(3);
  h.feed(1, join_msg(0, 1, "a"));
  CHECK(std::holds_alternative<rv::Joined>(h.one(1)));
  h.feed(2, rv::Get{"never", 10000}, 5);
  h.feed(3, join_msg(0, 2, "b"), 6);  // generation 0 is complete: refused
  h.take(3);
  rv::Join j = join_msg(0, 2, "b");
  j.info.comm_number = 1;
  h.feed(3, j, 7);
  h.core.stop();
  auto v = h.take(2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 5);
  CHECK_THAT(h.error_of(v[0].message).message, Catch::Contains("server is stopping"));
  CHECK_THAT(h.error_of(h.one(3)).message, Catch::Contains("server is stopping"));
  auto ev = std::get<rv::PeerEvent>(h.one(1));
  CHECK(ev.kind == rv::PeerEventKind::server_stopping);
  CHECK(h.sink.closed.size() == 3);
  CHECK(h.core.connection_count() == 0);
  CHECK(h.core.job_count() == 0);
  CHECK_FALSE(h.core.on_connect(9, "x:1", h.now));
}

TEST_CASE("core: abort while joining fails the generation for every joiner") {
  Harness h;
  h.client(1);
  h.client(2);
  h.feed(1, join_msg(0, 3, "a"));
  h.feed(2, join_msg(1, 3, "b"));
  h.feed(2, rv::Abort{"init failed"}, 9);
  auto v = h.take(2);
  REQUIRE(v.size() == 2);
  CHECK(h.error_of(v[0].message).code == CC_ERR_ABORTED);
  CHECK(v[1].request_id == 9);
  CHECK(std::holds_alternative<rv::Ok>(v[1].message));
  CHECK_THAT(h.refusal(1, CC_ERR_ABORTED), Catch::Contains("rank 1 (host b, pid 1001) aborted") &&
                                               Catch::Contains("init failed"));
  CHECK_FALSE(h.core.job_busy("job"));
}

TEST_CASE("core: random and mutated byte streams never break it") {
  rv::ServerOptions o;
  o.handshake_timeout = 50ms;
  o.frame_timeout = 20ms;
  o.job_ttl = 500ms;
  o.max_bytes_per_job = 64;
  o.max_keys_per_job = 3;
  Harness h(o);
  std::mt19937 rng(12345);
  std::vector<rv::Message> valid = {
      rv::Set{"k", {1, 2}},
      rv::Get{"k", 30},
      rv::Add{"n", 2},
      rv::Wait{{"k", "m"}, 40},
      rv::Del{"k"},
      join_msg(0, 2, "a", 30),
      join_msg(1, 2, "b", 30),
      rv::Leave{},
      rv::Heartbeat{3},
      rv::Abort{"x"},
      rv::Ok{},
      rv::Auth{{1, 2}},
      rv::CompareSet{"m", false, {}, {7}},
      rv::CompareSet{"k", true, {1, 2}, {3}},
  };
  rv::ConnId next = 1000;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> stream;
    const rv::ConnId id = next++;
    h.connect(id);
    if (rng() % 4 != 0)
      rv::append_frame(stream, 1, rv::Hello{"fuzz" + std::to_string(rng() % 3), "h", 1, "f"});
    const int frames = static_cast<int>(rng() % 6);
    for (int f = 0; f < frames; ++f)
      rv::append_frame(stream, static_cast<uint32_t>(rng()), valid[rng() % valid.size()]);
    const int flips = static_cast<int>(rng() % 4);
    for (int f = 0; f < flips && !stream.empty(); ++f)
      stream[rng() % stream.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 3 == 0 && !stream.empty()) stream.resize(rng() % stream.size());
    size_t pos = 0;
    while (pos < stream.size()) {
      const size_t n = std::min(stream.size() - pos, static_cast<size_t>(1 + rng() % 40));
      h.core.on_bytes(id, std::span(stream.data() + pos, n), h.now);
      pos += n;
    }
    if (rng() % 2 == 0) h.core.on_disconnect(id, "gone");
    h.advance(std::chrono::milliseconds(rng() % 30));
  }
  h.advance(1000ms);  // every deadline passes: only silent-but-valid connections can remain
  for (rv::ConnId id = 1000; id < next; ++id) h.core.on_disconnect(id, "end");
  CHECK(h.core.connection_count() == 0);
  h.advance(500ms);  // the job TTL: jobs that kept keys go too
  CHECK(h.core.job_count() == 0);
  CHECK_FALSE(h.core.next_deadline());
}

TEST_CASE("core: a rank behind NAT is named to every rank with the fix") {
  Harness h;  // the harness connects ConnId i from 10.0.0.i
  h.client(1);
  h.client(2);
  rv::Join a = join_msg(0, 2, "a");
  a.info.nccl_addr = "10.0.0.1";  // what its connection shows too
  rv::Join b = join_msg(1, 2, "b");
  b.info.nccl_addr = "172.17.0.2";  // a Docker bridge address
  h.feed(1, a, 5);
  h.feed(2, b, 6);
  for (rv::ConnId i = 1; i <= 2; ++i) {
    const rv::Message m = h.one(i);
    const auto& j = std::get<rv::Joined>(m);
    CHECK_THAT(j.notice, Catch::Contains("rank 1 (host b, pid 1001) will have NCCL use the "
                                         "address 172.17.0.2") &&
                             Catch::Contains("came from 10.0.0.2") &&
                             Catch::Contains("--network host") &&
                             Catch::Contains("NCCL_SOCKET_IFNAME"));
    CHECK_THAT(j.notice, !Catch::Contains("rank 0"));
  }
}
