// The values of the reachability test on etcd (backend_preflight.cpp), as
// JSON text an operator can read with etcdctl: a member's endpoint and who
// it is (gen/<g>/preflight/ready/<rank>), the targets rank 0 planned for it
// (preflight/plan/<rank>), what its connections found
// (preflight/report/<rank>), and the one verdict (preflight/verdict).
// Decoding never throws: a value that is not ours decodes to false.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv::etcd {

// ready/<rank>: the member's PreflightReady, and its host and pid (for the
// words, as cc's server names a member from its join).
struct PreflightReadyRecord {
  int32_t rank = -1;  // in the generation
  std::string host;
  uint32_t pid = 0;
  PreflightReady ready;
};

// plan/<rank>: the member's targets (the test is on: it connects, then reports).
struct PreflightPlanRecord {
  std::vector<ProbeTarget> targets;
};

// report/<rank>: what the member's connections found.
struct PreflightReportRecord {
  std::vector<ProbeResult> results;
};

// verdict: how the test ended, for every member: passed, skipped (words:
// why), or failed (code and words).
struct PreflightVerdictRecord {
  enum class Outcome : uint8_t { passed = 1, skipped = 2, failed = 3 };
  Outcome outcome = Outcome::passed;
  uint32_t code = 0;  // a cc_result_t, when failed
  std::string words;
};

std::string encode(const PreflightReadyRecord& r);
bool decode(const std::string& text, PreflightReadyRecord* out);
std::string encode(const PreflightPlanRecord& r);
bool decode(const std::string& text, PreflightPlanRecord* out);
std::string encode(const PreflightReportRecord& r);
bool decode(const std::string& text, PreflightReportRecord* out);
std::string encode(const PreflightVerdictRecord& r);
bool decode(const std::string& text, PreflightVerdictRecord* out);

}  // namespace cc::rv::etcd
