#include "common/units.hpp"

#include <cctype>

namespace cc {
namespace {

// The leading digits of `text` as a number; false when there are none or
// they pass `max`. *rest is what follows them.
bool leading_number(std::string_view text, uint64_t max, uint64_t* value, std::string_view* rest) {
  size_t i = 0;
  uint64_t v = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (v > (max - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (i == 0) return false;
  *value = v;
  *rest = text.substr(i);
  return true;
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

bool parse_bytes(std::string_view text, uint64_t* bytes) {
  uint64_t value = 0;
  std::string_view unit;
  if (!leading_number(text, ~uint64_t{0}, &value, &unit)) return false;
  unsigned shift = 0;
  if (!unit.empty()) {
    switch (lower(unit[0])) {
      case 'b':
        if (unit.size() != 1) return false;
        break;
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      default:
        return false;
    }
    if (shift != 0) {
      unit.remove_prefix(1);
      if (!unit.empty() && lower(unit[0]) == 'i') unit.remove_prefix(1);
      if (!unit.empty() && lower(unit[0]) == 'b') unit.remove_prefix(1);
      if (!unit.empty()) return false;
    }
  }
  if (value > (~uint64_t{0} >> shift)) return false;
  *bytes = value << shift;
  return true;
}

bool parse_duration(std::string_view text, std::chrono::milliseconds bare_unit,
                    std::chrono::milliseconds* out) {
  constexpr uint64_t kMaxMs = uint64_t{1} << 40;
  uint64_t value = 0;
  std::string_view unit;
  if (!leading_number(text, kMaxMs, &value, &unit)) return false;
  uint64_t ms_per_unit = 0;
  if (unit.empty())
    ms_per_unit = static_cast<uint64_t>(bare_unit.count());
  else if (unit == "ms")
    ms_per_unit = 1;
  else if (unit == "s")
    ms_per_unit = 1000;
  else if (unit == "m")
    ms_per_unit = 60 * 1000;
  else if (unit == "h")
    ms_per_unit = 3600 * 1000;
  else
    return false;
  if (ms_per_unit == 0 || value > kMaxMs / ms_per_unit) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(value * ms_per_unit));
  return true;
}

}  // namespace cc
