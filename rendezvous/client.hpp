// A rank's connection to a rendezvous: its job's store and its membership of
// a communicator together, as a communicator holds it (the membership for its
// life, the store for its own setup keys, lib/comm/fast_setup.cpp). Each
// backend implements both: cc's own client (rendezvous/frame_client.hpp) over
// one connection to cc's server, the etcd backend (rendezvous/etcd/
// backend.hpp) over etcd. rendezvous/factory picks the backend from the
// address; nothing else asks which one it holds.
#pragma once

#include <string>

#include "rendezvous/membership.hpp"
#include "rendezvous/store.hpp"

namespace cc::rv {

class Client : public Store, public Membership {
 public:
  ~Client() override = default;

  // Where it is, for both parts' messages.
  const std::string& endpoint() const override = 0;
};

}  // namespace cc::rv
