// The call check's end-to-end cases, run against cc's server (suite
// rendezvous) and etcd (suite etcd): three call_check_member processes
// (named by $CALL_CHECK_MEMBER) per case, heartbeats every 100 ms, rank 1
// differing at op #50. Every member must hear of it within 2 s of "go", in
// the message expected here, which are the same on both backends.
#pragma once

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/rendezvous/member_process.hpp"

namespace cc::test {

struct DivergenceCase {
  const char* name;
  const char* rank1_call;  // rank 1's op #50, in call_words
  const char* rank0_call;  // everyone else's
};

inline const std::vector<DivergenceCase>& divergence_cases() {
  static const std::vector<DivergenceCase> cases = {
      {"kind", "cc_allgather 4096 x FLOAT32", "cc_allreduce 4096 x FLOAT32 SUM"},
      {"count", "cc_allreduce 8192 x FLOAT32 SUM", "cc_allreduce 4096 x FLOAT32 SUM"},
      {"type", "cc_allreduce 4096 x BFLOAT16 SUM", "cc_allreduce 4096 x FLOAT32 SUM"},
      {"op", "cc_allreduce 4096 x FLOAT32 MAX", "cc_allreduce 4096 x FLOAT32 SUM"},
      {"root", "cc_broadcast 4096 x FLOAT32 root 1", "cc_broadcast 4096 x FLOAT32 root 0"},
      // Its op #50 is the others' op #51 (an all-reduce of 8 x 51 floats).
      {"skip", "cc_allreduce 408 x FLOAT32 SUM", "cc_allreduce 400 x FLOAT32 SUM"},
      {"extra", "cc_barrier", "cc_allreduce 400 x FLOAT32 SUM"},
  };
  return cases;
}

// The message of a difference at op #50 between two ranks, the higher one first.
inline std::string op50_words(const std::string& higher, const std::string& higher_call,
                              const std::string& lower, const std::string& lower_call) {
  return higher + " called op #50 " + higher_call + ", but " + lower + " called op #50 " +
         lower_call +
         "; the ranks diverged after op #49. Every rank must make the same collective calls in "
         "the same order; the flight recorder's files (CC_TRACE_DIR, cc-doctor trace) show each "
         "rank's calls";
}

inline std::string divergence_words(const DivergenceCase& c) {
  return op50_words("rank 1 (host h1, pid 101)", c.rank1_call, "rank 0 (host h0, pid 100)",
                    c.rank0_call);
}

using CallCheckMembers = std::vector<std::unique_ptr<ChildProcess>>;

// The next line of m that starts with `prefix`, or a message naming what came instead.
inline std::string next_line(ChildProcess& m, const std::string& prefix,
                             std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::string others;
  while (std::chrono::steady_clock::now() < until) {
    auto l = m.line(std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now()));
    if (!l) break;
    if (l->rfind(prefix, 0) == 0) return *l;
    others += "[" + *l + "] ";
  }
  return "(no '" + prefix + "' line; other lines: " + others + ")";
}

// Three members of `job` on the rendezvous at addr:port, joined.
inline CallCheckMembers start_call_check_job(const std::string& addr, int port,
                                             const std::string& job, const std::string& which) {
  CallCheckMembers ms;
  for (int r = 0; r < 3; ++r)
    ms.push_back(std::make_unique<ChildProcess>(
        member_args("CALL_CHECK_MEMBER", addr, port, job, r, 3, {which, "--interval", "100"})));
  for (int r = 0; r < 3; ++r) {
    const std::string l = next_line(*ms[r], "READY", std::chrono::milliseconds(20000));
    INFO("rank " << r);
    REQUIRE(l == "READY " + std::to_string(r));
  }
  return ms;
}

inline void leave_all(CallCheckMembers& ms) {
  for (auto& m : ms) m->say("leave");
  for (size_t r = 0; r < ms.size(); ++r) {
    INFO("rank " << r);
    CHECK(next_line(*ms[r], "LEFT", std::chrono::milliseconds(10000)) == "LEFT");
  }
}

