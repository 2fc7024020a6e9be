// The etcd node agent's core (rendezvous/etcd/node_agent.hpp) against a real
// one-member etcd: claims that come together go as one transaction and each
// gets the answer it would have had alone (a taken rank among them too);
// ranks watching one range share one stream, each from its own revision; a
// rank's end is told once with its words and its keys deleted; and the
// lines between a rank and its agent read back what was written.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "rendezvous/etcd/client.hpp"
#include "rendezvous/etcd/keys.hpp"
#include "rendezvous/etcd/node_agent.hpp"
#include "rendezvous/etcd/node_messages.hpp"
#include "rendezvous/etcd/records.hpp"
#include "rendezvous/etcd/wire.hpp"
#include "tests/etcd/etcd_test.hpp"

namespace etcd = cc::rv::etcd;
namespace node = cc::rv::etcd::node;
using namespace cc::test;
using std::chrono::milliseconds;

namespace {

Clock::time_point in(int ms) { return Clock::now() + milliseconds(ms); }

std::unique_ptr<node::Agent> start_agent(const std::string& address) {
  node::AgentOptions o;
  o.backend.address = address;
  o.backend.heartbeat_window = milliseconds(5000);
  o.host = "node-7";
  o.pid = 777;
  o.gather = milliseconds(50);  // every claim below lands in one batch
  std::unique_ptr<node::Agent> a;
  const cc::Status s = node::Agent::start(o, &a);
  INFO(s.message);
  REQUIRE(s.ok());
  return a;
}

std::unique_ptr<etcd::Client> client_for(const std::string& address) {
  etcd::ClientOptions o;
  REQUIRE(etcd::parse_address(address, &o.address).ok());
  std::unique_ptr<etcd::Client> c;
  REQUIRE(etcd::Client::create(o, &c).ok());
  return c;
}

// A rank's claim as the etcd backend makes it (backend_join.cpp).
etcd::Txn claim_of(const etcd::Keys& keys, int rank, const std::string& value, int64_t lease) {
  const etcd::Gen g(1);
  etcd::Txn t;
  t.compare = {etcd::Compare::absent(keys.member(g, rank)), etcd::Compare::absent(keys.result(g))};
  t.success = {etcd::Op::put(keys.member(g, rank), value, lease)};
  t.failure = {etcd::Op::get(keys.member(g, rank)), etcd::Op::get(keys.result(g))};
  return t;
}

struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::pair<cc::Status, etcd::TxnResult>> got;

  node::Agent::ClaimDone for_rank(int rank) {
    return [this, rank](const cc::Status& s, const std::string& text) {
      etcd::TxnResult r;
      if (s.ok()) r = etcd::wire::parse_txn(nlohmann::json::parse(text));
      std::lock_guard<std::mutex> lock(mu);
      got[rank] = {s, r};
      cv.notify_all();
    };
  }
  bool wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return got.size() >= n; });
  }
};

}  // namespace

TEST_CASE("node agent: a node's claims go as one transaction, each answered as alone") {
  EtcdCluster& cluster = shared_cluster();
  auto agent = start_agent(cluster.address());
  auto c = client_for(cluster.address());
  const etcd::Keys keys("cc", "agent-claims");
  const etcd::Gen g(1);
  // Rank 5 is taken already, by another process.
  REQUIRE(c->put(keys.member(g, 5), "someone else", 0, in(5000)).ok());

  Answers answers;
  for (int r = 1; r <= 8; ++r)
    agent->claim(
        etcd::wire::txn_json(claim_of(keys, r, "rank " + std::to_string(r), agent->lease())),
        answers.for_rank(r));
  REQUIRE(answers.wait(8));
  for (int r = 1; r <= 8; ++r) {
    const auto& [status, result] = answers.got[r];
    INFO("rank " << r << ": " << status.message);
    REQUIRE(status.ok());
    if (r == 5) {  // refused, with what the rank reads when its claim fails alone
      CHECK_FALSE(result.succeeded);
      REQUIRE(result.responses.size() == 2);
      REQUIRE(result.responses[0].range.kvs.size() == 1);
      CHECK(result.responses[0].range.kvs[0].value == "someone else");
      CHECK(result.responses[1].range.kvs.empty());
      continue;
    }
    CHECK(result.succeeded);
    std::optional<etcd::KeyValue> kv;
    REQUIRE(c->get(keys.member(g, r), in(5000), &kv, nullptr).ok());
    REQUIRE(kv.has_value());
    CHECK(kv->value == "rank " + std::to_string(r));
    CHECK(kv->lease == agent->lease());  // on the node's lease
  }
  // One batch refused (rank 5), one read to sort it out, one batch of the
  // seven others: not eight transactions.
  const auto counts = agent->counts();
  CHECK(counts.claims == 8);
  CHECK(counts.transactions == 3);

  // A batch sent again (its answer lost): every claim finds itself taken,
  // each with its own record, in two requests.
  Answers again;
  for (int r = 1; r <= 4; ++r)
    agent->claim(
        etcd::wire::txn_json(claim_of(keys, r, "rank " + std::to_string(r), agent->lease())),
        again.for_rank(r));
  REQUIRE(again.wait(4));
  for (int r = 1; r <= 4; ++r) {
    const auto& result = again.got[r].second;
    CHECK_FALSE(result.succeeded);
    REQUIRE(result.responses.size() == 2);
    REQUIRE(result.responses[0].range.kvs.size() == 1);
    CHECK(result.responses[0].range.kvs[0].value == "rank " + std::to_string(r));
  }
  CHECK(agent->counts().transactions == 5);
}

