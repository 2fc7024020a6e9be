// The report as text for people and as one JSON object for machines.
#include <cstdio>
#include <initializer_list>
#include <string>

#include "tools/cc-doctor/doctor_json.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace cc::doctor {

const char* level_name(Level level) {
  switch (level) {
    case Level::info:
      return "info";
    case Level::warn:
      return "warn";
    case Level::error:
      return "error";
  }
  return "?";
}

const char* answer_name(Answer a) {
  switch (a) {
    case Answer::not_tried:
      return "not_tried";
    case Answer::cc_rendezvous:
      return "cc_rendezvous";
    case Answer::cc_refused:
      return "cc_refused";
    case Answer::refused:
      return "refused";
    case Answer::unreachable:
      return "unreachable";
    case Answer::other_program:
      return "other_program";
    case Answer::silent:
      return "silent";
    case Answer::closed:
      return "closed";
    case Answer::unresolved:
      return "unresolved";
  }
  return "?";
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
    out += "  " + r.master_addr + ":" +
           (r.master_port ? std::to_string(r.master_port) : std::string("?")) + "  (from " +
           r.master_addr_var + (r.master_port_var.empty() ? "" : ", " + r.master_port_var) + ")\n";
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
  JsonWriter j;
  j.begin_object();
  j.key("host").value(r.host);
  j.key("cc")
      .begin_object()
      .key("version")
      .value(r.cc_version)
      .key("code")
      .value(r.cc_version_code)
      .end_object();
  j.key("nccl")
      .begin_object()
      .key("version")
      .value(r.nccl_version)
      .key("code")
      .value(r.nccl_version_code)
      .end_object();
  j.key("cuda")
      .begin_object()
      .key("runtime")
      .value(r.cuda_runtime)
      .key("driver")
      .value(r.cuda_driver);
  j.key("device_count").value(r.device_count).end_object();

  j.key("gpus").begin_array();
  for (const auto& g : r.gpus) {
    j.begin_object().key("index").value(g.index).key("name").value(g.name).key("uuid").value(
        g.uuid);
    j.key("pci_bus_id").value(g.pci_bus_id).key("memory_bytes").value(g.memory_bytes);
    j.key("compute_capability")
        .value(std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
    j.key("p2p_peers").begin_array();
    for (int p : g.p2p_peers) j.value(p);
    j.end_array();
    j.key("nvlinks_active");
    if (g.nvlinks_active < 0)
      j.null();
    else
      j.value(g.nvlinks_active);
    j.key("nvlinks_to").begin_array();
    for (const auto& [peer, n] : g.nvlinks_to) {
      j.begin_object().key("gpu");
      if (peer < 0)
        j.null();
      else
        j.value(peer);
      j.key("links").value(n).end_object();
    }
    j.end_array().end_object();
  }
  j.end_array();
  j.key("nvml").value(r.nvml);

  j.key("interfaces").begin_array();
  for (const auto& i : r.interfaces) {
    j.begin_object().key("name").value(i.name).key("up").value(i.up).key("running").value(
        i.running);
    j.key("loopback").value(i.loopback).key("addresses").begin_array();
    for (const auto& a : i.addresses) {
      j.begin_object()
          .key("family")
          .value(a.family == 2 ? "ipv4" : "ipv6")
          .key("address")
          .value(a.address);
      j.key("prefix_len").value(a.prefix_len).end_object();
    }
    j.end_array().end_object();
  }
  j.end_array();

  j.key("master").begin_object();
  j.key("addr").value(r.master_addr).key("addr_from").value(r.master_addr_var);
  j.key("port").value(r.master_port).key("port_from").value(r.master_port_var);
  j.key("route");
  if (r.route_found) {
    j.begin_object()
        .key("interface")
        .value(r.route.ifname)
        .key("source_address")
        .value(r.route.source_address);
    j.key("target").value(r.route.target).end_object();
  } else {
    j.null();
  }
  j.key("route_error").value(r.route_error);
  j.key("answer").value(answer_name(r.probe.answer)).key("detail").value(r.probe.detail);
  j.key("address_tried").value(r.probe.address).key("server").value(r.probe.server);
  j.key("auth_required").value(r.probe.auth_required).key("elapsed_ms").value(r.probe.elapsed_ms);
  j.end_object();

  j.key("shm_bytes").value(static_cast<int64_t>(r.shm_bytes));
  j.key("open_files")
      .begin_object()
      .key("soft")
      .value(r.nofile_soft)
      .key("hard")
      .value(r.nofile_hard)
      .end_object();
  j.key("env").begin_object();
  for (const auto& [k, v] : r.env) j.key(k).value(v);
  j.end_object();

  j.key("findings").begin_array();
  for (const auto& f : r.findings) {
    j.begin_object().key("section").value(f.section).key("level").value(level_name(f.level));
    j.key("what").value(f.what).key("fix").value(f.fix).end_object();
  }
  j.end_array();
  j.end_object();
  return j.str() + "\n";
}

}  // namespace cc::doctor
