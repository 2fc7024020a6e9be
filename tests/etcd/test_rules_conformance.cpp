// The conformance table of the rendezvous rules on both backends: each case
// runs through cc's own server (on loopback) and through real etcd, and
// every rank on each must get the table's words exactly: every join refusal,
// the missing ranks at the join's deadline (tests/rendezvous/rules_table.*),
// and the recovery's cases below: a shrink and a regrow with a replacement
// (the same next generation), survivors that disagree, a regrow too small
// for a survivor, a deadline with a silent survivor or a rank nobody
// replaced, a second start of a living rank, a second replacement for one
// rank and a replacement's own deadline, a recovery on a member's connection,
// and a replacement of another world size than the regrow's (refused alone).
// And the departures (rules_table.*): the peer event every other member gets
// when one reports its init failed, aborts or is gone without leaving, every
// field; an abort or a failed init while joining; a death in a shrunk
// generation, named by its rank there, after which the rest shrink again;
// and the reachability test's verdicts (it passes; one host; a rank's port
// refuses; a rank's init fails, it aborts or rank 0 is gone while the others
// wait in it; CC_PREFLIGHT=0; a rank that never takes part).
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/etcd/endpoints.hpp"
#include "rendezvous/rules/recovery_rules.hpp"
#include "tests/etcd/etcd_backend.hpp"
#include "tests/etcd/etcd_test.hpp"
#include "tests/rendezvous/rules_table.hpp"

using namespace cc;
using namespace cc::test;
using std::chrono::milliseconds;

namespace {

// One backend of the table: how to connect for a job, and its words.
struct Side {
  std::string name;
  std::function<Connect(const std::string& job)> connect;
  BackendWords words;
};

// Both backends, cc's server first.
std::vector<Side> both_sides(const LoopbackServer& server) {
  rv::etcd::Address address;
  REQUIRE(rv::etcd::parse_address(shared_cluster().address(), &address).ok());
  const std::string etcd_address = shared_cluster().address();
  return {
      {"cc's server", [&server](const std::string& job) { return server.connect(job); },
       server_words()},
      {"etcd", [etcd_address](const std::string& job) { return etcd_connect(etcd_address, job); },
       etcd_words(address.endpoint_list())},
  };
}

// f(side, c) for each case on each side: cc's server (one started here),
// then etcd; the test's output names both.
template <class Case, class F>
void each_case_on_both_sides(const std::vector<Case>& cases, F f) {
  LoopbackServer server;
  for (const Side& side : both_sides(server))
    for (const Case& c : cases) {
      INFO(side.name << ": " << c.name);
      f(side, c);
    }
}

}  // namespace

TEST_CASE("conformance: every join case, the same words on cc's server and on etcd") {
  each_case_on_both_sides(join_cases(), [](const Side& side, const JoinCase& c) {
    const std::vector<JoinOutcome> out = run_joins(side.connect(c.name), c.joins);
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("join " << i << ": " << out[i].status.message);
      CHECK(out[i].status.code == c.code);
      CHECK(out[i].status.message == expand(c.words, c.name, side.words));
    }
  });
}

TEST_CASE("conformance: every departure, the same peer event on cc's server and on etcd") {
  each_case_on_both_sides(event_cases(), [](const Side& side, const EventCase& c) {
    check_event_case(side.connect(c.name), c, side.words);
  });
}

TEST_CASE("conformance: an abort or a failed init while joining, the same words on both backends") {
  each_case_on_both_sides(joining_cases(), [](const Side& side, const JoiningCase& c) {
    check_joining_case(side.connect(c.name), c, side.words);
  });
}

TEST_CASE("conformance: every reachability test's verdict, the same words on both backends") {
  each_case_on_both_sides(preflight_cases(), [](const Side& side, const PreflightCase& c) {
    check_preflight_case(side.connect(c.name), c, side.words);
  });
}

