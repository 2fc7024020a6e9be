// The one lookup of an enum value's name in a table of names.
#pragma once

#include <array>
#include <cstddef>

namespace cc {

// The name of `value`, where `names` names the values First to Last in order;
// `unknown` for a value outside them. A table too short or too long for
// First..Last does not compile.
template <auto First, auto Last, std::size_t N>
constexpr const char* enum_name(const std::array<const char*, N>& names, decltype(First) value,
                                const char* unknown) {
  static_assert(N == static_cast<std::size_t>(Last) - static_cast<std::size_t>(First) + 1,
                "one name for each value from First to Last");
  const std::size_t i = static_cast<std::size_t>(value) - static_cast<std::size_t>(First);
  return i < N ? names[i] : unknown;
}

}  // namespace cc
