// A communicator's flight recorder: its CallLog (the calls and their
// fingerprints) and who it is, written as a trace file (trace_file.hpp) on a
// failure, on SIGUSR1 (by the watchdog thread) and through
// cc_comm_dump_trace (by the caller's thread). Nothing here waits on NCCL or
// CUDA, so a rank stuck in a collective still writes it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.hpp"
#include "lib/core/call_log.hpp"
#include "lib/core/core.hpp"
#include "lib/watch/trace_file.hpp"

namespace cc::watch {

class FlightRecorder {
 public:
  // `dir`: CC_TRACE_DIR, where failures and SIGUSR1 write; "" for nowhere.
  FlightRecorder(const core::Core& comm, TraceIdentity id, size_t capacity, std::string dir);

  core::CallLog& calls() { return calls_; }
  const std::string& dir() const { return dir_; }
  // Writes the file into `dir`; `completed`: the last operation seen complete.
  Status write(const std::string& dir, const std::string& reason, uint64_t completed,
               std::string* path) const;

 private:
  const core::Core& comm_;
  TraceIdentity id_;
  core::CallLog calls_;
  std::string dir_;
};

}  // namespace cc::watch
