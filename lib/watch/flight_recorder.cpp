#include "lib/watch/flight_recorder.hpp"

#include <mutex>
#include <utility>

namespace cc::watch {

FlightRecorder::FlightRecorder(const core::Core& comm, TraceIdentity id, size_t capacity,
                               std::string dir)
    : comm_(comm), id_(std::move(id)), calls_(comm.nranks, capacity), dir_(std::move(dir)) {}

Status FlightRecorder::write(const std::string& dir, const std::string& reason, uint64_t completed,
                             std::string* path) const {
  TraceState state;
  state.reason = reason;
  if (!core::usable(comm_)) {
    std::lock_guard<std::mutex> lock(comm_.failure_mu);
    state.failure = comm_.failure;
  }
  state.ops_enqueued = comm_.ops_enqueued.load(std::memory_order_acquire);
  state.ops_completed = completed;
  state.fingerprint = calls_.fingerprint();
  return write_trace(dir, id_, state, calls_.entries(), path);
}

}  // namespace cc::watch
