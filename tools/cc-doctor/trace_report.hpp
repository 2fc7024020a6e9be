// `cc-doctor trace DIR`: every rank's flight recorder file (lib/watch/
// trace_file.hpp) read back and compared, per communicator: the first op
// where the ranks' calls differ, who is behind and in which call, the last
// op every rank completed, and each rank's last five calls. Pure: the
// files' JSON in, a report out, so it is unit-tested on JSON the test writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cc::tools::doctor {

struct TraceCall {
  std::string line;  // "collective", "send", "recv"
  uint64_t seq = 0;
  int peer = -1;
  std::string description;
  std::string fingerprint;
  bool completed = false;
};

struct RankTrace {
  std::string file;
  std::string job;
  uint32_t comm_number = 0, generation = 0;
  int split = 0;
  int rank = -1, nranks = 0;
  std::string host;
  uint32_t pid = 0;
  std::string reason, failure;
  std::vector<TraceCall> calls;  // oldest first
};

// A file's JSON as a RankTrace; false (with *why) when it is not one.
bool parse_trace(const nlohmann::json& j, const std::string& file, RankTrace* out,
                 std::string* why);

// One group of ranks that made the same call at an op.
struct CallGroup {
  std::vector<int> ranks;
  std::string description;  // "" for ranks whose ring does not reach that op
};

struct CommunicatorReport {
  std::string job;
  uint32_t comm_number = 0, generation = 0;
  int split = 0;
  int nranks = 0;
  std::vector<int> ranks;    // whose files were read
  std::vector<int> missing;  // of [0, nranks) without a file
  // The first collective whose fingerprints differ (0: none found), how the
  // ranks' calls there fall into groups, and the op before it where every
  // rank's ring still agreed (0: none).
  uint64_t first_difference = 0;
  std::vector<CallGroup> difference;
  uint64_t agreed_through = 0;
  bool difference_exact = false;  // agreed_through + 1 == first_difference
  std::string pair_difference;    // the first send and recv that disagree, as text
  // Each rank's last collective, grouped; the lowest number first.
  struct Position {
    uint64_t seq = 0;
    std::string description;
    bool completed = false;
    std::vector<int> ranks;
  };
  std::vector<Position> positions;
  uint64_t completed_by_all = 0;  // the last collective every rank saw complete
  struct Last {
    int rank = -1;
    std::string who, reason, failure;
    std::vector<TraceCall> calls;  // its last five, oldest first
  };
  std::vector<Last> last_calls;
};

std::vector<CommunicatorReport> analyse_traces(const std::vector<RankTrace>& traces);
std::string render_traces_text(const std::vector<CommunicatorReport>& reports);
nlohmann::json render_traces_json(const std::vector<CommunicatorReport>& reports);

// "0, 2, 3": up to 16 ranks named, then "and 3 more".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace cc::tools::doctor
