// Measured all-reduce plans kept on disk, one file per machine kind, so
// that only the first communicator on a machine pays for the measurement.
// The key names what the timings depend on: GPU model and SM count, rank
// count, how the GPUs reach each other, the NCCL loaded, the driver and cc.
#pragma once

#include <string>
#include <vector>

#include "lib/fast/peer_memory.hpp"
#include "lib/fast/plan.hpp"

namespace cc::fast {

// The key for this rank's view of the communicator (`records` by rank).
std::string machine_key(int device, const std::vector<PeerRecord>& records, int nccl_version,
                        const std::string& cc_version);

// The plan kept under `key` in `dir`; false when there is none (or `dir` is empty).
bool load_plan(const std::string& dir, const std::string& key, std::string* plan_text);

// Keeps `plan_text` under `key` (atomically: a temporary file renamed);
// false with the reason when it could not.
bool store_plan(const std::string& dir, const std::string& key, const std::string& plan_text,
                std::string* why);

// The file a key lives in.
std::string plan_path(const std::string& dir, const std::string& key);

}  // namespace cc::fast
