// The flight recorder's file: one communicator's ring of calls (lib/core/
// call_log.hpp) as JSON, one file per rank, named by job, communicator,
// generation and rank so every rank of a job can write into one directory.
// `cc-doctor trace DIR` reads them (docs/FAILURES.md, "The flight recorder").
// No CUDA: unit-tested alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "lib/core/call_log.hpp"

namespace cc::watch {

struct TraceIdentity {
  std::string job;
  uint32_t comm_number = 0;   // the rendezvous's number for it (its join number)
  uint32_t generation = 0;    // cc_comm_generation
  int split = 0;              // for one made by cc_comm_split: the process's n-th split (1, 2, ...)
  int rank = -1;
  int nranks = 0;
  std::string host;
  uint32_t pid = 0;
};

struct TraceState {
  std::string reason;   // why it was written: "failure", "SIGUSR1", "cc_comm_dump_trace"
  std::string failure;  // the communicator's failure as text; "" while it works
  uint64_t ops_enqueued = 0;
  uint64_t ops_completed = 0;  // the last the watchdog saw complete
  uint64_t fingerprint = 0;    // of its collectives, after the last one
};

// "cc-trace.JOB.c0.g0.r3.json" ("cc-trace.JOB.c0.s1.g0.r3.json" for a split
// child), the job's name made safe for a file name.
std::string trace_file_name(const TraceIdentity& id);
// The file's JSON text.
std::string trace_json(const TraceIdentity& id, const TraceState& state,
                       const std::vector<core::TraceEntry>& entries);
// Writes it into `dir` (made if missing) through a temporary file and a
// rename, so a reader never sees half a file; *path gets the file's path.
Status write_trace(const std::string& dir, const TraceIdentity& id, const TraceState& state,
                   const std::vector<core::TraceEntry>& entries, std::string* path);

}  // namespace cc::watch
