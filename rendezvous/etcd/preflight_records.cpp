#include "rendezvous/etcd/preflight_records.hpp"

#include <nlohmann/json.hpp>

#include "rendezvous/etcd/json_object.hpp"

namespace cc::rv::etcd {
namespace {

using json = nlohmann::json;

}  // namespace

std::string encode(const PreflightReadyRecord& r) {
  const PreflightReady& e = r.ready;
  return json{{"rank", r.rank},
              {"host", r.host},
              {"pid", r.pid},
              {"enabled", e.enabled},
              {"hostkey", e.host_key},
              {"addr", e.addr},
              {"port", e.port},
              {"ifname", e.ifname},
              {"user_ifname", e.user_ifname},
              {"route_ifname", e.route_ifname},
              {"route_addr", e.route_addr}}
      .dump();
}

bool decode(const std::string& text, PreflightReadyRecord* out) {
  return decode_object(text, out, [](const json& j, PreflightReadyRecord& r) {
    r.rank = j.at("rank").get<int32_t>();
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<uint32_t>();
    PreflightReady& e = r.ready;
    e.enabled = j.at("enabled").get<bool>();
    e.host_key = j.at("hostkey").get<std::string>();
    e.addr = j.at("addr").get<std::string>();
    e.port = j.at("port").get<uint32_t>();
    e.ifname = j.at("ifname").get<std::string>();
    e.user_ifname = j.at("user_ifname").get<std::string>();
    e.route_ifname = j.at("route_ifname").get<std::string>();
    e.route_addr = j.at("route_addr").get<std::string>();
    return r.rank >= 0;
  });
}

std::string encode(const PreflightPlanRecord& r) {
  json targets = json::array();
  for (const ProbeTarget& t : r.targets)
    targets.push_back(json::array({t.rank, t.host, t.pid, t.addr, t.port}));
  return json{{"targets", targets}}.dump();
}

bool decode(const std::string& text, PreflightPlanRecord* out) {
  return decode_object(text, out, [](const json& j, PreflightPlanRecord& r) {
    for (const json& a : j.at("targets")) {
      if (!a.is_array() || a.size() != 5) return false;
      r.targets.push_back(ProbeTarget{a[0].get<int32_t>(), a[1].get<std::string>(),
                                      a[2].get<uint32_t>(), a[3].get<std::string>(),
                                      a[4].get<uint32_t>()});
    }
    return r.targets.size() <= kMaxProbeTargets;
  });
}

std::string encode(const PreflightReportRecord& r) {
  json results = json::array();
  for (const ProbeResult& p : r.results)
    results.push_back(json::array({p.rank, p.reached, p.error, p.words}));
  return json{{"results", results}}.dump();
}

bool decode(const std::string& text, PreflightReportRecord* out) {
  return decode_object(text, out, [](const json& j, PreflightReportRecord& r) {
    for (const json& a : j.at("results")) {
      if (!a.is_array() || a.size() != 4) return false;
      r.results.push_back(ProbeResult{a[0].get<int32_t>(), a[1].get<bool>(), a[2].get<int32_t>(),
                                      a[3].get<std::string>()});
    }
    return r.results.size() <= kMaxProbeTargets;
  });
}

std::string encode(const PreflightVerdictRecord& r) {
  return json{{"outcome", static_cast<int>(r.outcome)}, {"code", r.code}, {"words", r.words}}
      .dump();
}

bool decode(const std::string& text, PreflightVerdictRecord* out) {
  return decode_object(text, out, [](const json& j, PreflightVerdictRecord& r) {
    const int outcome = j.at("outcome").get<int>();
    if (outcome < 1 || outcome > 3) return false;
    r.outcome = static_cast<PreflightVerdictRecord::Outcome>(outcome);
    r.code = j.at("code").get<uint32_t>();
    r.words = j.at("words").get<std::string>();
    return true;
  });
}

}  // namespace cc::rv::etcd