TEST_CASE("node agent: ranks watching one range share a stream, each from its own revision") {
  EtcdCluster& cluster = shared_cluster();
  auto agent = start_agent(cluster.address());
  auto c = client_for(cluster.address());
  const etcd::Keys keys("cc", "agent-watch");
  const etcd::Gen g(1);
  int64_t first = 0, second = 0;
  REQUIRE(c->put(keys.events(g), "one", 0, in(5000), &first).ok());
  REQUIRE(c->put(keys.events(g), "two", 0, in(5000), &second).ok());

  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::vector<std::string>> seen;
  auto sink = [&](int who) {
    return [&, who](std::vector<etcd::WatchEvent> evs) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& e : evs) {
        CHECK(e.spec == 0);
        seen[who].push_back(e.kv.value);
      }
      cv.notify_all();
    };
  };
  etcd::WatchSpec news;
  news.key = keys.news(g);
  news.range_end = etcd::prefix_end(news.key);
  news.no_delete = true;
  news.start_revision = first;
  const uint64_t a = agent->subscribe({news}, sink(1));
  news.start_revision = second;  // a rank that claimed later
  const uint64_t b = agent->subscribe({news}, sink(2));
  REQUIRE(c->put(keys.events(g), "three", 0, in(5000)).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10),
                        [&] { return seen[1].size() >= 3 && seen[2].size() >= 2; }));
  }
  CHECK(seen[1] == std::vector<std::string>{"one", "two", "three"});
  CHECK(seen[2] == std::vector<std::string>{"two", "three"});
  agent->unsubscribe(a);
  agent->unsubscribe(b);
  CHECK(agent->counts().streams <= 3);  // one stream, opened again at most once a new rank
}

// etcd keeps a watcher that starts far behind its revision "unsynced" and
// catches it up through its whole history since: a range the stream watched
// before comes back from the present when a read shows it quiet, and still
// tells what comes after.
TEST_CASE("node agent: a quiet range opens again from the present and still tells what comes") {
  EtcdCluster& cluster = shared_cluster();
  auto agent = start_agent(cluster.address());
  auto c = client_for(cluster.address());
  const etcd::Keys keys("cc", "agent-resume");
  const etcd::Gen g(1);
  int64_t put_at = 0;
  REQUIRE(c->put(keys.member(g, 5), "rank 5", 0, in(5000), &put_at).ok());

  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::vector<etcd::WatchEvent>> seen;
  auto sink = [&](int who) {
    return [&, who](std::vector<etcd::WatchEvent> evs) {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& e : evs) seen[who].push_back(std::move(e));
      cv.notify_all();
    };
  };
  const auto wait_for = [&](auto done) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), done);
  };
  // A ring neighbour's key (its delete matters) and one not there (a read
  // cannot tell what happened to it: never skipped).
  etcd::WatchSpec neighbour;
  neighbour.key = keys.member(g, 5);
  neighbour.start_revision = put_at + 1;
  neighbour.no_put = true;
  neighbour.prev_kv = true;
  etcd::WatchSpec absent = neighbour;
  absent.key = keys.member(g, 6);
  const uint64_t a = agent->subscribe({neighbour, absent}, sink(1));
  for (int i = 0; i < 40 && agent->counts().streams == 0; ++i)
    std::this_thread::sleep_for(milliseconds(50));
  REQUIRE(agent->counts().streams >= 1);

  // 300 revisions elsewhere, and a claim through the agent that tells it the
  // store's revision.
  for (int i = 0; i < 300; ++i)
    REQUIRE(c->put(keys.kv("filler"), std::to_string(i), 0, in(5000)).ok());
  Answers answers;
  agent->claim(etcd::wire::txn_json(claim_of(keys, 0, "rank 0", agent->lease())),
               answers.for_rank(0));
  REQUIRE(answers.wait(1));
  REQUIRE(answers.got[0].first.ok());

  // A new range: the stream opens again; the neighbour's comes back from the
  // present, the absent key's from where it was.
  etcd::WatchSpec news;
  news.key = keys.news(g);
  news.range_end = etcd::prefix_end(news.key);
  news.no_delete = true;
  news.start_revision = answers.got[0].second.revision + 1;
  const uint64_t b = agent->subscribe({news}, sink(2));
  REQUIRE(c->put(keys.events(g), "a departure", 0, in(5000)).ok());
  REQUIRE(wait_for([&] { return seen[2].size() >= 1; }));
  CHECK(seen[2].front().kv.value == "a departure");
  const node::Agent::Counts counts = agent->counts();
  CHECK(counts.streams >= 2);
  CHECK(counts.resumed_from_present == 1);

  // What comes after is told: the neighbour's delete, with what it held.
  int64_t deleted = 0;
  REQUIRE(c->delete_range(keys.member(g, 5), "", in(5000), &deleted).ok());
  CHECK(deleted == 1);
  REQUIRE(wait_for([&] { return seen[1].size() >= 1; }));
  CHECK(seen[1].front().type == etcd::WatchEvent::Type::del);
  CHECK(seen[1].front().spec == 0);
  CHECK(seen[1].front().kv.key == keys.member(g, 5));
  REQUIRE(seen[1].front().prev_kv.has_value());
  CHECK(seen[1].front().prev_kv->value == "rank 5");
  agent->unsubscribe(a);
  agent->unsubscribe(b);
}

