// Real etcd clusters for tests: one or three members on 127.0.0.1, on free
// ports, with data in a temporary directory; a member can be killed, and
// everything is stopped and removed when the cluster object goes.
//
// Members are started from the calling thread with PR_SET_PDEATHSIG, so a
// test process that dies takes its etcd with it: start clusters from the
// test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace cc::test {

class ChildProcess;

struct EtcdClusterOptions {
  int members = 1;
  // TLS on the client port (https): the server's certificate and key, and
  // the CA etcd checks client certificates against (client_ca empty: none).
  std::string cert_file, key_file, client_ca_file;
  int heartbeat_ms = 50;
  int election_ms = 500;
  std::vector<std::string> extra_args;  // more etcd flags, for every member
  std::vector<std::string> extra_env;   // NAME=value for every member (GOMAXPROCS=1, say)
  std::chrono::milliseconds start_timeout{20000};
};

class EtcdCluster {
 public:
  // The etcd program: $CC_ETCD_BIN, else etcd on PATH; empty when there is none.
  static std::string find_etcd();
  // etcdctl beside it (or on PATH); empty when there is none.
  static std::string find_etcdctl();

  // Starts the members and waits until they have a leader. Empty on success,
  // else the reason (with the members' last log lines).
  static std::string start(const EtcdClusterOptions& options, std::unique_ptr<EtcdCluster>* out);
  ~EtcdCluster();

  // etcd://127.0.0.1:A,127.0.0.1:B,... (etcds:// with TLS)
  std::string address() const;
  std::string endpoint(int member) const;  // "127.0.0.1:A"
  int size() const { return static_cast<int>(members_.size()); }
  const std::string& dir() const { return dir_; }

  // SIGKILL to one member; returns once it is gone.
  void kill(int member);
  bool alive(int member) const;
  pid_t pid(int member) const { return members_[static_cast<size_t>(member)].pid; }
  // The member that is the leader now, or -1 (asks each live member).
  int leader() const;
  // Waits until some live member is the leader; false at the timeout.
  bool wait_for_leader(std::chrono::milliseconds timeout) const;

  // Runs etcdctl against the live members (ETCDCTL_API=3) with extra
  // arguments; returns its exit status, its output in *output.
  int etcdctl(const std::vector<std::string>& args, std::string* output = nullptr) const;

  // The last lines of a member's log, for failure messages.
  std::string log_tail(int member, size_t lines = 20) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
    std::shared_ptr<ChildProcess> process;
    std::string log;
  };
  EtcdCluster() = default;
  std::string launch(int i, const std::string& initial_cluster);

  EtcdClusterOptions options_;
  std::string etcd_;
  std::string dir_;
  std::vector<Member> members_;
};

// A directory removed with everything in it when the object goes.
std::string make_temp_dir(const std::string& stem);
void remove_tree(const std::string& path);

}  // namespace cc::test
