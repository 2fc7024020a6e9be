// `cc-doctor trace`: rank files as the library writes them (lib/watch/
// trace_file), read back and compared: the first op where the ranks differ,
// who is behind and where, the last op every rank completed, the last calls.
#include <catch2/catch.hpp>

#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cc/cc.h"
#include "lib/core/call_log.hpp"
#include "lib/watch/trace_file.hpp"
#include "tools/cc-doctor/trace_report.hpp"

using Catch::Matchers::Contains;
using cc::CallDesc;
using cc::CallKind;

namespace {

CallDesc allreduce(uint64_t n) { return {CallKind::allreduce, n, CC_FLOAT32, CC_SUM, -1, false}; }
CallDesc allgather(uint64_t n) { return {CallKind::allgather, n, CC_BFLOAT16, -1, -1, false}; }
CallDesc barrier() { return {}; }

struct Rank {
  explicit Rank(int r, int nranks = 4) : rank(r), nranks(nranks), log(nranks, 2000) {}
  void call(const CallDesc& d, int times = 1) {
    for (int i = 0; i < times; ++i) {
      ++op;
      log.record(d, op, 0, 1000 + static_cast<int64_t>(op));
    }
  }
  void completed(uint64_t through) { log.completed_through(through, 5000); }
  // Its file, as the library writes it, parsed as cc-doctor parses it.
  cc::tools::doctor::RankTrace file(const std::string& reason = "mismatch") const {
    cc::watch::TraceIdentity id{
        "job", 0, 0, 0, rank, nranks, "h" + std::to_string(rank), static_cast<uint32_t>(10 + rank)};
    cc::watch::TraceState st{reason, "", op, 0, log.fingerprint()};
    const auto j = nlohmann::json::parse(cc::watch::trace_json(id, st, log.entries()));
    cc::tools::doctor::RankTrace t;
    std::string why;
    REQUIRE(cc::tools::doctor::parse_trace(j, cc::watch::trace_file_name(id), &t, &why));
    return t;
  }
  int rank, nranks;
  cc::core::CallLog log;
  uint64_t op = 0;
};

}  // namespace

TEST_CASE("cc-doctor trace names the first op where the ranks differ, and who is where") {
  std::deque<Rank> ranks;  // a CallLog does not move
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r);
  for (auto& r : ranks) {
    r.call(allreduce(4194304), 49);
    r.completed(49);
  }
  for (auto& r : ranks) r.call(r.rank == 1 ? allgather(4096) : allreduce(4194304));
  std::vector<cc::tools::doctor::RankTrace> files;
  for (int r = 0; r < 4; ++r)
    if (r != 3) files.push_back(ranks[static_cast<size_t>(r)].file());
  files.push_back(ranks[3].file("timeout"));
  const auto reports = cc::tools::doctor::analyse_traces(files);
  REQUIRE(reports.size() == 1);
  const auto& rep = reports[0];
  CHECK(rep.first_difference == 50);
  CHECK(rep.agreed_through == 49);
  CHECK(rep.difference_exact);
  CHECK(rep.completed_by_all == 49);
  CHECK(rep.missing.empty());
  const std::string text = cc::tools::doctor::render_traces_text(reports);
  CHECK_THAT(text, Contains("first difference: op #50: ranks 0, 2, 3 called cc_allreduce 4194304 "
                            "x FLOAT32 SUM; rank 1 called cc_allgather 4096 x BFLOAT16; the ranks "
                            "diverged after op #49"));
  CHECK_THAT(text, Contains("rank 1 is in op #50 cc_allgather 4096 x BFLOAT16"));
  CHECK_THAT(text, Contains("ranks 0, 2, 3 are in op #50 cc_allreduce 4194304 x FLOAT32 SUM"));
  CHECK_THAT(text, Contains("the last op every rank completed: op #49"));
  CHECK_THAT(text, Contains("rank 3 (host h3, pid 13), written on timeout:"));
  CHECK_THAT(text, Contains("    op #46 cc_allreduce 4194304 x FLOAT32 SUM (complete)"));
  CHECK_THAT(text, Contains("    op #50 cc_allgather 4096 x BFLOAT16 (not seen complete)"));
  const auto j = cc::tools::doctor::render_traces_json(reports);
  const auto& c = j.at("communicators").at(0);
  CHECK(c.at("first_difference").at("op") == 50);
  CHECK(c.at("first_difference").at("exact") == true);
  CHECK(c.at("completed_by_all") == 49);
  CHECK(c.at("last_calls").at(1).at("calls").size() == 5);
}

TEST_CASE("cc-doctor trace: ranks that agree, a rank behind, a missing file") {
  std::deque<Rank> ranks;  // a CallLog does not move
  for (int r = 0; r < 3; ++r) ranks.emplace_back(r, 4);
  for (auto& r : ranks) r.call(allreduce(8), 20);
  ranks[0].call(barrier());
  ranks[2].call(barrier());
  for (auto& r : ranks) r.completed(19);
  std::vector<cc::tools::doctor::RankTrace> files;
  for (const auto& r : ranks) files.push_back(r.file("SIGUSR1"));
  const auto reports = cc::tools::doctor::analyse_traces(files);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].first_difference == 0);
  CHECK(reports[0].missing == std::vector<int>{3});
  const std::string text = cc::tools::doctor::render_traces_text(reports);
  CHECK_THAT(text, Contains("files from 3 (no file from rank 3)"));
  CHECK_THAT(text, Contains("no difference among the collectives the rings hold"));
  CHECK_THAT(text, Contains("behind: rank 1 is in op #20 cc_allreduce 8 x FLOAT32 SUM; ahead: "
                            "ranks 0, 2 are in op #21 cc_barrier"));
  CHECK_THAT(text, Contains("the last op every rank completed: op #19"));
}

TEST_CASE("cc-doctor trace refuses a file that is not a flight recorder's") {
  cc::tools::doctor::RankTrace t;
  std::string why;
  CHECK_FALSE(cc::tools::doctor::parse_trace(nlohmann::json{{"format", "other"}}, "f", &t, &why));
  CHECK_THAT(why, Contains("not a cc flight recorder file"));
  CHECK_FALSE(cc::tools::doctor::parse_trace(nlohmann::json{{"format", "cc-trace 1"}}, "f", &t, &why));
  CHECK_THAT(why, Contains("a field is missing"));
  CHECK(cc::tools::doctor::rank_list({1, 2}) == "1, 2");
}
