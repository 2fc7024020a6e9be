// Captures what the library's "cc" logger says, for tests that check the
// server's log lines. The library uses a logger named "cc" when the host
// program registered one; install() must run before anything logs.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cc::test {

class LogCapture : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Registers the capturing "cc" logger once per process and returns it.
  static LogCapture& install() {
    static std::shared_ptr<LogCapture> sink = [] {
      auto s = std::make_shared<LogCapture>();
      auto logger = std::make_shared<spdlog::logger>("cc", s);
      logger->set_level(spdlog::level::info);
      spdlog::register_logger(logger);
      return s;
    }();
    return *sink;
  }

  // Lines logged so far that contain every one of `parts`.
  std::vector<std::string> find(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      bool all = true;
      for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }
  // The first line with every part, waiting up to `timeout` (the server logs
  // on its own thread); "" when none came.
  std::string wait_for(const std::vector<std::string>& parts,
                       std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto found = find(parts);
      if (!found.empty()) return found.front();
      if (std::chrono::steady_clock::now() >= deadline) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string level(spdlog::level::to_string_view(msg.level).data(),
                      spdlog::level::to_string_view(msg.level).size());
    lines_.push_back("[" + level + "] " + std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

}  // namespace cc::test
