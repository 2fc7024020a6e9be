// The one spelling of sizes and durations that cc's settings, options and
// plans accept.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace cc {

// A number of bytes: digits with an optional unit K, M, G or T (each a power
// of 1024), which may be followed by "i" and "B" and is read in any case:
// "65536", "64K", "64KiB", "8MB", "1g", "512b". False for anything else (a
// sign, a space, a fraction) and for a value past 2^64 - 1.
bool parse_bytes(std::string_view text, uint64_t* bytes);

// A length of time: digits with a unit ms, s, m or h ("500ms", "30s",
// "10m", "2h"); a bare number counts in `bare_unit`. False for anything
// else and for more than 2^40 ms.
bool parse_duration(std::string_view text, std::chrono::milliseconds bare_unit,
                    std::chrono::milliseconds* out);

}  // namespace cc
