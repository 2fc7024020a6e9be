// What one connection may make the server's core hold and do, with no
// sockets: parked requests bounded per connection, per job and in all; a Set
// that wakes many waiters and many deadlines passing together answered a
// turn's budget at a time; the handshake's small frames; the frame deadline
// per frame.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "rendezvous/server_core.hpp"
#include "tests/unit/server_core_harness.hpp"

using namespace std::chrono_literals;
namespace rv = cc::rv;

using namespace cc::test;

namespace {

constexpr size_t kTurn = rv::ServerCore::kAnswersPerTurn;

// Limits on parked requests high enough for the scale cases.
rv::ServerOptions roomy() {
  rv::ServerOptions o;
  o.max_parked_bytes_per_connection = size_t{1} << 30;
  o.max_parked_bytes_per_job = size_t{1} << 30;
  o.max_parked_bytes_total = size_t{1} << 30;
  return o;
}

// Sends n Gets of `key` (request ids from 1) on connection id as one stream.
void park_gets(Harness& h, rv::ConnId id, const std::string& key, size_t n,
               uint32_t timeout_ms = 60000) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < n; ++i)
    rv::append_frame(bytes, static_cast<uint32_t>(i + 1), rv::Get{key, timeout_ms});
  h.core.on_bytes(id, bytes, h.now);
}

size_t parked_gets(Harness& h) { return h.core.metrics(h.now).parked_gets; }
size_t parked_waits(Harness& h) { return h.core.metrics(h.now).parked_waits; }

// Calls expire until no deadline is due; returns how many calls it took.
size_t expire_until_done(Harness& h) {
  size_t calls = 0;
  while (h.core.next_deadline() && *h.core.next_deadline() <= h.now) {
    h.core.expire(h.now);
    REQUIRE(++calls < 100000);
  }
  return calls;
}

// The request ids answered to connection id, each with a Value of `value`.
std::set<uint32_t> values_answered(Harness& h, rv::ConnId id, const std::string& value) {
  std::set<uint32_t> ids;
  for (const Sent& s : h.take(id)) {
    INFO("request " << s.request_id << " got " << rv::type_name(rv::type_of(s.message)));
    REQUIRE(std::holds_alternative<rv::Value>(s.message));
    CHECK(text(s.message) == value);
    CHECK(ids.insert(s.request_id).second);
  }
  return ids;
}

}  // namespace

TEST_CASE("abuse: parked gets and waits past a limit are refused in words") {
  rv::ServerOptions o;
  const size_t per_get = rv::ServerCore::kParkedCost + 1;  // key "k"
  o.max_parked_bytes_per_connection = 10 * per_get;
  o.max_parked_bytes_per_job = 15 * per_get;
  o.max_parked_bytes_total = 15 * per_get + 600;  // room for one more wait
  Harness h(o);
  h.client(1, "a");
  park_gets(h, 1, "k", 11);
  auto v = h.take(1);
  REQUIRE(v.size() == 1);  // the first ten park, the eleventh is refused
  CHECK(v[0].request_id == 11);
  const rv::Error e = h.error_of(v[0].message);
  CHECK(e.code == CC_ERR_RENDEZVOUS);
  CHECK_THAT(e.message, Catch::Contains("get of key 'k' of job 'a' was refused") &&
                            Catch::Contains("this connection's parked gets and waits hold 5130") &&
                            Catch::Contains("--max-parked-bytes-per-connection"));
  CHECK(parked_gets(h) == 10);
  CHECK_FALSE(h.sink.closed.count(1));  // refused, not dropped

  h.client(2, "a");
  park_gets(h, 2, "k", 6);
  CHECK_THAT(h.refusal(2, CC_ERR_RENDEZVOUS),
             Catch::Contains("the parked gets and waits of job 'a' hold") &&
                 Catch::Contains("--max-parked-bytes-per-job"));
  h.client(3, "b");
  h.feed(3, rv::Wait{{"x", "y", "x"}, 1000});  // 515 bytes
  h.feed(3, rv::Wait{{"x", "y"}, 1000});
  CHECK_THAT(h.refusal(3, CC_ERR_RENDEZVOUS),
             Catch::Contains("wait for 2 keys of job 'b' was refused") &&
                 Catch::Contains("the parked gets and waits of every job hold") &&
                 Catch::Contains("--max-parked-bytes)"));
  CHECK(h.core.metrics(h.now).counters.limits[static_cast<size_t>(rv::LimitKind::max_parked)] == 3);

  // What a closed connection had parked is given back: the job has room again.
  h.core.on_disconnect(1, "end of stream");
  CHECK(parked_gets(h) == 5);
  park_gets(h, 2, "k", 5);
  CHECK(h.take(2).empty());
  CHECK(parked_gets(h) == 10);
  h.client(4, "a");
  h.feed(4, rv::Set{"k", {'v'}});
  h.take(4);
  CHECK(h.take(2).size() == 10);
  CHECK(parked_gets(h) == 0);
  park_gets(h, 2, "j", 10);  // every byte came back
  CHECK(h.take(2).empty());
}