TEST_CASE("node agent: a rank's end is told once, with its words, and its keys go") {
  EtcdCluster& cluster = shared_cluster();
  auto agent = start_agent(cluster.address());
  auto c = client_for(cluster.address());
  const etcd::Keys keys("cc", "agent-death");
  const etcd::Gen g(1);
  const node::RankId rank = 42;
  REQUIRE(c->put(keys.member(g, 3), "member", agent->lease(), in(5000)).ok());
  REQUIRE(c->put(keys.calls(g, 0, 0, 3), "calls", agent->lease(), in(5000)).ok());
  agent->own(rank, keys.member(g, 3));
  agent->own(rank, keys.calls(g, 0, 0, 3));
  agent->member(rank, node::Membership{keys.generation(g), keys.gone(g, 3), keys.events(g), 3,
                                       "node-7", 4242});
  agent->rank_gone(rank, "exited with signal 9 (killed)");

  const auto deadline = in(10000);
  std::optional<etcd::KeyValue> gone, event, member, calls;
  do {
    std::this_thread::sleep_for(milliseconds(20));
    REQUIRE(c->get(keys.gone(g, 3), in(5000), &gone, nullptr).ok());
  } while (!gone && Clock::now() < deadline);
  REQUIRE(gone.has_value());
  REQUIRE(c->get(keys.events(g), in(5000), &event, nullptr).ok());
  REQUIRE(event.has_value());
  etcd::Departure d;
  REQUIRE(etcd::decode(event->value, &d));
  CHECK(d.kind == cc::rv::PeerEventKind::failed);
  CHECK(d.rank == 3);
  CHECK(d.host == "node-7");
  CHECK(d.pid == 4242);
  CHECK(d.reason == "exited with signal 9 (killed)");
  REQUIRE(c->get(keys.member(g, 3), in(5000), &member, nullptr).ok());
  CHECK_FALSE(member.has_value());
  REQUIRE(c->get(keys.calls(g, 0, 0, 3), in(5000), &calls, nullptr).ok());
  CHECK_FALSE(calls.has_value());
}

TEST_CASE("node agent lines: specs, events and memberships read back what was written") {
  etcd::WatchSpec s;
  s.key = std::string("a/\0b", 4);
  s.range_end = "a0";
  s.start_revision = 17;
  s.no_put = true;
  s.prev_kv = true;
  const auto back = node::parse_spec(node::spec_json(s));
  REQUIRE(back.has_value());
  CHECK(back->key == s.key);
  CHECK(back->range_end == "a0");
  CHECK(back->start_revision == 17);
  CHECK(back->no_put);
  CHECK_FALSE(back->no_delete);
  CHECK(back->prev_kv);

  etcd::WatchEvent e;
  e.type = etcd::WatchEvent::Type::del;
  e.spec = 1;
  e.kv.key = "k";
  e.kv.mod_revision = 99;
  e.prev_kv = etcd::KeyValue{"k", "v", 3, 4, 2, 0x51};
  const auto ev = node::parse_event(node::event_json(e));
  REQUIRE(ev.has_value());
  CHECK(ev->type == etcd::WatchEvent::Type::del);
  CHECK(ev->spec == 1);
  CHECK(ev->kv.mod_revision == 99);
  REQUIRE(ev->prev_kv.has_value());
  CHECK(ev->prev_kv->value == "v");
  CHECK(ev->prev_kv->lease == 0x51);

  const node::Membership m{"g/", "g/gone/3", "g/news/events", 3, "h", 9};
  const auto mb = node::parse_membership(node::membership_json(m));
  REQUIRE(mb.has_value());
  CHECK(mb->generation == "g/");
  CHECK(mb->gone == "g/gone/3");
  CHECK(mb->rank == 3);
  CHECK(mb->pid == 9);
  // Not ours: refused, not guessed.
  CHECK_FALSE(node::parse_line("not json").has_value());
  CHECK_FALSE(node::parse_spec(nlohmann::json{{"key", "***"}}).has_value());
  CHECK_FALSE(node::parse_membership(nlohmann::json::object()).has_value());
}
