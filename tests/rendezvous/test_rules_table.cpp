// The conformance table (rules_table.hpp) through the rules alone and
// through cc's own server on loopback: every join refusal and the missing
// ranks, each rank getting the table's message exactly; the peer event every
// other member gets when one aborts, reports its init failed or is gone, and
// what the joining ranks get when one gives up. And the rules' own
// bookkeeping: a rank that goes frees its rank and GPU, the recovery's
// agreement compares each call with the first. The etcd suite runs the same
// table on etcd too (tests/etcd/test_rules_conformance.cpp).
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rules/join_rules.hpp"
#include "rendezvous/rules/recovery_rules.hpp"
#include "rendezvous/rules/words.hpp"
#include "tests/rendezvous/rules_table.hpp"

using namespace cc;
using namespace cc::test;

namespace {

// The table's case through JoinCheck: the first refusal, or the message of the
// deadline when every arrival was accepted and some never came.
rv::rules::Refusal through_the_rules(const JoinCase& c, const std::string& job) {
  rv::rules::JoinCheck check;
  const std::string where = rv::rules::communicator_where(job, 1);
  for (const rv::Join& j : c.joins)
    if (auto refused = check.arrive(j.info, where)) return *refused;
  if (check.complete()) return {CC_SUCCESS, ""};
  return {CC_ERR_TIMEOUT,
          rv::rules::never_joined_words(check.missing(), check.world(), check.joined(), where,
                                        c.joins.front().timeout_ms,
                                        {"MASTER_ADDR, MASTER_PORT and job id", "the server"})};
}

// A refusal came, with `code` and exactly `words`.
void check_refused(const std::optional<rv::rules::Refusal>& refused, cc_result_t code,
                   const std::string& words) {
  REQUIRE(refused);
  CHECK(refused->code == code);
  CHECK(refused->words == words);
}

// Each of `cases` through cc's server, each on its own job: `check` on it.
template <typename Case, typename Check>
void through_the_server(const std::vector<Case>& cases, Check check) {
  LoopbackServer server;
  for (const Case& c : cases) {
    INFO(c.name);
    check(server.connect(c.name), c, server_words());
  }
}

}  // namespace

TEST_CASE("rules table: each case's words, from the join rules alone") {
  for (const JoinCase& c : join_cases()) {
    INFO(c.name);
    const rv::rules::Refusal r = through_the_rules(c, c.name);
    CHECK(r.code == c.code);
    CHECK(r.words == expand(c.words, c.name, server_words()));
  }
}

TEST_CASE("rules table: each case's words, from cc's server, to every rank") {
  LoopbackServer server;
  for (const JoinCase& c : join_cases()) {
    INFO(c.name);
    const std::vector<JoinOutcome> out = run_joins(server.connect(c.name), c.joins);
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("join " << i << ": " << out[i].status.message);
      CHECK(out[i].status.code == c.code);
      CHECK(out[i].status.message == expand(c.words, c.name, server_words()));
    }
  }
}

TEST_CASE("rules table: each departure's peer event, from cc's server, to every other member") {
  through_the_server(event_cases(), check_event_case);
}

TEST_CASE("rules table: an abort or a failed init while joining, from cc's server, to every rank") {
  through_the_server(joining_cases(), check_joining_case);
}

TEST_CASE("rules table: each reachability test's verdict, from cc's server, to every rank") {
  through_the_server(preflight_cases(), check_preflight_case);
}

TEST_CASE("join rules: a rank that goes frees its rank and its GPU; missing ranks are sorted") {
  rv::rules::JoinCheck check;
  const std::string where = rv::rules::communicator_where("j", 1);
  CHECK(check.world() == 0);
  CHECK_FALSE(check.complete());
  REQUIRE_FALSE(check.arrive(table_join(3, 4).info, where));
  REQUIRE_FALSE(check.arrive(table_join(1, 4).info, where));
  CHECK(check.world() == 4);
  CHECK(check.joined() == 2);
  CHECK(check.missing() == std::vector<int32_t>{0, 2});
  REQUIRE(check.member(1) != nullptr);
  CHECK(check.member(1)->pid == 1001u);
  CHECK(check.member(2) == nullptr);

  check.leave(1);
  CHECK(check.joined() == 1);
  CHECK(check.missing() == std::vector<int32_t>{0, 1, 2});
  // Another process takes rank 1, on the GPU the one that went had.
  rv::Join again = table_join(1, 4);
  again.info.pid = 7777;
  CHECK_FALSE(check.arrive(again.info, where));
  // A GPU still held is refused, naming its holder.
  rv::Join clash = table_join(0, 4);
  clash.info.host = "host-b";
  clash.info.gpu_uuid = "GPU-1";
  check_refused(
      check.arrive(clash.info, where), CC_ERR_MISMATCH,
      "rank 1 (host host-b, pid 7777) and rank 0 (host host-b, pid 1000) of communicator 1 "
      "of job 'j' use the same GPU GPU-1; give each local rank its own device "
      "(LOCAL_RANK, CC_DEVICE)");
  CHECK(rv::rules::absent_ranks(5, {4, 0, 0, 9, -1}) == std::vector<int32_t>{1, 2, 3});
}

