// The report as text for people and as one JSON object for machines.
#include <cstdio>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "common/enum_names.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace cc::tools::doctor {

constexpr std::array kLevelNames{"info", "warn", "error"};

const char* level_name(Level level) {
  return cc::enum_name<Level::info, Level::error>(kLevelNames, level, "?");
}

constexpr std::array kAnswerNames{"not_tried", "cc_rendezvous", "cc_refused",
                                  "refused",   "unreachable",   "other_program",
                                  "silent",    "closed",        "unresolved"};

const char* answer_name(Answer a) {
  return cc::enum_name<Answer::not_tried, Answer::unresolved>(kAnswerNames, a, "?");
}

std::string cuda_version_text(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

namespace {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string limit_text(uint64_t v) { return v == UINT64_MAX ? "unlimited" : std::to_string(v); }

void findings_text(std::string& out, const Report& r, std::initializer_list<const char*> sections) {
  for (const auto& f : r.findings) {
    bool mine = false;
    for (const char* s : sections) mine = mine || f.section == s;
    if (!mine) continue;
    out += std::string("  ") + (f.level == Level::info ? "- " : "! ") + level_name(f.level) + ": " +
           f.what + "\n";
    if (!f.fix.empty()) out += "      fix: " + f.fix + "\n";
  }
}

void heading(std::string& out, const char* title) { out += std::string("\n== ") + title + " ==\n"; }

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string render_text(const Report& r) {
  std::string out = "cc-doctor " + r.cc_version + " on host " + r.host + "\n";

  heading(out, "versions");
  out += "  cc      " + r.cc_version + "\n";
  out += "  NCCL    " + (r.nccl_version.empty() ? std::string("unknown") : r.nccl_version) + "\n";
  out += "  CUDA    runtime " + cuda_version_text(r.cuda_runtime) + ", driver " +
         (r.cuda_driver == 0 ? std::string("none (no NVIDIA driver)")
                             : cuda_version_text(r.cuda_driver)) +
         "\n";
  findings_text(out, r, {"cc", "nccl", "cuda"});

  heading(out, "GPUs");
  if (r.gpus.empty()) out += "  none\n";
  for (const auto& g : r.gpus) {
    out += "  " + std::to_string(g.index) + ": " + g.name + "  " + g.uuid + "  pci " +
           g.pci_bus_id + "  " + gib(g.memory_bytes) + "  sm " + std::to_string(g.cc_major) + "." +
           std::to_string(g.cc_minor) + "\n";
    out += "     P2P with: ";
    if (g.p2p_peers.empty()) out += "none";
    for (size_t i = 0; i < g.p2p_peers.size(); ++i)
      out += (i ? ", " : "") + std::to_string(g.p2p_peers[i]);
    out += "\n";
    if (g.nvlinks_active >= 0) {
      out += "     NVLinks active: " + std::to_string(g.nvlinks_active);
      for (const auto& [peer, n] : g.nvlinks_to)
        out +=
            (peer < 0 ? std::string("  switch/other x") : "  GPU " + std::to_string(peer) + " x") +
            std::to_string(n);
      out += "\n";
    }
  }
  if (!r.gpus.empty() && !r.nvml)
    out += "  (NVLink counts skipped: libnvidia-ml.so.1 not loadable)\n";
  findings_text(out, r, {"gpus"});

  heading(out, "network");
  for (const auto& i : r.interfaces) {
    out += "  " + pad(i.name, 12) + (i.up ? "up  " : "down") +
           (i.loopback ? "  loopback" : "          ");
    for (const auto& a : i.addresses)
      out += "  " + a.address +
             (a.prefix_len >= 0 ? "/" + std::to_string(a.prefix_len) : std::string());
    out += "\n";
  }
  if (r.route_found) {
    out += "  route to MASTER_ADDR " + r.master_addr + " (" + r.route.target + ", from " +
           r.master_addr_var + "): interface " + r.route.ifname + ", source address " +
           r.route.source_address + "\n";
  }
  findings_text(out, r, {"network"});

  heading(out, "rendezvous");
  if (r.master_addr.empty()) {
    out += "  MASTER_ADDR not set\n";
  } else {
    const bool apart = r.master_port_apart;
    out += "  " + r.master_addr +
           (apart ? ":" + (r.master_port ? std::to_string(r.master_port) : std::string("?"))
                  : std::string()) +
           "  (from " + r.master_addr_var +
           (!apart || r.master_port_var.empty() ? "" : ", " + r.master_port_var) + ")\n";
    if (r.probe.answer != Answer::not_tried)
      out += "  answer: " + std::string(answer_name(r.probe.answer)) + " after " +
             std::to_string(r.probe.elapsed_ms) + " ms\n";
  }
  findings_text(out, r, {"rendezvous"});

  heading(out, "system");
  out += "  /dev/shm       " +
         (r.shm_bytes < 0 ? std::string("missing") : gib(static_cast<uint64_t>(r.shm_bytes))) +
         "\n";
  out += "  open files     " + limit_text(r.nofile_soft) + " (hard " + limit_text(r.nofile_hard) +
         ")\n";
  findings_text(out, r, {"shm", "limits"});

  heading(out, "environment");
  if (r.env.empty()) out += "  no NCCL_*, CC_* or launch variables set\n";
  for (const auto& [k, v] : r.env) out += "  " + k + "=" + v + "\n";

  int warns = 0, errors = 0;
  for (const auto& f : r.findings) {
    warns += f.level == Level::warn;
    errors += f.level == Level::error;
  }
  out += "\nsummary: " + std::to_string(errors) + " error(s), " + std::to_string(warns) +
         " warning(s)\n";
  return out;
}

std::string render_json(const Report& r) {
  using Json = nlohmann::ordered_json;  // fields in the order written here
  auto or_null = [](int v) { return v < 0 ? Json() : Json(v); };

  Json gpus = Json::array();
  for (const auto& g : r.gpus) {
    Json links = Json::array();
    for (const auto& [peer, n] : g.nvlinks_to)
      links.push_back({{"gpu", or_null(peer)}, {"links", n}});
    gpus.push_back(
        {{"index", g.index},
         {"name", g.name},
         {"uuid", g.uuid},
         {"pci_bus_id", g.pci_bus_id},
         {"memory_bytes", g.memory_bytes},
         {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
         {"p2p_peers", g.p2p_peers},
         {"nvlinks_active", or_null(g.nvlinks_active)},
         {"nvlinks_to", links}});
  }

  Json interfaces = Json::array();
  for (const auto& i : r.interfaces) {
    Json addresses = Json::array();
    for (const auto& a : i.addresses)
      addresses.push_back({{"family", a.family == 2 ? "ipv4" : "ipv6"},
                           {"address", a.address},
                           {"prefix_len", a.prefix_len}});
    interfaces.push_back({{"name", i.name},
                          {"up", i.up},
                          {"running", i.running},
                          {"loopback", i.loopback},
                          {"addresses", addresses}});
  }

  Json route;  // null when none was found
  if (r.route_found)
    route = {{"interface", r.route.ifname},
             {"source_address", r.route.source_address},
             {"target", r.route.target}};

  Json env = Json::object();
  for (const auto& [k, v] : r.env) env[k] = v;

  Json findings = Json::array();
  for (const auto& f : r.findings)
    findings.push_back(
        {{"section", f.section}, {"level", level_name(f.level)}, {"what", f.what}, {"fix", f.fix}});

  const Json j = {
      {"host", r.host},
      {"cc", {{"version", r.cc_version}, {"code", r.cc_version_code}}},
      {"nccl", {{"version", r.nccl_version}, {"code", r.nccl_version_code}}},
      {"cuda",
       {{"runtime", r.cuda_runtime}, {"driver", r.cuda_driver}, {"device_count", r.device_count}}},
      {"gpus", gpus},
      {"nvml", r.nvml},
      {"interfaces", interfaces},
      {"master",
       {{"addr", r.master_addr},
        {"addr_from", r.master_addr_var},
        {"port", r.master_port},
        {"port_from", r.master_port_var},
        {"route", route},
        {"route_error", r.route_error},
        {"answer", answer_name(r.probe.answer)},
        {"detail", r.probe.detail},
        {"address_tried", r.probe.address},
        {"server", r.probe.server},
        {"auth_required", r.probe.auth_required},
        {"elapsed_ms", r.probe.elapsed_ms}}},
      {"shm_bytes", r.shm_bytes},
      {"open_files", {{"soft", r.nofile_soft}, {"hard", r.nofile_hard}}},
      {"env", env},
      {"findings", findings},
  };
  // Bytes that are not UTF-8 (an interface or variable can hold any) become U+FFFD.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace cc::tools::doctor
