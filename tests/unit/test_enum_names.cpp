// cc::enum_name (common/enum_names.hpp): a value's name from its enum's table,
// by the value's place after the first; a value outside the table gets the
// caller's word for unknown. And one table in use: call_name.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>

#include "common/call_desc.hpp"
#include "common/enum_names.hpp"

namespace {

enum class Colour : uint8_t { red = 1, green = 2, blue = 3 };
constexpr std::array kColourNames{"red", "green", "blue"};

constexpr const char* colour_name(Colour c) {
  return cc::enum_name<Colour::red, Colour::blue>(kColourNames, c, "unknown");
}

static_assert(colour_name(Colour::green)[0] == 'g', "a lookup in a constant expression");

}  // namespace

TEST_CASE("enum_name names each value from its table, counted from the first value") {
  CHECK(std::string(colour_name(Colour::red)) == "red");
  CHECK(std::string(colour_name(Colour::green)) == "green");
  CHECK(std::string(colour_name(Colour::blue)) == "blue");
}

TEST_CASE("enum_name gives the caller's word for a value outside the table") {
  for (uint8_t v : {0, 4, 255}) {
    INFO("value " << int(v));
    CHECK(std::string(colour_name(static_cast<Colour>(v))) == "unknown");
  }
}

TEST_CASE("call_name: each call's C name; a value past the last, an unknown call") {
  CHECK(std::string(cc::call_name(cc::CallKind::allreduce)) == "cc_allreduce");
  CHECK(std::string(cc::call_name(cc::CallKind::reducescatter)) == "cc_reducescatter");
  CHECK(std::string(cc::call_name(cc::CallKind::barrier)) == "cc_barrier");
  CHECK(std::string(cc::call_name(static_cast<cc::CallKind>(cc::kLastCallKind + 1))) ==
        "an unknown call");
}
