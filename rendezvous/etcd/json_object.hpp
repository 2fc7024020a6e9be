// Reading the etcd backend's JSON values (records.cpp, call_records.cpp):
// text, a JSON object, into *out with read(j, value), which reads the fields
// with the types we wrote: a wrong type or a missing field is a decode
// failure, as is read returning false; then *out is left as it was.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace cc::rv::etcd {

template <typename T, typename F>
bool decode_object(const std::string& text, T* out, F read) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  try {
    T value;
    if (!read(j, value)) return false;
    *out = std::move(value);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace cc::rv::etcd
