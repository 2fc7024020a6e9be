#include "common/printable.hpp"

#include <cstdint>

namespace cc {
namespace {

// The length of the valid UTF-8 sequence at the start of s that encodes a
// character other than a C1 control, or 0.
size_t printable_sequence(std::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto continuation = [&](size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const uint8_t lead = byte(0);
  if (lead >= 0xC2 && lead <= 0xDF) {
    if (!continuation(1)) return 0;
    return lead == 0xC2 && byte(1) < 0xA0 ? 0 : 2;  // U+0080..U+009F: C1 controls
  }
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (lead == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (lead == 0xED && byte(1) >= 0xA0) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (lead == 0xF0 && byte(1) < 0x90) return 0;  // overlong
    if (lead == 0xF4 && byte(1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    if (b >= 0x20 && b < 0x7F) {
      out += text[i++];
      continue;
    }
    if (b >= 0x80) {
      if (const size_t n = printable_sequence(text.substr(i)); n > 0) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
    ++i;
  }
  return out;
}

std::string shortened(std::string_view name) {
  constexpr size_t kShown = 32;
  if (name.size() <= kShown) return std::string(name);
  return std::string(name.substr(0, kShown)) + "... (" + std::to_string(name.size()) + " bytes)";
}

}  // namespace cc
