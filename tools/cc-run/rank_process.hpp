// Starting one rank: its environment (the launch variables cc reads), and
// the process, in a process group of its own, so a signal reaches the whole
// rank (a shell script and its children) and never cc-run itself, and which
// dies with cc-run (PR_SET_PDEATHSIG), even with a cc-run killed outright.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "tools/cc-run/run_options.hpp"

namespace cc::tools::run {

// The environment of local rank `local`: this process's, with the launch
// variables set (and inherited ones that would shadow them dropped).
// agent_socket: the node agent's socket (CC_AGENT_SOCKET; empty: none).
// restart: 0 for a rank's first start, else the job's restart count.
std::vector<std::string> rank_environment(const Options& o, int local, const std::string& addr,
                                          int port, const std::string& job_id,
                                          const std::string& agent_socket, int restart = 0);

struct StartedRank {
  pid_t pid = -1;
  int out_fd = -1;  // read ends of its stdout and stderr (non-blocking)
  int err_fd = -1;
};

// Starts `command` with `env`; stdin is this process's when `inherit_stdin`,
// else /dev/null. Returns 0, or the errno of what failed.
int start_rank(const std::vector<std::string>& command, const std::vector<std::string>& env,
               bool inherit_stdin, StartedRank* out);

// Whether start_rank's error says the program itself was not found or is
// not an executable file.
bool program_not_found(int error);

// Sends `sig` to the process group of every started rank.
void signal_groups(const std::vector<pid_t>& pids, int sig);

// A waitpid status as an exit status (128 + signal for a signal), and as text.
int exit_code_of(int status);
std::string describe_status(int status);

}  // namespace cc::tools::run
