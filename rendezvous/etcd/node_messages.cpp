#include "rendezvous/etcd/node_messages.hpp"

#include "rendezvous/etcd/wire.hpp"

namespace cc::rv::etcd::node {

using wire::b64;

std::optional<std::string> key_field(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  std::string out;
  if (!wire::unb64(it->get<std::string>(), &out)) return std::nullopt;
  return out;
}

std::optional<json> parse_line(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

json spec_json(const WatchSpec& s) {
  json j{{"key", b64(s.key)}, {"from", s.start_revision}};
  if (!s.range_end.empty()) j["end"] = b64(s.range_end);
  if (s.no_put) j["no_put"] = true;
  if (s.no_delete) j["no_delete"] = true;
  if (s.prev_kv) j["prev_kv"] = true;
  return j;
}

std::optional<WatchSpec> parse_spec(const json& j) {
  WatchSpec s;
  auto key = key_field(j, "key");
  if (!key || key->empty()) return std::nullopt;
  s.key = std::move(*key);
  if (j.contains("end")) {
    auto end = key_field(j, "end");
    if (!end) return std::nullopt;
    s.range_end = std::move(*end);
  }
  s.start_revision = wire::num(j, "from");
  s.no_put = wire::flag(j, "no_put");
  s.no_delete = wire::flag(j, "no_delete");
  s.prev_kv = wire::flag(j, "prev_kv");
  return s;
}

namespace {

json kv_json(const KeyValue& kv) {
  return json{{"key", b64(kv.key)},
              {"value", b64(kv.value)},
              {"create_revision", std::to_string(kv.create_revision)},
              {"mod_revision", std::to_string(kv.mod_revision)},
              {"version", std::to_string(kv.version)},
              {"lease", std::to_string(kv.lease)}};
}

}  // namespace

json event_json(const WatchEvent& e) {
  json j{{"del", e.type == WatchEvent::Type::del}, {"spec", e.spec}, {"kv", kv_json(e.kv)}};
  if (e.prev_kv) j["prev"] = kv_json(*e.prev_kv);
  return j;
}

std::optional<WatchEvent> parse_event(const json& j) {
  try {
    WatchEvent e;
    e.type = wire::flag(j, "del") ? WatchEvent::Type::del : WatchEvent::Type::put;
    e.spec = static_cast<size_t>(wire::num(j, "spec"));
    e.kv = wire::parse_kv(j.at("kv"));
    if (auto p = j.find("prev"); p != j.end()) e.prev_kv = wire::parse_kv(*p);
    return e;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

json membership_json(const Membership& m) {
  return json{{"gen", b64(m.generation)}, {"gone", b64(m.gone)}, {"events", b64(m.events)},
              {"rank", m.rank},           {"host", m.host},      {"pid", m.pid}};
}

std::optional<Membership> parse_membership(const json& j) {
  Membership m;
  auto gen = key_field(j, "gen"), gone = key_field(j, "gone"), events = key_field(j, "events");
  if (!gen || !gone || !events || gen->empty()) return std::nullopt;
  m.generation = std::move(*gen);
  m.gone = std::move(*gone);
  m.events = std::move(*events);
  m.rank = static_cast<int32_t>(wire::num(j, "rank"));
  m.host = wire::text(j, "host");
  m.pid = static_cast<uint32_t>(wire::num(j, "pid"));
  return m;
}

}  // namespace cc::rv::etcd::node
