#include "tools/cc-run/run_options.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "common/settings.hpp"
#include "tools/cli/cli.hpp"

namespace cc::tools::run {
namespace {

constexpr const char* kAbout =
    "Starts N ranks of PROGRAM on this node with the environment cc reads "
    "(CC_RANK/RANK,\n"
    "CC_WORLD_SIZE/WORLD_SIZE, CC_LOCAL_RANK/LOCAL_RANK, LOCAL_WORLD_SIZE, "
    "MASTER_ADDR,\n"
    "MASTER_PORT, CC_JOB_ID, CC_RENDEZVOUS=external). Node 0 hosts the "
    "rendezvous server\n"
    "(on 127.0.0.1 for one node without --master-addr, else on 0.0.0.0, or :: "
    "for an IPv6\n"
    "--master-addr), unless --master-addr names an etcd cluster.\n"
    "Every output line is prefixed with \"[rank R] \". When a rank fails, the "
    "others are\n"
    "stopped and cc-run exits with the failed rank's status (128+signal for a "
    "signal),\n"
    "unless --max-restarts lets the job survive it.";

constexpr const char* kFooter =
    "The server takes its token from CC_RENDEZVOUS_TOKEN or "
    "CC_RENDEZVOUS_TOKEN_FILE.";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "cc-run: %s\n(cc-run --help shows the usage)\n", message.c_str());
  std::exit(kUsageError);
}

// An option taking a value that must not be empty ("FLAG is empty").
void add_text(CLI::App& app, const std::string& flag, std::string* target, const std::string& help,
              const std::string& value_name) {
  app.add_option_function<std::string>(
         flag,
         [=](const std::string& v) {
           if (v.empty()) cc::tools::cli::reject(flag + " is empty");
           *target = v;
         },
         help)
      ->option_text(value_name);
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  cc::tools::cli::CommandLine command_line("usage: cc-run -n N [options] -- PROGRAM [ARGS...]", 25);
  CLI::App& app = command_line.app();
  app.description(kAbout);
  app.footer(kFooter);
  // The first argument no option takes is the program: it and everything
  // after it (or after "--") are the program's.
  app.prefix_command();
  auto* nproc =
      app.add_option_function<std::string>(
             "-n,--nproc",
             [&](const std::string& v) {
               o.nproc = static_cast<int>(cc::tools::cli::number(command_line.spelled("-n"), v, 1, 4096));
             },
             "ranks on this node (required)")
          ->option_text("N");
  cc::tools::cli::add_number(app, "--nnodes", "K", 1, 100000, &o.nnodes,
                      "nodes in the job (default 1); world size = K * N");
  auto* node_rank =
      cc::tools::cli::add_number(app, "--node-rank", "I", 0, 100000, &o.node_rank,
                          "this node's index, 0..K-1 (default 0); node 0 hosts the server");
  add_text(app, "--master-addr", &o.master_addr,
           "the rendezvous address the ranks use (default 127.0.0.1;\n"
           "required on nodes other than 0): a host with --master-port, or\n"
           "tcp://host:port; etcd://host:port[,host:port...] (or etcds://)\n"
           "puts the rendezvous in that etcd cluster: no node hosts a server,\n"
           "so any node may fail. --master-port is unused with both forms",
           "A");
  auto* master_port =
      cc::tools::cli::add_number(app, "--master-port", "P", 0, 65535, &o.master_port,
                          "port of the rendezvous (node 0: 0 = any free port, the default;\n"
                          "required on nodes other than 0)");
  add_text(app, "--job-id", &o.job_id,
           "job id (default: CC_JOB_ID, else a fresh one for one node,\n"
           "else \"default\")",
           "J");
  cc::tools::cli::add_number(app, "--grace-ms", "MS", 0, INT_MAX, &o.grace_ms,
                      "after a rank fails, wait MS before SIGTERM, and MS more before\n"
                      "SIGKILL (default 2000)");
  cc::tools::cli::add_number(app, "--timeout-ms", "MS", 1, INT_MAX, &o.timeout_ms,
                      "exported to the ranks as CC_TIMEOUT_MS (init and store deadline)");
  cc::tools::cli::add_number(app, "--max-restarts", "K", 0, INT_MAX, &o.max_restarts,
                      "the job survives failed ranks: a rank that fails is started\n"
                      "again (same environment plus CC_RESTART_COUNT=n, the n-th\n"
                      "restart of the job), up to K restarts in the job; the other\n"
                      "ranks are never stopped for it (they recover with\n"
                      "cc_comm_regrow or cc_comm_shrink). The exit status is that of\n"
                      "the first rank that failed and was not started again");
  app.add_flag("--share-gpu", o.share_gpu,
               "every rank of this node on one GPU (CC_DEVICE, default 0), each\n"
               "its own host to NCCL (NCCL_HOSTID), NCCL over sockets, cc's\n"
               "kernels off: for testing with fewer GPUs than ranks; timings\n"
               "mean nothing (sets CC_SHARE_GPU=1, LOCAL_RANK=0, LOCAL_WORLD_SIZE=1)");
  app.add_flag("!--no-agent", o.agent,
               "the ranks reach the rendezvous each on a connection of its\n"
               "own, as ranks of other launchers do, instead of through this\n"
               "cc-run (the node's agent: one connection for the node, or on\n"
               "etcd one lease and one watch for the node; a rank's death\n"
               "told the moment it exits)");
  command_line.add_help();

  if (const auto exit_status = command_line.parse_or_exit(argc, argv, "option", usage_error))
    std::exit(*exit_status);
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().rfind("-", 0) == 0) {
    usage_error("unknown option '" + o.command.front() + "'");
  }

  if (nproc->count() == 0) usage_error("-n N (ranks on this node) is required");
  if (o.command.empty()) usage_error("no program given: cc-run -n N -- PROGRAM [ARGS...]");
  if (o.node_rank >= o.nnodes) {
    usage_error("--node-rank " + std::to_string(o.node_rank) + " is not below --nnodes " +
                std::to_string(o.nnodes));
  }
  if (o.nnodes > 1 && node_rank->count() == 0)
    usage_error("--nnodes " + std::to_string(o.nnodes) + " needs --node-rank");
  if (static_cast<long long>(o.nnodes) * o.nproc > INT_MAX)
    usage_error("the world size is too large");
  const std::string addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  if (cc::Status s = cc::rv::factory::parse_address(addr, o.master_port, &o.rendezvous); !s.ok())
    usage_error("--master-addr: " + s.message);
  if (o.node_rank != 0) {
    if (o.master_addr.empty())
      usage_error("node " + std::to_string(o.node_rank) +
                  " needs --master-addr (node 0's address)");
    if ((master_port->count() == 0 || o.master_port == 0) && o.rendezvous.needs_port()) {
      usage_error("node " + std::to_string(o.node_rank) +
                  " needs --master-port (the port node 0's cc-run serves)");
    }
  }
  return o;
}

}  // namespace cc::tools::run