TEST_CASE("conformance: the scalable init's ids of several ranks reach every rank in rank order") {
  // Rank 0 and the ranks that root NCCL's other bootstrap trees bring ids
  // (lib/comm/nccl_ids.hpp); they arrive in another order than their ranks.
  const std::vector<int> order = {3, 1, 0, 4, 2};
  const std::map<int, std::vector<uint8_t>> brought = {{0, std::vector<uint8_t>(128, 0x40)},
                                                       {2, std::vector<uint8_t>(128, 0x42)},
                                                       {4, std::vector<uint8_t>(128, 0x44)}};
  std::vector<uint8_t> want;
  for (const auto& [rank, bytes] : brought) want.insert(want.end(), bytes.begin(), bytes.end());
  LoopbackServer server;
  for (const Side& side : both_sides(server)) {
    INFO(side.name);
    std::vector<rv::Join> joins;
    for (int rank : order) {
      rv::Join j = table_join(rank, 5);
      auto it = brought.find(rank);
      j.unique_id = it == brought.end() ? std::vector<uint8_t>{} : it->second;
      joins.push_back(j);
    }
    const std::vector<JoinOutcome> out = run_joins(side.connect("scalable-ids"), joins, 100);
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("rank " << order[i] << ": " << out[i].status.message);
      REQUIRE(out[i].status.ok());
      CHECK(out[i].joined.unique_id == want);
    }
  }
}

namespace {

// A recovery call by job rank `rank`, `delay_ms` after the one before.
struct Call {
  int rank;
  rv::RecoverKind kind;
  int nranks;
  uint32_t timeout_ms = 10000;
  int delay_ms = 300;
};

struct RecoveryCase {
  std::string name;
  int world;
  std::vector<int> killed;        // gone without leaving, after the join
  std::vector<int> replacements;  // ranks a new process joins for, before the calls
  std::vector<Call> calls;
  cc_result_t code;   // what every call returns
  std::string words;  // its words (CC_SUCCESS: none)
  // On success, what every caller and replacement is told.
  std::vector<int32_t> members = {};  // job ranks by new rank
  std::vector<int32_t> failed = {};   // ranks of generation 0 left out or replaced
};

const rv::RecoverKind kShrink = rv::RecoverKind::shrink;
const rv::RecoverKind kRegrow = rv::RecoverKind::regrow;

std::vector<RecoveryCase> recovery_cases() {
  const std::string at = "job '{job}', communicator 1, generation 0";
  const std::string late = "did not complete within";
  return {
      {"shrink", 4, {1, 3}, {}, {{0, kShrink, 0}, {2, kShrink, 0}}, CC_SUCCESS, "", {0, 2}, {1, 3}},
      {"regrow-replaced",
       3,
       {1},
       {1},
       {{0, kRegrow, 3}, {2, kRegrow, 3}},
       CC_SUCCESS,
       "",
       {0, 1, 2},
       {1}},
      {"disagree",
       3,
       {0},
       {},
       {{1, kShrink, 0}, {2, kRegrow, 3}},
       CC_ERR_MISMATCH,
       "ranks disagree on how " + at +
           " goes on: rank 1 (host host-b, pid 1001, generation 0) called cc_comm_shrink, rank 2 "
           "(host host-c, pid 1002, generation 0) called cc_comm_regrow(nranks=3); every "
           "survivor must make the same call"},
      {"regrow-too-small",
       3,
       {1},
       {},
       {{2, kRegrow, 2}},
       CC_ERR_INVALID_ARGUMENT,
       "rank 2 (host host-c, pid 1002, generation 0) called cc_comm_regrow(nranks=2) on " + at +
           ", but a survivor keeps its job rank 2, which a communicator of 2 ranks does not "
           "have; regrow to at least 3 ranks, or shrink"},
      {"silent-survivor",
       3,
       {2},
       {},
       {{0, kShrink, 0, 1500}},
       CC_ERR_TIMEOUT,
       "cc_comm_shrink on " + at + " " + late +
           " 1500 ms: rank 1 (host host-b, pid 1001, generation 0) is alive but did not call "
           "cc_comm_shrink"},
      {"nobody-replaced",
       3,
       {2},
       {},
       {{0, kRegrow, 3, 2000}, {1, kRegrow, 3, 2000}},
       CC_ERR_TIMEOUT,
       "cc_comm_regrow(nranks=3) on " + at + " " + late +
           " 2000 ms: rank 2 never came: no replacement joined for it; start a process with "
           "RANK=2 and the job's {recover-settings} (cc-run --max-restarts does)"},
  };
}

// A replacement process for job rank `rank`: another host and pid than the
// rank it replaces.
rv::Join replacement_join(int rank, int world, int timeout_ms = 20000) {
  rv::Join j = table_join(rank, world, timeout_ms);
  j.info.host = "host-new";
  j.info.pid = static_cast<uint32_t>(5000 + rank);
  j.unique_id.clear();
  return j;
}

rv::Client::MakeId id_maker() {
  return [](std::vector<uint8_t>* id) {
    id->assign(128, 0x77);
    return Status::success();
  };
}

void check_joined(const rv::Joined& j, const RecoveryCase& c, int job_rank) {
  CHECK(j.generation == 1u);
  // Each member works the list out (cc's server sends rank 0 only).
  std::vector<int32_t> before;
  for (int r = 0; r < c.world; ++r) before.push_back(r);
  CHECK(rv::rules::next_generation_members(before, c.calls.at(0).kind, j) == c.members);
  CHECK(rv::world_size_of(j) == c.members.size());
  CHECK(std::vector<int32_t>(j.failed.begin(), j.failed.end()) == c.failed);
  REQUIRE(j.rank >= 0);
  REQUIRE(static_cast<size_t>(j.rank) < c.members.size());
  CHECK(c.members[static_cast<size_t>(j.rank)] == job_rank);
}

}  // namespace

