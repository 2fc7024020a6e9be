#include "tools/cc-rendezvous/status_command.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/settings.hpp"
#include "common/token_file.hpp"
#include "rendezvous/factory/connect.hpp"
#include "tools/cc-rendezvous/status_render.hpp"
#include "tools/cli/cli.hpp"

namespace cc::tools::rendezvous {
namespace {

constexpr const char* kAbout =
    "Asks a running rendezvous server for each job, its communicators\n"
    "and their members (rank, host, pid, address, last heartbeat, last completed\n"
    "operation), the ranks missing and who is behind. Works against cc-rendezvous\n"
    "and against the server of a running job (rank 0's, or cc-run's).";

constexpr const char* kFooter =
    "The address, port and token default to MASTER_ADDR, MASTER_PORT and\n"
    "CC_RENDEZVOUS_TOKEN (or CC_RENDEZVOUS_TOKEN_FILE), as a rank reads them.";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "cc-rendezvous status: %s (see cc-rendezvous status --help)\n",
               message.c_str());
  return 2;
}

}  // namespace

int status_command(int argc, char** argv) {
  const settings::Getenv env = settings::process_env();
  rv::factory::Options options;
  options.job_id.clear();  // a status client enters no job
  options.client = "cc-rendezvous status";
  std::string addr = "127.0.0.1";
  if (const auto a = settings::find(settings::Id::master_addr, env); a.var && *a.value)
    addr = a.value;
  std::string token_file;
  std::string job;
  bool json = false;
  long long port = -1;
  long long timeout_ms = 10000;

  cc::tools::cli::CommandLine command_line("usage: cc-rendezvous status [options]", 24);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.footer(kFooter);
  app.add_option("--addr", addr,
                 "the server's address, a host (with --port) or\ntcp://host:port "
                 "(default MASTER_ADDR, else 127.0.0.1)")
      ->option_text("ADDR");
  app.add_option_function<std::string>(
         "--port",
         [&](const std::string& v) {
           if (settings::parse_int("--port", v.c_str(), 1, 65535, &port).code != CC_SUCCESS)
             cc::tools::cli::reject("--port needs a number from 1 to 65535");
         },
         "the server's port (default MASTER_PORT, else 29500)")
      ->option_text("PORT");
  app.add_option("--token-file", token_file, "the token, as the server's --token-file")
      ->option_text("FILE");
  app.add_option("--job", job, "only this job")->option_text("ID");
  app.add_flag("--json", json, "one JSON document instead of text");
  app.add_option_function<std::string>(
         "--timeout-ms",
         [&](const std::string& v) {
           if (settings::parse_int("--timeout-ms", v.c_str(), 1, 3600000, &timeout_ms).code !=
               CC_SUCCESS)
             cc::tools::cli::reject("--timeout-ms needs a positive number");
         },
         "give up after N ms (default 10000)")
      ->option_text("N");
  command_line.add_help();

  if (const auto exit_status = command_line.parse_or_exit(
          argc, argv, "argument", [](const std::string& message) { usage_error(message); }))
    return *exit_status;

  if (port < 0) {
    long long from_env = 29500;
    settings::Found found;
    if (Status st = settings::read_int(settings::Id::master_port, env, &from_env, &found); !st.ok())
      return usage_error(st.message);
    port = from_env;
  }
  rv::factory::Address address;
  if (Status st = rv::factory::parse_address(addr, static_cast<int>(port), &address); !st.ok())
    return usage_error("--addr: " + st.message);

  Status read;
  if (!token_file.empty()) {
    // The server's own file: its admin token, which sees every job.
    Tokens tokens;
    read = read_tokens(token_file, "--token-file", &tokens);
    if (read.ok() && tokens.admin.empty())
      read = make_status(CC_ERR_INVALID_ARGUMENT,
                         "the token file '" + token_file +
                             "' has job tokens and no admin line: give status one job's "
                             "token in CC_RENDEZVOUS_TOKEN to see that job");
    options.token = tokens.admin;
  } else if (const auto t = settings::find(settings::Id::token, env); t.var && *t.value) {
    options.token = t.value;
  } else if (const auto f = settings::find(settings::Id::token_file, env); f.var && *f.value) {
    read = read_token_file(f.value, f.var, &options.token);
  }
  if (!read.ok()) {
    std::fprintf(stderr, "cc-rendezvous status: %s\n", read.message.c_str());
    return 1;
  }

  const auto timeout = std::chrono::milliseconds(timeout_ms);
  options.connect_timeout = timeout;
  options.request_timeout = timeout;
  std::unique_ptr<rv::Client> client;
  if (Status st = rv::factory::connect_client(address, options, &client); !st.ok()) {
    std::fprintf(stderr, "cc-rendezvous status: %s\n", st.message.c_str());
    return 1;
  }
  rv::StatusReport report;
  if (Status st = client->status(rv::StatusQuery{job}, &report, timeout); !st.ok()) {
    std::fprintf(stderr, "cc-rendezvous status: %s\n", st.message.c_str());
    return 1;
  }
  if (json) {
    // ASCII only: a name the server sent cannot reach the terminal as a
    // control character, whatever its encoding.
    const std::string text =
        status_json(report, client->endpoint())
            .dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace);
    std::printf("%s\n", text.c_str());
  } else {
    std::fputs(status_text(report, client->endpoint()).c_str(), stdout);
  }
  return 0;
}

}  // namespace cc::tools::rendezvous
