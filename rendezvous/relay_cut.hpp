// Relay frames that never pass the frame limit, whatever one channel's
// entry weighs (protocol.hpp, Relay). A frames entry's data is a stretch of
// its channel's byte stream, so an entry larger than the room left in a
// frame is cut into pieces that go in consecutive frames; the receiver
// joins them again in its frame reader. Open and close entries go whole
// (a hello and a reason are small); one that could never fit is cut short.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace cc::rv {

// The bytes a Relay frame of these entries takes on the wire, header included.
size_t relay_frame_size(const Relay& r);

// Hands `send` the entries as Relay frames, in order, each within max_frame
// payload bytes; entries is emptied.
void cut_relays(std::vector<RelayEntry>& entries, uint32_t max_frame,
                const std::function<void(Relay&)>& send);

}  // namespace cc::rv