TEST_CASE("conformance: every recovery case, the same outcome on cc's server and on etcd") {
  each_case_on_both_sides(recovery_cases(), [](const Side& side, const RecoveryCase& c) {
    const Connect connect = side.connect("recover-" + c.name);
    auto ranks = join_world(connect, c.world);
    for (int r : c.killed) ranks[static_cast<size_t>(r)].reset();

    std::vector<std::unique_ptr<rv::Client>> fresh;
    std::vector<std::future<JoinOutcome>> replaced;
    for (int r : c.replacements) {
      fresh.push_back(connect());
      rv::Client* conn = fresh.back().get();
      replaced.push_back(std::async(std::launch::async, [conn, r, &c] {
        JoinOutcome o;
        o.status = conn->join(replacement_join(r, c.world), &o.joined);
        return o;
      }));
      std::this_thread::sleep_for(milliseconds(300));
    }
    std::vector<std::unique_ptr<rv::Client>> own;
    for (size_t i = 0; i < c.calls.size(); ++i) own.push_back(connect());
    std::vector<std::future<JoinOutcome>> calls;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      const Call call = c.calls[i];
      if (i > 0) std::this_thread::sleep_for(milliseconds(call.delay_ms));
      rv::Client* conn = own[i].get();
      calls.push_back(std::async(std::launch::async, [conn, call, &c] {
        rv::Recover req;
        req.info = table_join(call.rank, c.world).info;
        req.kind = call.kind;
        req.nranks = call.nranks;
        req.can_shrink = true;
        req.timeout_ms = call.timeout_ms;
        JoinOutcome o;
        o.status = conn->recover(req, id_maker(), &o.joined);
        return o;
      }));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      const JoinOutcome o = calls[i].get();
      INFO("call by rank " << c.calls[i].rank << ": " << o.status.message);
      CHECK(o.status.code == c.code);
      if (c.code == CC_SUCCESS)
        check_joined(o.joined, c, c.calls[i].rank);
      else
        CHECK(o.status.message == expand(c.words, "recover-" + c.name, side.words));
    }
    for (size_t i = 0; i < replaced.size(); ++i) {
      const JoinOutcome o = replaced[i].get();
      INFO("replacement for rank " << c.replacements[i] << ": " << o.status.message);
      REQUIRE(o.status.ok());
      check_joined(o.joined, c, c.replacements[i]);
      CHECK(o.joined.unique_id == std::vector<uint8_t>(128, 0x77));
    }
  });
}