// No member prints a MISMATCH or FAILED line for 800 ms, eight heartbeats. A
// split child's "REPORTED" line says only that its first points went.
inline void expect_quiet(CallCheckMembers& ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  for (size_t r = 0; r < ms.size(); ++r) {
    INFO("rank " << r);
    std::string heard;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      auto l = ms[r]->line(std::max(left, std::chrono::milliseconds(1)));
      if (!l) break;
      if (l->rfind("REPORTED ", 0) != 0) heard += "[" + *l + "] ";
    }
    CHECK(heard == "");
  }
}

// Runs one divergence case; returns what each rank heard (its MISMATCH
// line's message), checked to come within 2 s of "go" on every rank.
inline std::vector<std::string> run_divergence(const std::string& addr, int port,
                                               const std::string& job, const DivergenceCase& c) {
  CallCheckMembers ms = start_call_check_job(addr, port, job, c.name);
  const auto go = std::chrono::steady_clock::now();
  for (auto& m : ms) m->say("go");
  std::vector<std::string> words;
  std::string times;  // per rank; rank 2 starts --delay-ms (400) after go
  const std::string prefix = "MISMATCH 1 ";
  for (size_t r = 0; r < ms.size(); ++r) {
    const std::string l = next_line(*ms[r], "MISMATCH", std::chrono::milliseconds(5000));
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - go)
            .count();
    INFO("case " << c.name << ", rank " << r << ": " << l);
    CHECK(took < 2000);
    times += (r == 0 ? "" : ", ") + std::to_string(took);
    CHECK(l.rfind(prefix, 0) == 0);
    words.push_back(l.rfind(prefix, 0) == 0 ? l.substr(prefix.size()) : l);
  }
  std::printf("%s, case %s: ranks 0, 1, 2 told %s ms after go\n", addr.c_str(), c.name,
              times.c_str());
  leave_all(ms);
  return words;
}

// A communicator and a child split from it (all three ranks, numbered in
// reverse in the child), the kind differing at op #50 on the child only
// (child_differs) or on the parent only: the one that differs is flagged on
// every rank, within 2 s, in its own numbers; the other never is. Returns
// the message each rank heard.
inline std::vector<std::string> run_split(const std::string& addr, int port, const std::string& job,
                                          bool child_differs) {
  CallCheckMembers ms =
      start_call_check_job(addr, port, job, child_differs ? "split-child" : "split-parent");
  const auto go = std::chrono::steady_clock::now();
  for (auto& m : ms) m->say("go");
  const std::string flagged = child_differs ? "MISMATCH 1.s1 " : "MISMATCH 1 ";
  std::vector<std::string> words;
  for (size_t r = 0; r < ms.size(); ++r) {
    const std::string l = next_line(*ms[r], "MISMATCH", std::chrono::milliseconds(5000));
    INFO("rank " << r << ": " << l);
    CHECK(std::chrono::steady_clock::now() - go < std::chrono::milliseconds(2000));
    CHECK(l.rfind(flagged, 0) == 0);
    words.push_back(l.rfind(flagged, 0) == 0 ? l.substr(flagged.size()) : l);
  }
  expect_quiet(ms);  // the communicator that agrees stays unflagged
  leave_all(ms);
  return words;
}

inline std::string split_words(bool child_differs) {
  if (!child_differs) return divergence_words(divergence_cases().front());
  // Job ranks 0 and 1 are ranks 2 and 1 of the child.
  return op50_words("rank 2 (host h0, pid 100)", "cc_allreduce 4096 x FLOAT32 SUM",
                    "rank 1 (host h1, pid 101)", "cc_allgather 4096 x FLOAT32");
}

// Two communicators whose calls each rank interleaves in its own order: no
// rank may hear of a mismatch, though every call was reported.
inline void run_legal(const std::string& addr, int port, const std::string& job) {
  CallCheckMembers ms = start_call_check_job(addr, port, job, "legal");
  for (auto& m : ms) m->say("go");
  for (size_t r = 0; r < ms.size(); ++r) {
    INFO("rank " << r);
    CHECK(next_line(*ms[r], "CALLED", std::chrono::milliseconds(10000)) == "CALLED");
  }
  expect_quiet(ms);  // the last points were compared too
  leave_all(ms);
}

}  // namespace cc::test
