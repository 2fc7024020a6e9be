// libFuzzer target: the frame decoder. Any byte stream, fed to FrameReader in
// pieces, must give frames or one error, never a crash; every decoded message
// must encode again and decode to the same bytes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "rendezvous/protocol.hpp"

namespace rv = cc::rv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the piece size, so splits inside headers and fields
  // are explored too.
  const size_t piece = 1 + data[0] % 64;
  std::span<const uint8_t> rest(data + 1, size - 1);
  rv::Limits limits;
  limits.max_frame = 1u << 16;
  rv::FrameReader reader(limits);
  while (!rest.empty() && reader.error() == rv::DecodeError::none) {
    const size_t n = rest.size() < piece ? rest.size() : piece;
    reader.feed(rest.first(n));
    rest = rest.subspan(n);
    while (auto f = reader.next()) {
      const std::vector<uint8_t> again = rv::encode_frame(f->request_id, f->message);
      rv::FrameReader check;
      check.feed(again);
      auto g = check.next();
      if (!g || rv::encode_frame(g->request_id, g->message) != again) __builtin_trap();
    }
  }
  // The one-shot decoder on the payload alone, with the header's type.
  if (size >= 1 + rv::kHeaderSize) {
    rv::FrameHeader h;
    if (rv::parse_header(std::span(data + 1, rv::kHeaderSize), limits, &h) ==
        rv::DecodeError::none) {
      rv::Message m;
      (void)rv::decode_message(
          h.type, std::span(data + 1 + rv::kHeaderSize, size - 1 - rv::kHeaderSize), limits, &m);
    }
  }
  return 0;
}