TEST_CASE("conformance: a replacement of another world size is refused alone; the next one fits") {
  LoopbackServer server;
  for (const Side& side : both_sides(server)) {
    INFO(side.name);
    const std::string job = "wrong-world";
    const Connect connect = side.connect(job);
    auto ranks = join_world(connect, 3);
    ranks[2].reset();
    auto wrong_conn = connect();
    auto wrong = std::async(std::launch::async, [&] {
      JoinOutcome o;
      o.status = wrong_conn->join(replacement_join(2, 4), &o.joined);  // WORLD_SIZE=4
      return o;
    });
    std::this_thread::sleep_for(milliseconds(300));
    std::vector<std::unique_ptr<rv::Client>> own;
    std::vector<std::future<JoinOutcome>> calls;
    for (int r : {0, 1}) {
      own.push_back(connect());
      rv::Client* conn = own.back().get();
      calls.push_back(std::async(std::launch::async, [conn, r] {
        rv::Recover req;
        req.info = table_join(r, 3).info;
        req.kind = kRegrow;
        req.nranks = 3;
        req.can_shrink = true;
        req.timeout_ms = 20000;
        JoinOutcome o;
        o.status = conn->recover(req, id_maker(), &o.joined);
        return o;
      }));
    }
    const JoinOutcome refused = wrong.get();
    CHECK(refused.status.code == CC_ERR_MISMATCH);
    CHECK(refused.status.message ==
          "rank 2 (host host-new, pid 5002) came as a replacement with a world size of 4, but the "
          "survivors of job 'wrong-world', communicator 1, generation 0 regrow to 3; give it "
          "WORLD_SIZE=3");
    const std::vector<JoinOutcome> fits = run_joins(connect, {replacement_join(2, 3)});
    INFO("the replacement that fits: " << fits[0].status.message);
    REQUIRE(fits[0].status.ok());
    const RecoveryCase expected{"wrong-world", 3,  {2},       {2}, {{0, kRegrow, 3}},
                                CC_SUCCESS,    "", {0, 1, 2}, {2}};
    check_joined(fits[0].joined, expected, 2);
    for (size_t i = 0; i < calls.size(); ++i) {
      const JoinOutcome o = calls[i].get();
      INFO("survivor " << i << ": " << o.status.message);
      REQUIRE(o.status.ok());
      check_joined(o.joined, expected, static_cast<int>(i));
    }
  }
}

TEST_CASE("conformance: late joins and replacements, the same words on both backends") {
  LoopbackServer server;
  for (const Side& side : both_sides(server)) {
    INFO(side.name);
    {  // a second start of a living rank is refused
      const std::string job = "twin";
      const Connect connect = side.connect(job);
      auto ranks = join_world(connect, 2);
      const std::vector<JoinOutcome> out = run_joins(connect, {table_join(1, 2)});
      CHECK(out[0].status.code == CC_ERR_MISMATCH);
      CHECK(out[0].status.message ==
            "rank 1 (host host-b, pid 1001) joined communicator 1 of job 'twin' after it had "
            "completed, and rank 1 is alive in job 'twin', communicator 1, generation 0: rank 1 "
            "(host host-b, pid 1001, generation 0). A replacement is taken only for a rank that "
            "failed; this process came for an older generation, or was started twice: stop it "
            "(or, if no rank failed, a rank restarted late or two communicators got one "
            "number: restart the whole job)");
    }
    {  // a second replacement for one rank is refused; the first one's deadline
      const std::string job = "two-replacements";
      const Connect connect = side.connect(job);
      auto ranks = join_world(connect, 2);
      ranks[1].reset();
      rv::Join second = replacement_join(1, 2);
      second.info.pid = 6001;
      const std::vector<JoinOutcome> out =
          run_joins(connect, {replacement_join(1, 2, 2500), second}, 600);
      CHECK(out[1].status.code == CC_ERR_MISMATCH);
      CHECK(
          out[1].status.message ==
          "rank 1 (host host-new, pid 6001) joined communicator 1 of job 'two-replacements' after "
          "it had completed as a replacement for rank 1, but one is already waiting: rank 1 "
          "(host host-new, pid 5001); start one process per failed rank");
      CHECK(out[0].status.code == CC_ERR_TIMEOUT);
      CHECK(out[0].status.message ==
            "rank 1 waited 2500 ms as a replacement in job 'two-replacements', communicator 1, "
            "generation 0, and no cc_comm_regrow took it: the survivors did not call "
            "cc_comm_regrow (or shrank instead) within that time");
    }
    {  // a recovery on a member's own connection is refused
      const Connect connect = side.connect("own-connection");
      auto ranks = join_world(connect, 2);
      rv::Recover req;
      req.info = table_join(0, 2).info;
      req.kind = kShrink;
      req.timeout_ms = 2000;
      rv::Joined out;
      const Status s = ranks[0]->recover(req, id_maker(), &out);
      CHECK(s.code == CC_ERR_INVALID_USAGE);
      CHECK(s.message ==
            "cc_comm_shrink by rank 0 (host host-a, pid 1000): a recovery needs a connection of "
            "its own, and this one is already a member or recovering (a client bug)");
    }
  }
}