TEST_CASE("abuse: one Set waking many waiters answers a turn's budget at a time") {
  Harness h(roomy());
  const size_t n = 100000;
  h.client(1);
  h.client(2);
  park_gets(h, 1, "k", n / 2);
  park_gets(h, 2, "k", n / 2);
  h.client(3);
  h.feed(3, rv::Wait{{"k", "k"}, 60000}, 7);
  REQUIRE(parked_gets(h) == n);

  h.client(9);
  h.feed(9, rv::Set{"k", {'v', '1'}});
  CHECK(std::holds_alternative<rv::Ok>(h.one(9)));
  const size_t first = h.sink.out[1].size() + h.sink.out[2].size() + h.sink.out[3].size();
  CHECK(first == kTurn);
  // The rest is due at once, so the I/O layer's timer fires again now.
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() <= h.now);

  // The key changes meanwhile: the waiters of the first Set still get its
  // value; a Get parked after the delete waits for the next Set.
  h.feed(9, rv::Del{"k"});
  h.take(9);
  h.feed(9, rv::Get{"k", 60000}, 99);
  CHECK(h.take(9).empty());

  const size_t calls = expire_until_done(h);
  CHECK(calls == (n + 1 - first + kTurn - 1) / kTurn);
  CHECK(values_answered(h, 1, "v1").size() == n / 2);
  CHECK(values_answered(h, 2, "v1").size() == n / 2);
  // The Wait names "k" twice; it saw it set once, so it is answered, once.
  auto w = h.take(3);
  REQUIRE(w.size() == 1);
  CHECK(w[0].request_id == 7);
  CHECK(std::holds_alternative<rv::Ok>(w[0].message));
  CHECK(parked_gets(h) == 1);  // connection 9's
  CHECK(parked_waits(h) == 0);

  h.feed(3, rv::Set{"k", {'v', '2'}});
  h.take(3);
  auto late = h.take(9);
  REQUIRE(late.size() == 1);
  CHECK(late[0].request_id == 99);
  CHECK(text(late[0].message) == "v2");
  CHECK_FALSE(h.core.next_deadline());
}

TEST_CASE("abuse: deadlines that pass together fire a turn's budget at a time") {
  Harness h(roomy());
  const size_t n = 100000;
  for (rv::ConnId id = 1; id <= 4; ++id) {
    h.client(id);
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < n / 4; ++i)
      rv::append_frame(bytes, static_cast<uint32_t>(i + 1), rv::Wait{{"a", "b"}, 1000});
    h.core.on_bytes(id, bytes, h.now);
  }
  REQUIRE(parked_waits(h) == n);
  h.now += 1000ms;
  h.core.expire(h.now);
  size_t answered = 0;
  for (rv::ConnId id = 1; id <= 4; ++id) answered += h.sink.out[id].size();
  CHECK(answered == kTurn);
  CHECK(parked_waits(h) == n - kTurn);
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() <= h.now);

  CHECK(expire_until_done(h) == (n - kTurn + kTurn - 1) / kTurn);
  CHECK(parked_waits(h) == 0);
  for (rv::ConnId id = 1; id <= 4; ++id) {
    std::set<uint32_t> ids;
    for (const Sent& s : h.take(id)) {
      const rv::Error e = h.error_of(s.message);
      CHECK(e.code == CC_ERR_TIMEOUT);
      ids.insert(s.request_id);
    }
    CHECK(ids.size() == n / 4);
  }
  CHECK_FALSE(h.core.next_deadline());
}

TEST_CASE("abuse: a connection that closes holding many parked requests leaves nothing") {
  Harness h(roomy());
  const size_t n = 100000;
  h.client(1);
  park_gets(h, 1, "k", n);
  h.feed(1, rv::Wait{{"k", "other"}, 60000}, 0);
  REQUIRE(parked_gets(h) == n);
  h.client(2);
  h.feed(2, rv::Get{"k", 60000}, 5);
  h.core.on_disconnect(1, "end of stream");
  // A turn's budget is taken out at once, the rest in the next turns.
  CHECK(parked_gets(h) == n + 1 - kTurn);
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() <= h.now);
  CHECK(expire_until_done(h) == (n + 1 - kTurn + kTurn - 1) / kTurn);
  CHECK(parked_gets(h) == 1);
  CHECK(parked_waits(h) == 0);
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() == h.now + 60000ms);  // connection 2's Get only
  h.client(3);
  h.feed(3, rv::Set{"k", {'v'}});
  h.take(3);
  auto v = h.take(2);
  REQUIRE(v.size() == 1);
  CHECK(v[0].request_id == 5);
  CHECK(h.sink.out[1].empty());
  CHECK_FALSE(h.core.next_deadline());
}

