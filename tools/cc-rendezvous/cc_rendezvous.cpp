// cc-rendezvous: the long-lived rendezvous daemon that serves many jobs;
// `cc-rendezvous status` asks a running server for its jobs (status_command).
// The daemon may serve Prometheus metrics on a port of its own (metrics_http)
// and rereads its token file and TLS certificate on SIGHUP.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cc/cc_version.h"
#include "common/log.hpp"
#include "common/token_file.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/server_metrics.hpp"
#include "rendezvous/tls/context.hpp"
#include "tools/cc-rendezvous/elected_daemon.hpp"
#include "tools/cc-rendezvous/metrics_http.hpp"
#include "tools/cc-rendezvous/status_command.hpp"
#include "tools/cli/cli.hpp"

namespace {

using cc::tools::cli::add_duration;
using cc::tools::cli::add_size;
using cc::tools::cli::add_value;

constexpr const char* kAbout =
    "The cc rendezvous daemon: hands every rank of a job the NCCL id and its\n"
    "keys, checks that ranks agree, and tells a job at once when a rank fails.\n"
    "`cc-rendezvous status` shows a running server's jobs (see status --help).";

constexpr const char* kFooter =
    "SIZE: bytes, or with K, M or G (KiB, MiB, GiB). DURATION: 500ms, 30s, 10m,\n"
    "2h (a bare number is seconds).\n"
    "\n"
    "A job's keys outlive its connections; its communicators are forgotten when\n"
    "its last rank leaves. A full store refuses writes with words, never evicts.\n"
    "\n"
    "SIGINT or SIGTERM stops the daemon: waiting clients get an error, members\n"
    "are told the server is stopping. SIGHUP rereads the token file and the\n"
    "TLS certificate and key: new connections must prove the new token and get\n"
    "the new certificate, connected jobs keep running.\n"
    "\n"
    "With --etcd, run two or three daemons: etcd elects one to serve, the others\n"
    "stand by. The leader keeps every store write in etcd before it answers, so\n"
    "when it dies the next one takes over within the lease with nothing lost,\n"
    "and clients reconnect to it and resume.";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "cc-rendezvous: %s (see --help)\n", message.c_str());
  return 2;
}

// A whole number in [min, max], or the option's message for a bad value.
long long number(const std::string& text, long long min, long long max,
                 const std::string& message) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < min || v > max)
    cc::tools::cli::reject(message);
  return v;
}

// An option taking a whole number N from min to max into *target (a count or
// milliseconds); a bad value is "FLAG needs a positive number" ("a number"
// when 0 is allowed).
template <typename T>
void add_number(CLI::App& app, const std::string& flag, long long min, long long max, T* target,
                const std::string& help) {
  const std::string message = flag + (min > 0 ? " needs a positive number" : " needs a number");
  add_value(app, flag, "N", help,
            [=](const std::string& v) { *target = T(number(v, min, max, message)); });
}

// Token reloads (SIGHUP), for the metrics endpoint.
std::atomic<uint64_t> token_reloads{0};
std::atomic<uint64_t> token_reload_failures{0};

// SIGHUP: the token file again. A file that cannot be read, or a server
// that does not take the token within 5 s, keeps the old token (and says
// so); a server without a token file has nothing to reread.
void reload_token(const std::function<bool(const cc::Tokens&)>& set_tokens,
                  const std::string& token_file) {
  if (token_file.empty()) {
    cc::log().warn(
        "SIGHUP: the daemon was started without --token-file, so there is no token "
        "to reread");
    return;
  }
  cc::Tokens tokens;
  if (const cc::Status read = cc::read_tokens(token_file, "--token-file", &tokens); !read.ok()) {
    ++token_reload_failures;
    cc::log().error("SIGHUP: {}; the old token stays in force", read.message);
    return;
  }
  if (!set_tokens(tokens)) {
    ++token_reload_failures;
    cc::log().error(
        "SIGHUP: the server's thread did not take the new token within 5 s (is it overloaded?); "
        "the old one stays in force: send SIGHUP again");
    return;
  }
  ++token_reloads;
  cc::log().info(
      "token reloaded from {}: new connections must prove it; connected jobs keep "
      "running",
      token_file);
}

