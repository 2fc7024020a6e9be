#include "rendezvous/etcd/wire.hpp"

#include <openssl/evp.h>

#include <charconv>
#include <stdexcept>

#include "common/enum_names.hpp"

namespace cc::rv::etcd::wire {

// ---- base64 (OpenSSL's, as the gateway's JSON wants: standard alphabet, padded)

std::string b64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool unb64(const std::string& in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  std::string buf(in.size() / 4 * 3 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(buf.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return false;
  size_t pad = 0;
  if (!in.empty() && in.back() == '=') pad = (in.size() >= 2 && in[in.size() - 2] == '=') ? 2 : 1;
  buf.resize(static_cast<size_t>(n) - pad);
  *out = std::move(buf);
  return true;
}

// ---- reading the gateway's JSON: int64 come as strings, zero values are left out

int64_t num(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    int64_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
  }
  return 0;
}

bool flag(const json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string text(const json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string bytes(const json& j, const char* field) {
  std::string out;
  if (!unb64(text(j, field), &out))
    throw std::runtime_error(std::string("bad base64 in field ") + field);
  return out;
}

KeyValue parse_kv(const json& j) {
  KeyValue kv;
  kv.key = bytes(j, "key");
  kv.value = bytes(j, "value");
  kv.create_revision = num(j, "create_revision");
  kv.mod_revision = num(j, "mod_revision");
  kv.version = num(j, "version");
  kv.lease = num(j, "lease");
  return kv;
}

RangeResult parse_range(const json& j) {
  RangeResult r;
  if (auto h = j.find("header"); h != j.end()) r.revision = num(*h, "revision");
  if (auto kvs = j.find("kvs"); kvs != j.end() && kvs->is_array())
    for (const auto& kv : *kvs) r.kvs.push_back(parse_kv(kv));
  r.count = num(j, "count");
  return r;
}


OpResult parse_op_result(const json& j) {
  OpResult r;
  if (auto p = j.find("response_put"); p != j.end()) {
    r.kind = Op::Kind::put;
    if (auto prev = p->find("prev_kv"); prev != p->end()) r.prev_kv = parse_kv(*prev);
  } else if (auto g = j.find("response_range"); g != j.end()) {
    r.kind = Op::Kind::range;
    r.range = parse_range(*g);
  } else if (auto d = j.find("response_delete_range"); d != j.end()) {
    r.kind = Op::Kind::del;
    r.deleted = num(*d, "deleted");
    if (auto prev = d->find("prev_kvs"); prev != d->end() && prev->is_array() && !prev->empty())
      r.prev_kv = parse_kv(prev->front());
  }
  return r;
}

TxnResult parse_txn(const json& j) {
  TxnResult r;
  if (auto h = j.find("header"); h != j.end()) r.revision = num(*h, "revision");
  r.succeeded = flag(j, "succeeded");
  if (auto rs = j.find("responses"); rs != j.end() && rs->is_array())
    for (const auto& one : *rs) r.responses.push_back(parse_op_result(one));
  return r;
}

// ---- writing requests

namespace {

// What etcd calls a compare's target, and the field that holds its operand.
struct TargetWords {
  const char* name;
  const char* field;
};
TargetWords target_words(Compare::Target t) {
  switch (t) {
    case Compare::Target::version:
      return {"VERSION", "version"};
    case Compare::Target::create:
      return {"CREATE", "create_revision"};
    case Compare::Target::mod:
      return {"MOD", "mod_revision"};
    case Compare::Target::value:
      return {"VALUE", "value"};
    case Compare::Target::lease:
      return {"LEASE", "lease"};
  }
  return {"CREATE", nullptr};
}

constexpr std::array kResultNames{"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};

const char* result_name(Compare::Result r) {
  return cc::enum_name<Compare::Result::equal, Compare::Result::not_equal>(kResultNames, r,
                                                                           "EQUAL");
}

}  // namespace

json compare_json(const Compare& c) {
  const TargetWords w = target_words(c.target);
  json j{{"key", b64(c.key)}, {"target", w.name}, {"result", result_name(c.result)}};
  if (w.field)
    j[w.field] = c.target == Compare::Target::value ? b64(c.value) : std::to_string(c.number);
  if (!c.range_end.empty()) j["range_end"] = b64(c.range_end);
  return j;
}

json range_json(const std::string& key, const std::string& range_end, bool keys_only,
                int64_t limit) {
  json j{{"key", b64(key)}};
  if (!range_end.empty()) j["range_end"] = b64(range_end);
  if (keys_only) j["keys_only"] = true;
  if (limit > 0) j["limit"] = std::to_string(limit);
  return j;
}

json put_json(const Op& op) {
  json j{{"key", b64(op.key)}, {"value", b64(op.value)}};
  if (op.lease != 0) j["lease"] = std::to_string(op.lease);
  if (op.prev_kv) j["prev_kv"] = true;
  return j;
}


json op_json(const Op& op) {
  switch (op.kind) {
    case Op::Kind::put:
      return json{{"request_put", put_json(op)}};
    case Op::Kind::range:
      return json{{"request_range", range_json(op.key, op.range_end, op.keys_only, op.limit)}};
    case Op::Kind::del: {
      json d{{"key", b64(op.key)}};
      if (!op.range_end.empty()) d["range_end"] = b64(op.range_end);
      if (op.prev_kv) d["prev_kv"] = true;
      return json{{"request_delete_range", d}};
    }
  }
  return json::object();
}

json txn_json(const Txn& t) {
  json j{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& c : t.compare) j["compare"].push_back(compare_json(c));
  for (const auto& op : t.success) j["success"].push_back(op_json(op));
  for (const auto& op : t.failure) j["failure"].push_back(op_json(op));
  return j;
}

}  // namespace cc::rv::etcd::wire
