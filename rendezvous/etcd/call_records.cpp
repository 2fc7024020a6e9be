#include "rendezvous/etcd/call_records.hpp"

#include <charconv>
#include <nlohmann/json.hpp>

#include "rendezvous/etcd/json_object.hpp"

namespace cc::rv::etcd {
namespace {

using json = nlohmann::json;

// A point as one array, [line, peer, seq, fingerprint, kind, count, dtype,
// op, root, in_place]: a report holds up to kMaxHeartbeatCalls of them, so
// names per field would triple its size. The fingerprint is a string (JSON
// readers may hold numbers as doubles).
json point_json(const CallPoint& p) {
  return json::array({static_cast<int>(p.line), p.peer, p.seq, std::to_string(p.fingerprint),
                      static_cast<int>(p.call.kind), p.call.count, p.call.dtype, p.call.op,
                      p.call.root, p.call.in_place});
}

bool read_point(const json& a, CallPoint* p) {
  if (!a.is_array() || a.size() != 10) return false;
  const int line = a.at(0).get<int>();
  const int kind = a.at(4).get<int>();
  if (line < 0 || line > static_cast<int>(CallPoint::Line::recv) || kind < 0 ||
      kind > kLastCallKind)
    return false;
  const std::string fingerprint = a.at(3).get<std::string>();
  if (fingerprint.empty() || fingerprint.size() > 20 ||
      fingerprint.find_first_not_of("0123456789") != std::string::npos)
    return false;
  p->line = static_cast<CallPoint::Line>(line);
  p->peer = a.at(1).get<int32_t>();
  p->seq = a.at(2).get<uint64_t>();
  const char* end = fingerprint.data() + fingerprint.size();
  auto [at, ec] = std::from_chars(fingerprint.data(), end, p->fingerprint);
  if (ec != std::errc() || at != end) return false;  // more than 64 bits
  p->call.kind = static_cast<CallKind>(kind);
  p->call.count = a.at(5).get<uint64_t>();
  p->call.dtype = a.at(6).get<int32_t>();
  p->call.op = a.at(7).get<int32_t>();
  p->call.root = a.at(8).get<int32_t>();
  p->call.in_place = a.at(9).get<bool>();
  return true;
}

}  // namespace

std::string encode(const rules::CallReport& r) {
  json points = json::array();
  for (const CallPoint& p : r.points) points.push_back(point_json(p));
  return json{{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"points", points}}.dump();
}

bool decode(const std::string& text, rules::CallReport* out) {
  return decode_object(text, out, [](const json& j, rules::CallReport& r) {
    r.rank = j.at("rank").get<int32_t>();
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<uint32_t>();
    const json& points = j.at("points");
    if (!points.is_array() || points.size() > kMaxHeartbeatCalls) return false;
    r.points.resize(points.size());
    for (size_t i = 0; i < points.size(); ++i)
      if (!read_point(points[i], &r.points[i])) return false;
    return r.rank >= 0;
  });
}

std::string encode_mismatch(const PeerEvent& e) {
  return json{{"rank", e.rank},    {"host", e.host},   {"pid", e.pid},
              {"words", e.reason}, {"split", e.split}, {"color", e.split_color}}
      .dump();
}

bool decode_mismatch(const std::string& text, PeerEvent* out) {
  return decode_object(text, out, [](const json& j, PeerEvent& e) {
    e.kind = PeerEventKind::mismatch;
    e.rank = j.at("rank").get<int32_t>();
    e.host = j.at("host").get<std::string>();
    e.pid = j.at("pid").get<uint32_t>();
    e.reason = j.at("words").get<std::string>();
    e.split = j.value("split", 0u);
    e.split_color = j.value("color", 0);
    return !e.reason.empty();
  });
}

}  // namespace cc::rv::etcd
