// The ranks of the recovery tests: recovery_member processes (named by
// $RECOVERY_MEMBER) on a rendezvous at ADDR (cc's server on loopback, or an
// etcd:// address), and what the tests read from their lines.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/rendezvous/member_process.hpp"

namespace cc::test {

// A recovery_member process with a pipe to its stdin and one from its stdout.
class RecoveryMember : public ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;
  RecoveryMember(const std::string& addr, int port, const std::string& job, int rank, int world,
                 const std::vector<std::string>& extra = {})
      : ChildProcess(member_args("RECOVERY_MEMBER", addr, port, job, rank, world, extra)) {}
  RecoveryMember(int port, const std::string& job, int rank, int world,
                 const std::vector<std::string>& extra = {})
      : RecoveryMember("127.0.0.1", port, job, rank, world, extra) {}
  // The next line starting with `prefix`, skipping others (FAILED notes).
  std::string next(const std::string& prefix,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(15000)) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      auto l = line(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
      if (!l) break;
      if (l->rfind(prefix, 0) == 0) return *l;
      seen_.push_back(*l);
    }
    return "(no '" + prefix + "' line; other lines: " + seen() + ")";
  }
  std::string seen() const {
    std::string out;
    for (const auto& s : seen_) out += "[" + s + "] ";
    return out;
  }
  void kill_now(int sig = SIGKILL) { signal(sig); }

 private:
  std::vector<std::string> seen_;
};

using RecoveryMembers = std::map<int, std::unique_ptr<RecoveryMember>>;

// `world` ranks of `job`, each READY in generation 0.
inline RecoveryMembers start_recovery_job(const std::string& addr, int port,
                                          const std::string& job, int world,
                                          std::vector<std::string> extra = {}) {
  RecoveryMembers ms;
  for (int r = 0; r < world; ++r)
    ms[r] = std::make_unique<RecoveryMember>(addr, port, job, r, world, extra);
  for (int r = 0; r < world; ++r) {
    const std::string l = ms[r]->next("READY");
    INFO("rank " << r << ": " << l);
    REQUIRE(l.rfind("READY rank=" + std::to_string(r) + " gen=0", 0) == 0);
  }
  return ms;
}

// The value of `key=` in a RECOVERED or READY line.
inline std::string field(const std::string& line, const std::string& key) {
  const std::regex re("(^| )" + key + "=([^ ]*)");
  std::smatch m;
  return std::regex_search(line, m, re) ? m[2].str() : "(no " + key + ")";
}

// Every line but its rank= field: what all members of a generation agree on.
inline std::string without_rank(const std::string& line) {
  return std::regex_replace(line, std::regex(" rank=[0-9]+"), "");
}

// Every member's RECOVERED line after a shrink: generation `gen`, new ranks
// 0, 1, ... in job-rank order, the members and failed ranks given, and the
// same line on all but for the rank. Returns the lines by job rank.
inline std::map<int, std::string> check_shrunk(RecoveryMembers& ms, const std::string& gen,
                                               const std::string& members,
                                               const std::string& failed) {
  std::map<int, std::string> lines;
  std::string agreed;
  int expect_rank = 0;
  for (auto& [r, m] : ms) {
    const std::string l = m->next("RECOVERED", std::chrono::milliseconds(25000));
    INFO("rank " << r << ": " << l);
    CHECK(field(l, "gen") == gen);
    CHECK(field(l, "rank") == std::to_string(expect_rank++));
    CHECK(field(l, "members") == members);
    CHECK(field(l, "failed") == failed);
    if (agreed.empty()) agreed = without_rank(l);
    CHECK(without_rank(l) == agreed);  // one decision, one id, for all
    lines[r] = l;
  }
  return lines;
}

// The RECOVERED lines of the survivors of a regrow to generation `gen`:
// each keeps its rank, with the members and failed ranks given.
inline void check_regrown(RecoveryMembers& ms, const std::vector<int>& survivors,
                          const std::string& gen, const std::string& members,
                          const std::string& failed) {
  for (int r : survivors) {
    const std::string l = ms[r]->next("RECOVERED");
    INFO("survivor " << r << ": " << l);
    CHECK(field(l, "gen") == gen);
    CHECK(field(l, "rank") == std::to_string(r));  // survivors keep their numbers
    CHECK(field(l, "members") == members);
    CHECK(field(l, "failed") == failed);
  }
}

// A member's RECOVER_ERROR line, checked to carry `code`.
inline std::string recover_error(RecoveryMember& m, int code) {
  const std::string l = m.next("RECOVER_ERROR");
  INFO(l);
  CHECK(l.rfind("RECOVER_ERROR " + std::to_string(code) + " ", 0) == 0);
  return l;
}

// After a shrink to generation 1: kills job rank `killed`, and each of `told`
// hears of the death as generation 1's rank `gen_rank`.
inline void check_death_in_generation_1(RecoveryMembers& ms, int killed,
                                        const std::vector<int>& told, int gen_rank) {
  ms[killed]->kill_now();
  for (int r : told) {
    const std::string f = ms[r]->next("FAILED gen=1");
    INFO(f);
    CHECK(f.find("rank " + std::to_string(gen_rank) + " (host") != std::string::npos);
  }
}

inline void kill_ranks(RecoveryMembers& ms, const std::vector<int>& ranks) {
  for (int r : ranks) {
    ms[r]->kill_now();
    ms[r]->reap();
    ms.erase(r);
  }
}

}  // namespace cc::test