TEST_CASE("abuse: a job whose last connection left many parked gets goes once they are out") {
  rv::ServerOptions o = roomy();
  o.job_ttl = 0ms;
  Harness h(o);
  h.client(1, "gone");
  park_gets(h, 1, "k", 3 * kTurn);
  h.core.on_disconnect(1, "end of stream");
  CHECK(h.core.job_exists("gone"));  // its gets are still being taken out
  expire_until_done(h);
  CHECK(parked_gets(h) == 0);
  CHECK_FALSE(h.core.job_exists("gone"));  // no key, no connection: forgotten

  // One with keys stays, for its TTL (here: for good), once they are out.
  h.client(2, "kept");
  h.feed(2, rv::Set{"x", {'1'}});
  park_gets(h, 2, "k", 2 * kTurn);
  h.take(2);
  h.core.on_disconnect(2, "end of stream");
  expire_until_done(h);
  CHECK(parked_gets(h) == 0);
  CHECK(h.core.job_key_count("kept") == 1);
  // A deadline of a get that was left waits out nothing: they are all gone.
  h.advance(120s);
  CHECK(h.sink.out[2].empty());
  CHECK(h.core.job_exists("kept"));
}

TEST_CASE("abuse: a wait goes on when a key it saw set is deleted before the last") {
  Harness h;
  h.client(1);
  h.client(2);
  h.feed(1, rv::Wait{{"a", "b", "a"}, 1000}, 3);
  h.feed(2, rv::Set{"a", {'1'}});
  h.feed(2, rv::Del{"a"});
  h.feed(2, rv::Set{"b", {'1'}});
  h.take(2);
  CHECK(h.take(1).empty());  // "a" is gone again
  h.feed(2, rv::Set{"a", {'2'}});
  h.take(2);
  auto w = h.take(1);
  REQUIRE(w.size() == 1);
  CHECK(w[0].request_id == 3);
  CHECK(std::holds_alternative<rv::Ok>(w[0].message));
  CHECK(parked_waits(h) == 0);
}

TEST_CASE("abuse: frames before the handshake is done are small") {
  SECTION("a hello whose header says 1 MiB is dropped at its header") {
    Harness h;
    h.connect(1);
    auto frame = rv::encode_frame(1, rv::Hello{"job", std::string(3000, 'h'), 1, "test"});
    // The header's length field says 1 MiB.
    const uint32_t mib = 1u << 20;
    for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<uint8_t>(mib >> (8 * i));
    h.core.on_bytes(1, std::span(frame.data(), rv::kHeaderSize + 100), h.now);
    REQUIRE(h.sink.closed.count(1));
    CHECK_THAT(h.sink.closed[1], Catch::Contains("a frame of 1048576 bytes before the handshake"));
    CHECK_THAT(h.refusal(1, CC_ERR_RENDEZVOUS), Catch::Contains("limit of 16384 bytes"));
    CHECK(h.core.metrics(h.now)
              .counters.frame_errors[static_cast<size_t>(rv::FrameErrorKind::frame_too_large)] ==
          1);
  }
  SECTION("one that arrives a byte at a time is dropped past the limit") {
    Harness h;
    h.connect(1);
    rv::Hello big{"job", "h", 1, "test"};
    std::vector<uint8_t> frame = rv::encode_frame(1, big);
    frame.resize(rv::kHeaderSize + rv::ServerCore::kMaxHandshakeFrame + 100, 0);
    const uint32_t length = static_cast<uint32_t>(frame.size() - rv::kHeaderSize);
    for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<uint8_t>(length >> (8 * i));
    size_t fed = 0;
    for (; fed < frame.size() && !h.sink.closed.count(1); ++fed)
      h.core.on_bytes(1, std::span(frame.data() + fed, 1), h.now);
    REQUIRE(h.sink.closed.count(1));
    CHECK(fed == rv::kHeaderSize + rv::ServerCore::kMaxHandshakeFrame + 1);
    CHECK_THAT(h.sink.closed[1], Catch::Contains("before the handshake was done"));
  }
  SECTION("while the token is asked for, too") {
    rv::ServerOptions o;
    o.token = "tok";
    Harness h(o);
    h.connect(1);
    h.feed(1, rv::Hello{"job", "h", 1, "test"});
    REQUIRE(std::holds_alternative<rv::Challenge>(h.one(1)));
    h.feed(1, rv::Auth{std::vector<uint8_t>(rv::ServerCore::kMaxHandshakeFrame, 1)});
    CHECK_THAT(h.sink.closed[1], Catch::Contains("before the handshake was done"));
  }
  SECTION("after the handshake a frame may be as large as the frame limit") {
    Harness h;
    h.client(1);
    h.feed(1, rv::Set{"k", std::vector<uint8_t>(1u << 20, 7)});
    CHECK(std::holds_alternative<rv::Ok>(h.one(1)));
    CHECK_FALSE(h.sink.closed.count(1));
  }
}

