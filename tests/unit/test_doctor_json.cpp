// cc-doctor's hand-written JSON: escaping and structure.
#include <catch2/catch.hpp>

#include <string>

#include "tools/cc-doctor/doctor_json.hpp"

using cc::doctor::JsonWriter;

TEST_CASE("JSON strings are escaped", "[doctor]") {
  CHECK(JsonWriter::quote("plain") == "\"plain\"");
  CHECK(JsonWriter::quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(JsonWriter::quote("line\nnext\ttab\r") == "\"line\\nnext\\ttab\\r\"");
  CHECK(JsonWriter::quote(std::string("\x01\x1f\x7f", 3)) == "\"\\u0001\\u001f\\u007f\"");
  CHECK(JsonWriter::quote(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
  CHECK(JsonWriter::quote("caf\xc3\xa9 \xe2\x82\xac") ==
        "\"caf\xc3\xa9 \xe2\x82\xac\"");  // valid UTF-8 kept
  CHECK(JsonWriter::quote("bad\xff") == "\"bad\\ufffd\"");
  CHECK(JsonWriter::quote("cut\xe2\x82") == "\"cut\\ufffd\\ufffd\"");
  CHECK(JsonWriter::quote("overlong\xc0\xaf") == "\"overlong\\ufffd\\ufffd\"");
  CHECK(JsonWriter::quote("surrogate\xed\xa0\x80") == "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}

TEST_CASE("JSON objects and arrays get commas in the right places", "[doctor]") {
  JsonWriter j;
  j.begin_object();
  j.key("n").value(3).key("s").value("x").key("b").value(false);
  j.key("a")
      .begin_array()
      .value(1)
      .value(int64_t{-2})
      .null()
      .begin_object()
      .end_object()
      .end_array();
  j.key("o").begin_object().key("u").value(uint64_t{18446744073709551615u}).end_object();
  j.key("e").begin_array().end_array();
  j.end_object();
  CHECK(j.str() ==
        R"({"n":3,"s":"x","b":false,"a":[1,-2,null,{}],"o":{"u":18446744073709551615},"e":[]})");
}