std::optional<std::string> render_metrics(cc::rv::Server* server) {
  if (server == nullptr)  // a daemon standing by for etcd's election
    return cc::rv::prometheus_metric("cc_rendezvous_leader", "gauge",
                                     "1 while this daemon serves (leads), 0 while it stands by.",
                                     0);
  std::optional<cc::rv::ServerMetrics> m = server->metrics(std::chrono::seconds(2));
  if (!m) return std::nullopt;
  return cc::rv::prometheus_text(*m) +
         cc::rv::prometheus_metric("cc_rendezvous_token_reloads_total", "counter",
                                   "Token files reread on SIGHUP and taken.", token_reloads) +
         cc::rv::prometheus_metric("cc_rendezvous_token_reload_failures_total", "counter",
                                   "SIGHUPs whose token file could not be read or whose token "
                                   "the server did not take (the old token stayed).",
                                   token_reload_failures);
}

// SIGHUP: the TLS certificate and key again; on an error the old ones stay.
void reload_tls(cc::rv::tls::ServerContext* context) {
  if (context == nullptr) return;
  if (const cc::Status s = context->reload(); !s.ok()) {
    cc::log().error("SIGHUP: {}; the old TLS certificate stays in force", s.message);
    return;
  }
  cc::log().info("TLS certificate reloaded from {}: new connections get it; connected ones keep "
                 "theirs",
                 context->files().cert);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "status") == 0)
    return cc::tools::rendezvous::status_command(argc - 1, argv + 1);

  cc::rv::ServerOptions options;
  options.port = 29500;
  std::string token_file;
  cc::rv::tls::ServerFiles tls_files;
  std::optional<cc::tools::rendezvous::MetricsEndpoint> metrics;
  cc::tools::rendezvous::ElectedOptions elected;
  std::string level = std::getenv("CC_LOG_LEVEL") ? std::getenv("CC_LOG_LEVEL") : "info";
  bool version = false;

  cc::tools::cli::CommandLine command_line(
      "usage: cc-rendezvous [options]\n       cc-rendezvous status [options]", 28);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.footer(kFooter);
  add_value(app, "--bind", "ADDR",
            "address to listen on (default 0.0.0.0; :: for IPv6\n"
            "and IPv4, 127.0.0.1, ::1 or a host name)",
            [&](const std::string& v) {
              if (v.empty()) cc::tools::cli::reject("--bind needs an address");
              options.bind_addr = v;
            });
  add_value(app, "--port", "PORT", "TCP port (default 29500; 0 = any free port)",
            [&](const std::string& v) {
              options.port =
                  static_cast<int>(number(v, 0, 65535, "--port needs a number from 0 to 65535"));
            });
  app.add_option("--token-file", token_file,
                 "require clients to prove they know the token in\n"
                 "FILE (CC_RENDEZVOUS_TOKEN on the ranks); lines\n"
                 "\"job PREFIX TOKEN\" and \"admin TOKEN\" give jobs\n"
                 "tokens of their own")
      ->option_text("FILE");
  app.add_option("--tls-cert", tls_files.cert,
                 "speak TLS 1.3 with this certificate (PEM, chain\n"
                 "after it); clients set CC_TLS_CA to its CA")
      ->option_text("FILE");
  app.add_option("--tls-key", tls_files.key, "the key of --tls-cert (PEM, mode 600)")
      ->option_text("FILE");
  app.add_option("--tls-client-ca", tls_files.client_ca,
                 "require client certificates signed by this CA\n"
                 "(mTLS; clients set CC_TLS_CERT and CC_TLS_KEY)")
      ->option_text("FILE");
  add_value(app, "--etcd", "URL",
            "serve only while etcd's election says this daemon\n"
            "leads (etcd://host:port[,...], etcds:// for TLS;\n"
            "CC_ETCD_* for auth, CA and key prefix); the store\n"
            "is kept in etcd",
            [&](const std::string& v) {
              if (v.empty()) cc::tools::cli::reject("--etcd needs an etcd://host:port address");
              elected.etcd = v;
            });
  add_value(app, "--advertise", "HOST:PORT",
            "with --etcd: the address clients dial (default:\n"
            "this host's address toward etcd, and --port)",
            [&](const std::string& v) {
              if (v.find(':') == std::string::npos)
                cc::tools::cli::reject("--advertise needs HOST:PORT");
              elected.advertise = v;
            });
  add_duration(app, "--lease", &elected.lease,
               "--lease needs a duration such as 5s or 2s",
               "with --etcd: the leader's lease; a leader that\n"
               "vanished is replaced within it (default 5s)");
  add_value(app, "--metrics", "[ADDR:]PORT",
            "serve Prometheus metrics at http://ADDR:PORT/metrics\n"
            "(PORT alone: 127.0.0.1, loopback only; no token)",
            [&](const std::string& v) {
              cc::tools::rendezvous::MetricsEndpoint ep;
              std::string error;
              if (!cc::tools::rendezvous::parse_metrics_endpoint(v, &ep, &error)) cc::tools::cli::reject(error);
              metrics = ep;
            });
  app.add_option("--log-level", level, "trace, debug, info (default), warn, error, off")
      ->option_text("LEVEL");
  add_number(app, "--max-connections", 1, 10000000, &options.max_connections,
             "refuse connections above N (default 100000)");
  add_number(app, "--max-jobs", 1, 10000000, &options.max_jobs,
             "refuse new jobs above N (default 10000)");
  add_number(app, "--max-keys-per-job", 1, 100000000, &options.max_keys_per_job,
             "refuse new keys above N per job (default 100000)");
  add_size(app, "--max-bytes-per-job", &options.max_bytes_per_job, "67108864 or 64MiB",
           "refuse a write that would take a job's keys and\n"
           "values above SIZE (default 64MiB)");
  add_size(app, "--max-total-bytes", &options.max_total_bytes, "1073741824 or 1GiB",
           "the same over every job (default 1GiB)");
  add_size(app, "--max-parked-bytes-per-connection", &options.max_parked_bytes_per_connection,
           "4194304 or 4MiB",
           "refuse a get or wait that would take what one\n"
           "connection has waiting for keys above SIZE (each\n"
           "counts its keys and 512 bytes; default 4MiB)");
  add_size(app, "--max-parked-bytes-per-job", &options.max_parked_bytes_per_job,
           "67108864 or 64MiB", "the same per job (default 64MiB)");
  add_size(app, "--max-parked-bytes", &options.max_parked_bytes_total, "268435456 or 256MiB",
           "the same over every job (default 256MiB)");
  add_duration(app, "--job-ttl", &options.job_ttl,
               "--job-ttl needs a duration such as 1h, 30m, 90s or 500ms "
               "(0 = keep a job's keys until deleted)",
               "keep the keys of a job with no connection for\n"
               "DURATION, then forget the job (default 1h;\n"
               "0 = until deleted or the daemon stops)");
  add_number(app, "--handshake-timeout-ms", 1, 86400000, &options.handshake_timeout,
             "drop a client that has not said hello (and\n"
             "authenticated) within N ms (default 10000)");
  add_number(app, "--frame-timeout-ms", 1, 86400000, &options.frame_timeout,
             "drop a client stalling inside a frame (default 10000)");
  add_number(app, "--heartbeat-timeout-ms", 0, 86400000, &options.heartbeat_timeout,
             "announce a member silent for N ms as failed\n"
             "(default 0 = off)");
  add_number(app, "--idle-timeout-ms", 0, 86400000, &options.idle_timeout,
             "close a connection that holds nothing (no\n"
             "membership, pending join, get or wait) and sent\n"
             "nothing for N ms (default 0 = never)");
  app.set_config("--config", "",
                 "read options from FILE, one per line as on the\n"
                 "command line without dashes (TOML: tls-cert =\n"
                 "\"/etc/cc/server.pem\"); the command line wins");
  command_line.add_help();
  app.add_flag("--version", version, "the cc version");

  if (const auto exit_status = command_line.parse_or_exit(
          argc, argv, "argument", [](const std::string& message) { usage_error(message); }))
    return *exit_status;
  if (version) {
    std::printf("cc-rendezvous %s\n", CC_VERSION_STRING);
    return 0;
  }

  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return usage_error("unknown log level '" + level + "' (trace, debug, info, warn, error, off)");
  cc::log().set_level(lvl);  // the daemon owns its logging

  if (!token_file.empty()) {
    cc::Tokens tokens;
    if (const cc::Status read = cc::read_tokens(token_file, "--token-file", &tokens); !read.ok()) {
      std::fprintf(stderr, "cc-rendezvous: %s\n", read.message.c_str());
      return 1;
    }
    options.token = tokens.admin;
    options.job_tokens = tokens.jobs;
    if (!tokens.jobs.empty())
      cc::log().info("{} job token(s) from {}{}", tokens.jobs.size(), token_file,
                     tokens.admin.empty() ? "; no admin token: status shows a job's token its "
                                            "jobs only, and nobody sees every job"
                                          : "");
  }

  if (tls_files.on() || !tls_files.key.empty() || !tls_files.client_ca.empty()) {
    if (!tls_files.on()) return usage_error("--tls-key and --tls-client-ca need --tls-cert");
    if (const cc::Status s = cc::rv::tls::ServerContext::open(tls_files, &options.tls); !s.ok()) {
      std::fprintf(stderr, "cc-rendezvous: %s\n", s.message.c_str());
      return 1;
    }
    cc::log().info("TLS 1.3 with the certificate {}{}", tls_files.cert,
                   tls_files.client_ca.empty() ? ""
                                               : "; clients must show a certificate from " +
                                                     tls_files.client_ca + " (mTLS)");
  }

  // Signals are taken by sigwait below; block them before the io thread starts
  // so it inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // A plain daemon serves from the start; with --etcd, while it leads.
  std::shared_ptr<cc::rv::Server> plain;
  std::unique_ptr<cc::tools::rendezvous::ElectedDaemon> candidate;
  cc::Status st;
  if (elected.etcd.empty()) {
    std::unique_ptr<cc::rv::Server> started;
    st = cc::rv::Server::start(options, &started);
    plain = std::move(started);
  } else {
    st = cc::tools::rendezvous::ElectedDaemon::start(elected, options, &candidate);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "cc-rendezvous: %s\n", st.message.c_str());
    return 1;
  }
  const auto serving = [&]() { return candidate ? candidate->server() : plain; };
  const auto set_tokens = [&](const cc::Tokens& tokens) {
    return candidate ? candidate->set_tokens(tokens, std::chrono::seconds(5))
                     : plain->set_tokens(tokens, std::chrono::seconds(5));
  };
  const auto stop = [&] {
    if (candidate) candidate->stop();
    if (plain) plain->stop();
  };
  std::unique_ptr<cc::tools::rendezvous::MetricsServer> metrics_server;
  if (metrics) {
    st = cc::tools::rendezvous::MetricsServer::start(
        *metrics, [&serving] { return render_metrics(serving().get()); }, &metrics_server);
    if (!st.ok()) {
      std::fprintf(stderr, "cc-rendezvous: %s\n", st.message.c_str());
      stop();
      return 1;
    }
    cc::log().info("metrics on http://{}/metrics", metrics_server->where());
  }
  if (plain)
    cc::log().info("cc-rendezvous {} ready on port {} (pid {})", CC_VERSION_STRING, plain->port(),
                   getpid());
  else
    cc::log().info("cc-rendezvous {} campaigning in {} for port {} (pid {})", CC_VERSION_STRING,
                   elected.etcd, options.port, getpid());
  if (options.job_ttl.count() > 0)
    cc::log().info("a job's keys are kept for {} ms after its last connection (--job-ttl)",
                   options.job_ttl.count());
  else
    cc::log().info("a job's keys are kept until deleted (--job-ttl 0)");

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      if (!token_file.empty() || !options.tls) reload_token(set_tokens, token_file);
      reload_tls(options.tls.get());
      continue;
    }
    cc::log().info("received {}, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    break;
  }
  if (metrics_server) metrics_server->stop();
  stop();
  cc::log().flush();
  return 0;
}
