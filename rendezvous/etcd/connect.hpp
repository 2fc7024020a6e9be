// Reaching etcd from libcc, through the plugin (plugin.hpp): loaded once, on
// the first etcd address, from the folder of the library or program that
// holds this code, else by the dynamic loader's search path
// (LD_LIBRARY_PATH, the run path). Kept loaded for the life of the process.
#pragma once

#include <memory>

#include "common/status.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/etcd/election.hpp"

namespace cc::rv::etcd {

// open_election through the plugin. A plugin that cannot be loaded, or comes
// from another version of cc, is CC_ERR_RENDEZVOUS naming the file, the
// loader's reason and the fix.
Status open_election_plugin(const ElectionOptions& options, Deadline deadline,
                            std::unique_ptr<Election>* out);

}  // namespace cc::rv::etcd
