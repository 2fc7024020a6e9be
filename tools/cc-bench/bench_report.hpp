// cc-bench's results and how rank 0 writes them: the nccl-tests table on
// stdout, CSV, JSON, and the summary of cc against raw NCCL.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/cc-bench/bench_options.hpp"

namespace cc::tools::bench {

// One timing of one (size, mode, implementation).
struct Result {
  bool ran = false;
  double time_us = 0;
  double algbw = 0;   // GB/s
  double busbw = 0;   // GB/s
  double wrong = -1;  // elements wrong over all ranks; -1 = not checked
};

enum Impl { kCc = 0, kRaw = 1 };
enum Mode { kOutOfPlace = 0, kInPlace = 1 };

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  Result r[2][2];  // [impl][mode]
};

struct CollResults {
  Coll coll;
  double factor = 1;
  std::vector<Row> rows;
  std::string plot;  // the SVG written for it, "" for none
};

// What the whole run was, for headers and files.
struct RunInfo {
  Options opt;
  int nranks = 0;
  std::string host, gpu, nccl_version, nccl_header_version, cc_version;
  int cuda_driver = 0, cuda_runtime = 0;
  std::string registration = "none";    // none, local, window
  std::string nvls;                     // NCCL_NVLS_ENABLE as the run saw it
  std::string rendezvous = "embedded";  // or "external" (cc-run, cc-rendezvous)
  double cc_init_ms = -1;               // the first cc_comm_init_from_env, largest over ranks
  double cc_init_sync_ms = -1;          // a second one, all ranks starting together
  double raw_init_ms = -1;              // ncclCommInitRank, all ranks starting together
  double raw_id_ms = -1;                // ncclGetUniqueId and its broadcast
  std::string allreduce_plan;           // cc_comm_allreduce_plan: which path serves which size
};

// For an all-reduce of `bytes`: the path cc takes under `plan` ("nccl",
// "ll", "oneshot", "twoshot") and the thread blocks (SMs) its kernel
// occupies (0 for NCCL's own).
struct CcPath {
  std::string path = "nccl";
  int blocks = 0;
};
CcPath cc_path(const std::string& plan, size_t bytes, int nranks);

void print_run_header(std::FILE* out, const RunInfo& info);
void print_table_header(std::FILE* out, const RunInfo& info, Coll coll);
void print_row(std::FILE* out, const RunInfo& info, Coll coll, const Row& row);
void print_summary(std::FILE* out, const RunInfo& info, const CollResults& res);

// How cc compares with raw NCCL, from one collective's rows (NaN when not
// measured): smallest cc/raw bus bandwidth ratio for sizes >= 32 MiB, largest
// cc - raw time for 8 B .. 64 KiB, both out-of-place.
struct Goals {
  double min_bw_ratio_large;
  double max_latency_delta_us_small;
};
Goals goals(const CollResults& res);

// Files; false with the reason in `error`.
bool write_csv(const std::string& path, const RunInfo& info, const std::vector<CollResults>& all,
               std::string* error);
bool write_json(const std::string& path, const RunInfo& info, const std::vector<CollResults>& all,
                std::string* error);

// "8B", "64K", "32M", "1G" for a byte size.
std::string short_size(double bytes);

}  // namespace cc::tools::bench