namespace {

// A survivor's connection of its own in a recovered generation, and what its
// call returned.
struct Recovered {
  std::unique_ptr<rv::Client> client;
  JoinOutcome outcome;
};

// The survivors, by job rank in increasing order, call cc_comm_shrink from
// generation `from` (of `from_world` ranks), each on a connection of its own.
std::vector<Recovered> shrink_from(const Connect& connect, const std::vector<int>& survivors,
                                   int from_world, uint32_t from) {
  std::vector<Recovered> out(survivors.size());
  for (Recovered& r : out) r.client = connect();
  std::vector<std::future<JoinOutcome>> calls;
  for (size_t i = 0; i < survivors.size(); ++i) {
    rv::Client* conn = out[i].client.get();
    const int job_rank = survivors[i];
    calls.push_back(std::async(std::launch::async, [conn, job_rank, from_world, from] {
      rv::Recover req;
      req.info = table_join(job_rank, from_world).info;
      req.generation = from;
      req.kind = kShrink;
      req.can_shrink = true;
      req.timeout_ms = 10000;
      JoinOutcome o;
      o.status = conn->recover(req, id_maker(), &o.joined);
      return o;
    }));
  }
  for (size_t i = 0; i < calls.size(); ++i) out[i].outcome = calls[i].get();
  return out;
}

// Every survivor got `generation`: the job ranks `after` (the survivors, by
// new rank) worked out from `before` (the job ranks of the generation it
// recovered from), and `failed` in that generation's numbering.
void check_shrunk(const std::vector<Recovered>& got, const std::vector<int32_t>& before,
                  uint32_t generation, const std::vector<int32_t>& after,
                  const std::vector<int32_t>& failed) {
  REQUIRE(got.size() == after.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const JoinOutcome& o = got[i].outcome;
    INFO("job rank " << after[i] << ": " << o.status.message);
    REQUIRE(o.status.ok());
    CHECK(o.joined.generation == generation);
    CHECK(o.joined.rank == static_cast<int32_t>(i));
    CHECK(rv::world_size_of(o.joined) == after.size());
    CHECK(std::vector<int32_t>(o.joined.failed.begin(), o.joined.failed.end()) == failed);
    CHECK(rv::rules::next_generation_members(before, kShrink, o.joined) == after);
  }
}

}  // namespace

TEST_CASE("conformance: a death in a shrunk generation names its new rank; the rest shrink again") {
  using K = rv::PeerEventKind;
  const std::string closed =
      "it closed its connection to the rendezvous without leaving (the process exited or "
      "dropped the communicator without destroying it)";
  LoopbackServer server;
  for (const Side& side : both_sides(server)) {
    INFO(side.name);
    const Connect connect = side.connect("death-in-generation-1");
    auto ranks = join_world(connect, 4);
    ranks[1].reset();
    for (size_t r : {0, 2, 3}) {
      INFO("generation 0, rank " << r);
      check_next_event(*ranks[r], {K::failed, 1, "host-b", 1001, closed});
    }
    // Generation 1: job ranks 0, 2, 3 as ranks 0, 1, 2.
    std::vector<Recovered> gen1 = shrink_from(connect, {0, 2, 3}, 4, 0);
    check_shrunk(gen1, {0, 1, 2, 3}, 1, {0, 2, 3}, {1});
    // The parent communicator is destroyed: its members leave generation 0.
    for (size_t r : {0, 2, 3}) REQUIRE(ranks[r]->leave().ok());

    // Job rank 2 dies: the others are told of rank 1 (its rank in generation
    // 1), with its host and pid, once.
    gen1[1].client.reset();
    for (size_t i : {0, 2}) {
      INFO("generation 1, rank " << i);
      check_next_event(*gen1[i].client, {K::failed, 1, "host-c", 1002, closed});
      check_no_event(*gen1[i].client, milliseconds(i == 0 ? 500 : 10));
    }

    // Generation 2: job ranks 0, 3 (ranks 0 and 2 of generation 1) as ranks 0, 1.
    const std::vector<Recovered> gen2 = shrink_from(connect, {0, 3}, 3, 1);
    check_shrunk(gen2, {0, 2, 3}, 2, {0, 3}, {1});
    for (const Recovered& m : gen2) {
      check_no_event(*m.client, milliseconds(10));
      CHECK(m.client->leave().ok());
    }
  }
}
