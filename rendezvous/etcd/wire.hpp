// etcd's v3 JSON gateway on the wire: requests built and answers read with
// nlohmann-json. Keys and values are base64 (OpenSSL's codec), 64-bit
// integers are strings, and fields at their zero value are left out.
// Private to rendezvous/etcd.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "rendezvous/etcd/client.hpp"

namespace cc::rv::etcd::wire {

using json = nlohmann::json;

std::string b64(const std::string& in);
bool unb64(const std::string& in, std::string* out);

// Reading: a missing field is zero, false or empty.
int64_t num(const json& j, const char* field);
bool flag(const json& j, const char* field);
std::string text(const json& j, const char* field);
// A base64 field; throws std::runtime_error when it is not base64.
std::string bytes(const json& j, const char* field);
KeyValue parse_kv(const json& j);
RangeResult parse_range(const json& j);
OpResult parse_op_result(const json& j);
TxnResult parse_txn(const json& j);

// Writing.
json compare_json(const Compare& c);
json range_json(const std::string& key, const std::string& range_end, bool keys_only,
                int64_t limit);
json put_json(const Op& op);
json op_json(const Op& op);
json txn_json(const Txn& t);

}  // namespace cc::rv::etcd::wire
