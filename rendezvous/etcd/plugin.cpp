// libcc-etcd.so's one exported function (see plugin.hpp).
#include "rendezvous/etcd/plugin.hpp"

#include <exception>
#include <string>

#include "cc/cc.h"

namespace cc::rv::etcd {
namespace {

Status plugin_open_election(const ElectionOptions& options, Deadline deadline,
                            std::unique_ptr<Election>* out) {
  try {
    return open_election(options, deadline, out);
  } catch (const std::exception& e) {
    return make_status(CC_ERR_INTERNAL, std::string("etcd election: ") + e.what());
  }
}

constexpr PluginApi kApi{CC_VERSION_STRING, &plugin_open_election};

}  // namespace
}  // namespace cc::rv::etcd

extern "C" __attribute__((visibility("default"))) const cc::rv::etcd::PluginApi*
cc_etcd_plugin_v2() {
  return &cc::rv::etcd::kApi;
}
