#include "lib/watch/trace_file.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cc/cc.h"
#include "common/datatypes.hpp"
#include "common/enum_names.hpp"

namespace cc::watch {
namespace {

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* short_name(const char* name) {
  return std::strncmp(name, "CC_", 3) == 0 ? name + 3 : name;
}

constexpr std::array kLineNames{"collective", "send", "recv", "replay"};

const char* line_name(CallPoint::Line line) {
  return cc::enum_name<CallPoint::Line::collective, CallPoint::Line::replay>(kLineNames, line, "?");
}

nlohmann::json entry_json(const core::TraceEntry& e) {
  const CallDesc& c = e.point.call;
  nlohmann::json j = {
      {"line", line_name(e.point.line)},
      {"seq", e.point.seq},
      {"op", e.op},
      {"call", call_name(c.kind)},
      {"count", c.count},
      {"dtype", short_name(datatype_name(static_cast<cc_datatype_t>(c.dtype)))},
      {"in_place", c.in_place},
      {"description", call_words(c)},
      {"fingerprint", hex(e.point.fingerprint)},
      {"stream", "0x" + hex(e.stream)},
      {"enqueued_us", e.enqueued_us},
      {"completed_us", e.completed_us},
  };
  if (c.op >= 0) j["redop"] = short_name(redop_name(static_cast<cc_redop_t>(c.op)));
  if (c.root >= 0)
    j[c.kind == CallKind::send || c.kind == CallKind::recv ? "peer" : "root"] = c.root;
  return j;
}

}  // namespace

std::string trace_file_name(const TraceIdentity& id) {
  std::string job = id.job.empty() ? "default" : id.job;
  for (char& ch : job)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_')) ch = '_';
  return "cc-trace." + job + ".c" + std::to_string(id.comm_number) +
         (id.split > 0 ? ".s" + std::to_string(id.split) : std::string()) + ".g" +
         std::to_string(id.generation) + ".r" + std::to_string(id.rank) + ".json";
}

std::string trace_json(const TraceIdentity& id, const TraceState& state,
                       const std::vector<core::TraceEntry>& entries) {
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  nlohmann::json calls = nlohmann::json::array();
  for (const core::TraceEntry& e : entries) calls.push_back(entry_json(e));
  const nlohmann::json j = {
      {"format", "cc-trace 1"},
      {"job", id.job},
      {"communicator", id.comm_number},
      {"generation", id.generation},
      {"split", id.split},
      {"rank", id.rank},
      {"nranks", id.nranks},
      {"host", id.host},
      {"pid", id.pid},
      {"reason", state.reason},
      {"failure", state.failure},
      {"written_us", now_us},
      {"ops_enqueued", state.ops_enqueued},
      {"ops_completed", state.ops_completed},
      {"fingerprint", hex(state.fingerprint)},
      {"calls", calls},
  };
  return j.dump(1);
}

Status write_trace(const std::string& dir, const TraceIdentity& id, const TraceState& state,
                   const std::vector<core::TraceEntry>& entries, std::string* path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path final_path = fs::path(dir) / trace_file_name(id);
  const fs::path tmp = final_path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << trace_json(id, state, entries) << '\n';
    out.close();
    if (!out)
      return make_status(CC_ERR_SYSTEM, "writing the flight recorder to " + tmp.string() +
                                            " failed: " + std::strerror(errno) +
                                            "; check that CC_TRACE_DIR is a writable directory");
  }
  fs::rename(tmp, final_path, ec);
  if (ec)
    return make_status(CC_ERR_SYSTEM, "renaming " + tmp.string() + " to " + final_path.string() +
                                          " failed: " + ec.message());
  if (path != nullptr) *path = final_path.string();
  return Status::success();
}

}  // namespace cc::watch
