// A small JSON writer: objects, arrays, strings (escaped, invalid UTF-8
// replaced by U+FFFD), integers and booleans. Enough for cc-doctor --json.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cc::doctor {

class JsonWriter {
 public:
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& null();
  const std::string& str() const { return out_; }

  static std::string quote(std::string_view s);

 private:
  JsonWriter& open(char c);
  JsonWriter& close(char c);
  void before_value();

  std::string out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

}  // namespace cc::doctor
