// A split child's line of calls, shared by the child's CommWatch and its
// parent's: a child has no rendezvous connection, so the parent's tick sends
// the child's points on the parent's control channel and keeps the
// difference the rendezvous found among the child's members; the child's
// tick takes it and fails the child (never the parent). Shared, so either
// communicator may be destroyed first: the child clears `line.calls` when it
// stops, and the parent then drops the line.
#pragma once

#include <mutex>
#include <optional>

#include "lib/watch/control_channel.hpp"

namespace cc::watch {

struct SplitReport {
  std::mutex mu;
  SplitLine line;                         // under mu
  std::optional<ChannelFailure> failure;  // under mu; taken by the child once
};

}  // namespace cc::watch
