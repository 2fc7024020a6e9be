#include "rendezvous/relay_cut.hpp"

#include <algorithm>
#include <utility>

namespace cc::rv {

namespace {
constexpr size_t kRelayCount = 4;  // the entry count that opens a Relay's payload
// A frame's last few bytes are not worth a piece of their own.
constexpr size_t kSmallestPiece = 4096;
}  // namespace

size_t relay_frame_size(const Relay& r) {
  size_t n = kHeaderSize + kRelayCount;
  for (const RelayEntry& e : r.entries) n += kRelayEntryOverhead + e.data.size();
  return n;
}

void cut_relays(std::vector<RelayEntry>& entries, uint32_t max_frame,
                const std::function<void(Relay&)>& send) {
  const size_t room = max_frame - kRelayCount;  // for entries, in one frame
  Relay batch;
  size_t used = 0;
  auto ship = [&] {
    if (batch.entries.empty()) return;
    send(batch);
    batch.entries.clear();
    used = 0;
  };
  for (RelayEntry& e : entries) {
    if (e.op != RelayOp::frames) {
      const size_t most = room - kRelayEntryOverhead;
      if (e.data.size() > most) e.data.resize(most);
      if (used + kRelayEntryOverhead + e.data.size() > room) ship();
      used += kRelayEntryOverhead + e.data.size();
      batch.entries.push_back(std::move(e));
      continue;
    }
    const size_t size = e.data.size();
    size_t at = 0;
    while (at < size) {
      // A piece worth sending, or the next frame.
      if (room - used < kRelayEntryOverhead + std::min(size - at, kSmallestPiece)) ship();
      const size_t take = std::min(size - at, room - used - kRelayEntryOverhead);
      if (take == size) {
        batch.entries.push_back(std::move(e));
      } else {
        const auto from = e.data.begin() + static_cast<std::ptrdiff_t>(at);
        batch.entries.push_back(
            RelayEntry{e.channel, e.op, {from, from + static_cast<std::ptrdiff_t>(take)}});
      }
      used += kRelayEntryOverhead + take;
      at += take;
    }
  }
  ship();
  entries.clear();
}

}  // namespace cc::rv
