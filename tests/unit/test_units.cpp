// The one spelling of sizes and durations (common/units.hpp).
#include <catch2/catch.hpp>

#include "common/units.hpp"

using cc::parse_bytes;
using cc::parse_duration;
using std::chrono::milliseconds;

TEST_CASE("sizes take K, M, G and T as powers of 1024, in any case") {
  uint64_t b = 0;
  CHECK((parse_bytes("8", &b) && b == 8));
  CHECK((parse_bytes("512b", &b) && b == 512));
  CHECK((parse_bytes("64K", &b) && b == 65536));
  CHECK((parse_bytes("64k", &b) && b == 65536));
  CHECK((parse_bytes("64KiB", &b) && b == 65536));
  CHECK((parse_bytes("64kb", &b) && b == 65536));
  CHECK((parse_bytes("32Mi", &b) && b == (uint64_t{32} << 20)));
  CHECK((parse_bytes("1G", &b) && b == (uint64_t{1} << 30)));
  CHECK((parse_bytes("2TiB", &b) && b == (uint64_t{2} << 40)));
  CHECK((parse_bytes("0", &b) && b == 0));
}

TEST_CASE("anything else is not a size") {
  uint64_t b = 7;
  for (const char* bad : {"", "K", "-1", "+1", " 1", "1 K", "1.5M", "1KK", "1KiBB", "1Bi", "1x",
                          "99999999999999999999", "99999999999999999999G", "17179869184G"}) {
    INFO(bad);
    CHECK_FALSE(parse_bytes(bad, &b));
  }
  CHECK(b == 7);
}

TEST_CASE("durations take ms, s, m and h; a bare number counts in the caller's unit") {
  milliseconds d{};
  CHECK((parse_duration("500ms", milliseconds(1000), &d) && d == milliseconds(500)));
  CHECK((parse_duration("30s", milliseconds(1000), &d) && d == milliseconds(30000)));
  CHECK((parse_duration("10m", milliseconds(1000), &d) && d == milliseconds(600000)));
  CHECK((parse_duration("2h", milliseconds(1000), &d) && d == milliseconds(7200000)));
  CHECK((parse_duration("0", milliseconds(1000), &d) && d == milliseconds(0)));
  CHECK((parse_duration("45", milliseconds(1000), &d) && d == milliseconds(45000)));
  CHECK((parse_duration("45", milliseconds(1), &d) && d == milliseconds(45)));
  for (const char* bad : {"", "s", "-1s", "1.5h", "1 h", "1d", "1S", "2000000000h"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration(bad, milliseconds(1000), &d));
  }
}
