// The etcd client as a plugin: libcc-etcd.so holds the election and the
// durable store with their HTTP client (cpp-httplib, OpenSSL, zlib, brotli)
// and exports one function, looked up by name, so that libcc itself loads
// none of those libraries unless a job's address is etcd:// or etcds://. The
// plugin and libcc come from the same build: the table carries cc's version,
// and the loader refuses a plugin of another.
#pragma once

#include <memory>

#include "common/status.hpp"
#include "rendezvous/election.hpp"
#include "rendezvous/etcd/election.hpp"

namespace cc::rv::etcd {

struct PluginApi {
  const char* version;  // CC_VERSION_STRING of the build the plugin came from
  // open_election; never throws.
  Status (*open_election)(const ElectionOptions& options, Deadline deadline,
                          std::unique_ptr<Election>* out);
};

// The file name the loader looks for and the symbol it exports.
inline constexpr const char* kPluginFile = "libcc-etcd.so";
inline constexpr const char* kPluginSymbol = "cc_etcd_plugin_v2";

}  // namespace cc::rv::etcd
