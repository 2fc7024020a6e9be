// cc-rendezvous: the long-lived rendezvous daemon that serves many jobs.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cc/cc_version.h"
#include "common/log.hpp"
#include "rendezvous/server.hpp"

namespace {

const char* kUsage =
    "usage: cc-rendezvous [options]\n"
    "\n"
    "The cc rendezvous daemon: hands every rank of a job the NCCL id and its\n"
    "keys, checks that ranks agree, and tells a job at once when a rank fails.\n"
    "\n"
    "options:\n"
    "  --bind ADDR               address to listen on (default 0.0.0.0; :: for IPv6\n"
    "                            and IPv4, 127.0.0.1, ::1 or a host name)\n"
    "  --port PORT               TCP port (default 29500; 0 = any free port)\n"
    "  --token-file FILE         require clients to prove they know the token in\n"
    "                            FILE (CC_RENDEZVOUS_TOKEN on the ranks)\n"
    "  --log-level LEVEL         trace, debug, info (default), warn, error, off\n"
    "  --max-connections N       refuse connections above N (default 100000)\n"
    "  --max-jobs N              refuse new jobs above N (default 10000)\n"
    "  --max-keys-per-job N      refuse new keys above N per job (default 100000)\n"
    "  --handshake-timeout-ms N  drop a client that has not said hello (and\n"
    "                            authenticated) within N ms (default 10000)\n"
    "  --frame-timeout-ms N      drop a client stalling inside a frame (default 10000)\n"
    "  --heartbeat-timeout-ms N  announce a member silent for N ms as failed\n"
    "                            (default 0 = off)\n"
    "  --idle-timeout-ms N       close a connection that holds nothing (no\n"
    "                            membership, pending join, get or wait) and sent\n"
    "                            nothing for N ms (default 0 = never)\n"
    "  --help                    this text\n"
    "  --version                 the cc version\n"
    "\n"
    "SIGINT or SIGTERM stops the daemon: waiting clients get an error, members\n"
    "are told the server is stopping.\n";

int usage_error(const std::string& words) {
  std::fprintf(stderr, "cc-rendezvous: %s (see --help)\n", words.c_str());
  return 2;
}

bool parse_number(const std::string& text, long long min, long long max, long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// Reads the token, without its trailing newline; warns about loose permissions.
bool read_token(const std::string& path, std::string* token, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read the token file " + path + ": " + std::strerror(errno) +
             "; check the path and that this user may read it";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.empty()) {
    *error = "the token file " + path + " is empty; put the shared token in it";
    return false;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    cc::log().warn("the token file {} can be read by group or others (mode {:o}); chmod 600 it",
                   path, st.st_mode & 0777);
  *token = std::move(t);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cc::rv::ServerOptions options;
  options.port = 29500;
  std::string token_file;
  std::string level = std::getenv("CC_LOG_LEVEL") ? std::getenv("CC_LOG_LEVEL") : "info";

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string* out) {
      if (has_value) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto take_number = [&](long long min, long long max, long long* out) {
      std::string text;
      return take(&text) && parse_number(text, min, max, out);
    };
    long long n = 0;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("cc-rendezvous %s\n", CC_VERSION_STRING);
      return 0;
    } else if (arg == "--bind") {
      if (!take(&options.bind_addr) || options.bind_addr.empty())
        return usage_error("--bind needs an address");
    } else if (arg == "--port") {
      if (!take_number(0, 65535, &n)) return usage_error("--port needs a number from 0 to 65535");
      options.port = static_cast<int>(n);
    } else if (arg == "--token-file") {
      if (!take(&token_file)) return usage_error("--token-file needs a file name");
    } else if (arg == "--log-level") {
      if (!take(&level)) return usage_error("--log-level needs a level");
    } else if (arg == "--max-connections") {
      if (!take_number(1, 10000000, &n))
        return usage_error("--max-connections needs a positive number");
      options.max_connections = static_cast<size_t>(n);
    } else if (arg == "--max-jobs") {
      if (!take_number(1, 10000000, &n)) return usage_error("--max-jobs needs a positive number");
      options.max_jobs = static_cast<size_t>(n);
    } else if (arg == "--max-keys-per-job") {
      if (!take_number(1, 100000000, &n))
        return usage_error("--max-keys-per-job needs a positive number");
      options.max_keys_per_job = static_cast<size_t>(n);
    } else if (arg == "--handshake-timeout-ms") {
      if (!take_number(1, 86400000, &n))
        return usage_error("--handshake-timeout-ms needs a positive number");
      options.handshake_timeout = std::chrono::milliseconds(n);
    } else if (arg == "--frame-timeout-ms") {
      if (!take_number(1, 86400000, &n))
        return usage_error("--frame-timeout-ms needs a positive number");
      options.frame_timeout = std::chrono::milliseconds(n);
    } else if (arg == "--heartbeat-timeout-ms") {
      if (!take_number(0, 86400000, &n))
        return usage_error("--heartbeat-timeout-ms needs a number");
      options.heartbeat_timeout = std::chrono::milliseconds(n);
    } else if (arg == "--idle-timeout-ms") {
      if (!take_number(0, 86400000, &n)) return usage_error("--idle-timeout-ms needs a number");
      options.idle_timeout = std::chrono::milliseconds(n);
    } else {
      return usage_error("unknown argument '" + std::string(argv[i]) + "'");
    }
  }

  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return usage_error("unknown log level '" + level + "' (trace, debug, info, warn, error, off)");
  cc::log().set_level(lvl);  // the daemon owns its logging

  if (!token_file.empty()) {
    std::string error;
    if (!read_token(token_file, &options.token, &error)) {
      std::fprintf(stderr, "cc-rendezvous: %s\n", error.c_str());
      return 1;
    }
  }

  // Signals are taken by sigwait below; block them before the io thread starts
  // so it inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<cc::rv::Server> server;
  cc::Status st = cc::rv::Server::start(options, &server);
  if (!st.ok()) {
    std::fprintf(stderr, "cc-rendezvous: %s\n", st.message.c_str());
    return 1;
  }
  cc::log().info("cc-rendezvous {} ready on port {} (pid {})", CC_VERSION_STRING, server->port(),
                 getpid());

  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  cc::log().info("received {}, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server->stop();
  cc::log().flush();
  return 0;
}