TEST_CASE("join rules: the NCCL words name the first rank while it is in, and no one after") {
  rv::rules::JoinCheck check;
  const std::string where = rv::rules::communicator_where("j", 1);
  REQUIRE_FALSE(check.arrive(table_join(0, 3).info, where));
  check.leave(0);
  rv::Join older = table_join(1, 3);
  older.info.nccl_version = 22605;
  check_refused(check.arrive(older.info, where), CC_ERR_MISMATCH,
                "ranks of communicator 1 of job 'j' load different NCCL versions: rank 0 has "
                "2.28.9, rank 1 (host host-b, pid 1001) has 2.26.5; install the same NCCL "
                "major.minor everywhere");
}

TEST_CASE("join rules: the NCCL ids of several ranks, end to end in rank order, whole") {
  rv::rules::JoinCheck check;
  const std::string where = rv::rules::communicator_where("j", 1);
  const std::vector<uint8_t> id0(128, 0x10), id2(128, 0x12), id3(256, 0x13);
  // They arrive out of order; rank 1 brings none.
  REQUIRE_FALSE(check.arrive(table_join(3, 5).info, where, id3));
  REQUIRE_FALSE(check.arrive(table_join(1, 5).info, where));
  REQUIRE_FALSE(check.arrive(table_join(2, 5).info, where, id2));
  REQUIRE_FALSE(check.arrive(table_join(0, 5).info, where, id0));
  std::vector<uint8_t> want = id0;
  want.insert(want.end(), id2.begin(), id2.end());
  want.insert(want.end(), id3.begin(), id3.end());
  CHECK(check.unique_ids() == want);

  // A rank that went took its process's ids with it; its successor's count.
  check.leave(2);
  CHECK(check.unique_ids().size() == 384);
  const std::vector<uint8_t> id2b(128, 0x22);
  REQUIRE_FALSE(check.arrive(table_join(2, 5).info, where, id2b));
  const std::vector<uint8_t> again = check.unique_ids();
  CHECK(std::vector<uint8_t>(again.begin() + 128, again.begin() + 256) == id2b);

  // Past kMaxUniqueIdBytes a rank's ids are left out whole; rank 0's stay first.
  REQUIRE_FALSE(check.arrive(table_join(4, 5).info, where,
                             std::vector<uint8_t>(rv::kMaxUniqueIdBytes - 256, 0x14)));
  const std::vector<uint8_t> capped = check.unique_ids();
  CHECK(capped.size() == 512);
  CHECK(std::vector<uint8_t>(capped.begin(), capped.begin() + 128) == id0);
  check.clear();
  CHECK(check.unique_ids().empty());
}

TEST_CASE("recovery rules: every call is compared with the first, in the words of both") {
  rv::rules::RecoveryAgreement agreement;
  const std::string where = rv::rules::lineage_where("j", 1, 0);
  const std::string a = "rank 1 (host h, pid 7, generation 0)";
  const std::string b = "rank 2 (host h, pid 8, generation 0)";
  CHECK_FALSE(agreement.started());
  CHECK_FALSE(agreement.call(a, rv::RecoverKind::regrow, 4, where));
  CHECK(agreement.started());
  CHECK(agreement.kind() == rv::RecoverKind::regrow);
  CHECK(agreement.nranks() == 4);
  CHECK_FALSE(agreement.call(b, rv::RecoverKind::regrow, 4, where));
  check_refused(agreement.call(b, rv::RecoverKind::regrow, 5, where), CC_ERR_MISMATCH,
                "ranks disagree on how job 'j', communicator 1, generation 0 goes on: " + a +
                    " called cc_comm_regrow(nranks=4), " + b +
                    " called cc_comm_regrow(nranks=5); every survivor must make the same call");
  const auto refused = agreement.call(b, rv::RecoverKind::shrink, 0, where);
  REQUIRE(refused);
  CHECK_THAT(refused->words, Catch::Contains(b + " called cc_comm_shrink;"));

  // A shrink's size means nothing: two shrinks agree whatever they pass.
  agreement.reset();
  CHECK_FALSE(agreement.started());
  CHECK_FALSE(agreement.call(a, rv::RecoverKind::shrink, 3, where));
  CHECK_FALSE(agreement.call(b, rv::RecoverKind::shrink, 9, where));
  CHECK(agreement.nranks() == 0);
}

TEST_CASE("recovery rules: a regrow must hold every survivor's job rank") {
  const std::string where = rv::rules::lineage_where("j", 1, 2);
  CHECK_FALSE(rv::rules::regrow_holds("S", 3, 4, where));
  check_refused(rv::rules::regrow_holds("S", 4, 4, where), CC_ERR_INVALID_ARGUMENT,
                "S called cc_comm_regrow(nranks=4) on job 'j', communicator 1, generation 2, but "
                "a survivor keeps its job rank 4, which a communicator of 4 ranks does not have; "
                "regrow to at least 5 ranks, or shrink");
  CHECK(rv::rules::recovery_late_words(
            rv::RecoverKind::regrow, 3, where, 2000,
            rv::rules::recovery_missing_words({}, rv::RecoverKind::regrow, {2, 3},
                                              "MASTER_ADDR and job id")) ==
        "cc_comm_regrow(nranks=3) on job 'j', communicator 1, generation 2 did not complete "
        "within 2000 ms: ranks 2, 3 never came: no replacement joined for them; start a process "
        "with RANK=2 (and the others) and the job's MASTER_ADDR and job id (cc-run "
        "--max-restarts does)");
}