TEST_CASE("abuse: the frame deadline is per frame, so a steady pipeline is never dropped") {
  rv::ServerOptions o;
  o.frame_timeout = 50ms;
  Harness h(o);
  h.client(1);
  // Each read ends a frame and begins the next one: the stream is never on
  // a frame boundary between reads, for longer than many frame deadlines.
  std::vector<uint8_t> stream;
  for (uint32_t i = 0; i < 200; ++i) rv::append_frame(stream, i + 1, rv::Set{"k", {1, 2, 3}});
  const size_t frame = stream.size() / 200;
  const size_t step = frame + 1;
  size_t fed = 0;
  size_t reads = 0;
  while (fed + step < stream.size()) {
    h.core.on_bytes(1, std::span(stream.data() + fed, step), h.now);
    fed += step;
    ++reads;
    h.advance(30ms);
    REQUIRE_FALSE(h.sink.closed.count(1));
  }
  CHECK(reads > 100);
  CHECK(h.take(1).size() == fed / frame);

  // A frame whose bytes keep coming, but too slowly, is still dropped.
  h.client(2);
  auto slow = rv::encode_frame(1, rv::Set{"k", std::vector<uint8_t>(100, 1)});
  for (size_t i = 0; i < slow.size() && !h.sink.closed.count(2); ++i) {
    h.core.on_bytes(2, std::span(slow.data() + i, 1), h.now);
    h.advance(10ms);
  }
  REQUIRE(h.sink.closed.count(2));
  CHECK_THAT(h.sink.closed[2], Catch::Contains("a frame stalled") && Catch::Contains("for 50 ms"));
}

TEST_CASE("abuse: Gets of a large value answer a turn's value bytes per call, in order") {
  constexpr size_t kMiB = size_t{1} << 20;
  constexpr size_t kGets = 60;
  constexpr size_t kPerTurn = rv::ServerCore::kValueBytesPerTurn / kMiB;
  static_assert(kPerTurn >= 1 && kPerTurn < kGets);
  Harness h;
  h.client(1, "a");
  h.client(2, "a");
  h.feed(1, rv::Set{"big", std::vector<uint8_t>(kMiB, 7)});
  REQUIRE(std::holds_alternative<rv::Ok>(h.one(1)));
  // 60 Gets in one read: the first call answers a turn's worth, and the
  // others' frames are not held up behind the rest.
  park_gets(h, 1, "big", kGets, 0);
  CHECK(h.take(1).size() == kPerTurn);
  h.feed(2, rv::Get{"big", 0}, 9);
  CHECK(h.take(2).size() == 1);
  REQUIRE(h.core.next_deadline());
  CHECK(*h.core.next_deadline() <= h.now);  // the rest is due at once
  std::vector<uint32_t> order;
  size_t calls = 0;
  while (h.core.next_deadline() && *h.core.next_deadline() <= h.now) {
    h.core.expire(h.now);
    const auto sent = h.take(1);
    CHECK(sent.size() <= kPerTurn);
    for (const Sent& s : sent) {
      REQUIRE(std::holds_alternative<rv::Value>(s.message));
      CHECK(std::get<rv::Value>(s.message).value.size() == kMiB);
      order.push_back(s.request_id);
    }
    REQUIRE(++calls < 100);
  }
  CHECK(calls == (kGets - 1) / kPerTurn);
  // Every Get was answered once, in the order sent.
  REQUIRE(order.size() == kGets - kPerTurn);
  for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == kPerTurn + i + 1);
  // Small answers are not held back: a Get of a small key in the same read
  // as 3 large ones is answered in the same call.
  h.feed(1, rv::Set{"small", {1}});
  REQUIRE(std::holds_alternative<rv::Ok>(h.one(1)));
  std::vector<uint8_t> mixed;
  rv::append_frame(mixed, 100, rv::Get{"big", 0});
  for (uint32_t i = 0; i < 3; ++i) rv::append_frame(mixed, 101 + i, rv::Get{"small", 0});
  h.core.on_bytes(1, mixed, h.now);
  CHECK(h.take(1).size() == 4);
}
