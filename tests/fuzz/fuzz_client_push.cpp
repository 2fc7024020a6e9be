// libFuzzer target: a client's handling of what its server sends, pushed
// events (request id 0) above all, through ClientInbox (no socket). The
// input:
//   byte 0: the piece size (1..64) the bytes arrive in;
//   byte 1: requests awaited, ids 1..(byte 1 % 8);
//   byte 2: after every how many pieces (1..16) the client takes one event;
//   the rest: the server's bytes.
// The queue never holds more than ClientInbox::kMaxEvents events and the
// news that the connection is given up; replies are held only for requests
// awaited; once given up, nothing more is filed; what a taken event says is
// printable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "rendezvous/client_inbox.hpp"

namespace rv = cc::rv;

namespace {

// No control character and no DEL: printable() leaves only those out.
void check_printable(const std::string& s) {
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x20 || b == 0x7F) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t piece = 1 + data[0] % 64;
  const uint32_t awaited = data[1] % 8;
  const size_t take_every = 1 + data[2] % 16;
  std::span<const uint8_t> rest(data + 3, size - 3);

  rv::Limits limits;
  limits.max_frame = 1u << 16;
  rv::ClientInbox inbox("10.0.0.1:29500", limits);
  for (uint32_t id = 1; id <= awaited; ++id) inbox.await(id);

  size_t pieces = 0;
  while (!rest.empty()) {
    const size_t n = rest.size() < piece ? rest.size() : piece;
    const bool was_usable = inbox.usable();
    const size_t events_before = inbox.events_queued();
    inbox.receive(rest.first(n));
    rest = rest.subspan(n);
    if (!was_usable && inbox.events_queued() != events_before) __builtin_trap();
    if (inbox.events_queued() > rv::ClientInbox::kMaxEvents + 1) __builtin_trap();
    if (inbox.replies_held() > inbox.awaited()) __builtin_trap();
    if (!inbox.usable() && inbox.broken().message.empty()) __builtin_trap();
    if (++pieces % take_every == 0) {
      if (auto e = inbox.take_event()) {
        check_printable(e->host);
        check_printable(e->reason);
      }
    }
  }
  for (uint32_t id = 1; id <= awaited; ++id) (void)inbox.take_reply(id);
  if (inbox.replies_held() != 0) __builtin_trap();
  while (auto e = inbox.take_event()) {
    check_printable(e->host);
    check_printable(e->reason);
  }
  if (!inbox.usable()) check_printable(inbox.broken().message);
  return 0;
}
