#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

#include "common/settings.hpp"

namespace cc {
namespace {

spdlog::level::level_enum level_from_env() {
  const char* v = settings::find(settings::Id::log_level, settings::process_env()).value;
  if (v == nullptr || *v == '\0') return spdlog::level::warn;
  auto level = spdlog::level::from_str(v);  // unknown names give "off"
  if (level == spdlog::level::off && std::string(v) != "off") return spdlog::level::warn;
  return level;
}

std::shared_ptr<spdlog::logger> make_logger() {
  if (auto existing = spdlog::get("cc")) return existing;  // the host program's choice
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("cc", sink);
  logger->set_level(level_from_env());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [cc] [%^%l%$] %v");
  logger->flush_on(spdlog::level::warn);
  return logger;  // deliberately not registered: spdlog's registry stays the host's
}

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return logger;
}

}  // namespace

spdlog::logger& log() { return *instance(); }

void log_set_identity(int rank, const std::string& host) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (spdlog::get("cc")) return;  // the host's logger keeps its own pattern
  instance()->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [cc] [rank " + std::to_string(rank) + " " + host +
                          "] [%^%l%$] %v");
}

}  // namespace cc
