#include "tests/etcd/etcd_cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "tests/common/child_process.hpp"
#include "tests/common/free_port.hpp"

namespace cc::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// A port the kernel had free a moment ago. Ports handed out in one run are
// never handed out twice.
int fresh_port() {
  static std::set<int> given;
  for (int tries = 0; tries < 100; ++tries) {
    const int port = cc::test::free_port();
    if (port > 0 && given.insert(port).second) return port;
  }
  return 0;
}

// Where data directories go: $CC_ETCD_TEST_DIR, else /dev/shm when it has
// room (etcd's fsyncs cost nothing there), else $TMPDIR or /tmp.
std::string temp_base() {
  if (const char* d = std::getenv("CC_ETCD_TEST_DIR"); d != nullptr && *d != '\0') return d;
  struct statvfs sv {};
  if (::statvfs("/dev/shm", &sv) == 0 &&
      static_cast<unsigned long long>(sv.f_bavail) * sv.f_frsize > (2ull << 30) &&
      ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') return t;
  return "/tmp";
}

std::string client_scheme(const EtcdClusterOptions& o) {
  return o.cert_file.empty() ? "http" : "https";
}

}  // namespace

std::string make_temp_dir(const std::string& stem) {
  std::string templ = temp_base() + "/" + stem + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return {};
  return buf.data();
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  if (!path.empty()) fs::remove_all(path, ec);
}

std::string EtcdCluster::find_etcd() {
  if (const char* b = std::getenv("CC_ETCD_BIN"); b != nullptr && *b != '\0')
    return ::access(b, X_OK) == 0 ? std::string(b) : std::string();
  return on_path("etcd");
}

std::string EtcdCluster::find_etcdctl() {
  const std::string etcd = find_etcd();
  if (!etcd.empty()) {
    const std::string beside = fs::path(etcd).parent_path() / "etcdctl";
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return on_path("etcdctl");
}

std::string EtcdCluster::launch(int i, const std::string& initial_cluster) {
  Member& m = members_[static_cast<size_t>(i)];
  const std::string data = dir_ + "/" + m.name;
  const std::string client_url =
      client_scheme(options_) + "://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> args = {etcd_,
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   data,
                                   "--listen-client-urls",
                                   client_url,
                                   "--advertise-client-urls",
                                   client_url,
                                   "--listen-peer-urls",
                                   peer_url,
                                   "--initial-advertise-peer-urls",
                                   peer_url,
                                   "--initial-cluster",
                                   initial_cluster,
                                   "--initial-cluster-token",
                                   fs::path(dir_).filename().string(),
                                   "--initial-cluster-state",
                                   "new",
                                   "--heartbeat-interval",
                                   std::to_string(options_.heartbeat_ms),
                                   "--election-timeout",
                                   std::to_string(options_.election_ms),
                                   "--logger",
                                   "zap",
                                   "--log-outputs",
                                   "stderr"};
  if (!options_.cert_file.empty()) {
    args.insert(args.end(), {"--cert-file", options_.cert_file, "--key-file", options_.key_file});
    if (!options_.client_ca_file.empty())
      args.insert(args.end(), {"--trusted-ca-file", options_.client_ca_file, "--client-cert-auth"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  ChildOptions o;
  o.args = std::move(args);
  o.env = options_.extra_env;
  o.stdout_file = m.log;
  o.stderr_to_stdout = true;
  o.append = true;
  o.stdin_null = true;
  o.die_with_parent = true;
  try {
    m.process = std::make_shared<ChildProcess>(std::move(o));
  } catch (const std::exception& e) {
    return e.what();
  }
  m.pid = m.process->pid();
  return {};
}

std::string EtcdCluster::start(const EtcdClusterOptions& options,
                               std::unique_ptr<EtcdCluster>* out) {
  std::unique_ptr<EtcdCluster> c(new EtcdCluster());
  c->options_ = options;
  c->etcd_ = find_etcd();
  if (c->etcd_.empty()) return "no etcd program (install etcd-server, or set CC_ETCD_BIN)";
  c->dir_ = make_temp_dir("cc-etcd");
  if (c->dir_.empty())
    return std::string("cannot make a temporary directory: ") + std::strerror(errno);
  std::string initial;
  for (int i = 0; i < options.members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = fresh_port();
    m.peer_port = fresh_port();
    if (m.client_port == 0 || m.peer_port == 0) return "no free port on 127.0.0.1";
    m.log = c->dir_ + "/" + m.name + ".log";
    initial += (i ? "," : "") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    c->members_.push_back(m);
  }
  for (int i = 0; i < options.members; ++i)
    if (std::string e = c->launch(i, initial); !e.empty()) return e;
  if (!c->wait_for_leader(options.start_timeout)) {
    std::string why = "etcd did not elect a leader within " +
                      std::to_string(options.start_timeout.count()) + " ms";
    for (int i = 0; i < c->size(); ++i)
      why += "\n--- member " + std::to_string(i) + ":\n" + c->log_tail(i, 8);
    return why;
  }
  *out = std::move(c);
  return {};
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) kill(i);
  if (std::getenv("CC_ETCD_KEEP") == nullptr) remove_tree(dir_);
}

std::string EtcdCluster::address() const {
  std::string out = options_.cert_file.empty() ? "etcd://" : "etcds://";
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + endpoint(i);
  return out;
}

std::string EtcdCluster::endpoint(int member) const {
  return "127.0.0.1:" + std::to_string(members_[static_cast<size_t>(member)].client_port);
}

void EtcdCluster::kill(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  m.process->reap();
  m.process.reset();
  m.pid = -1;
}

bool EtcdCluster::alive(int member) const { return members_[static_cast<size_t>(member)].pid > 0; }

int EtcdCluster::leader() const {
  for (int i = 0; i < size(); ++i) {
    if (!alive(i)) continue;
    const Member& m = members_[static_cast<size_t>(i)];
    std::unique_ptr<httplib::ClientImpl> cli;
    if (options_.cert_file.empty()) {
      cli = std::make_unique<httplib::ClientImpl>("127.0.0.1", m.client_port);
    } else {
      auto s = std::make_unique<httplib::SSLClient>("127.0.0.1", m.client_port);
      s->enable_server_certificate_verification(false);
      cli = std::move(s);
    }
    cli->set_connection_timeout(milliseconds(300));
    cli->set_read_timeout(milliseconds(500));
    auto res = cli->Post("/v3/maintenance/status", "{}", "application/json");
    if (!res || res->status != 200) continue;
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (!j.is_object()) continue;
    const std::string leader = j.value("leader", "");
    const std::string me = j.contains("header") ? j["header"].value("member_id", "") : "";
    if (leader.empty() || leader == "0") continue;
    if (leader == me) return i;
  }
  return -1;
}

bool EtcdCluster::wait_for_leader(milliseconds timeout) const {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    if (leader() >= 0) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

int EtcdCluster::etcdctl(const std::vector<std::string>& args, std::string* output) const {
  const std::string prog = find_etcdctl();
  if (prog.empty()) {
    if (output != nullptr) *output = "no etcdctl program (install etcd-client)";
    return 127;
  }
  std::string endpoints;
  for (int i = 0; i < size(); ++i)
    if (alive(i))
      endpoints += (endpoints.empty() ? "" : ",") + client_scheme(options_) + "://" + endpoint(i);
  const std::string out_file = dir_ + "/etcdctl.out";
  ChildOptions o;
  o.args = {prog, "--endpoints=" + endpoints, "--dial-timeout=5s", "--command-timeout=10s"};
  if (!options_.cert_file.empty()) o.args.push_back("--insecure-skip-tls-verify");
  o.args.insert(o.args.end(), args.begin(), args.end());
  o.env = {"ETCDCTL_API=3"};
  o.stdout_file = out_file;
  o.stderr_to_stdout = true;
  int status = 0;
  try {
    status = ChildProcess(std::move(o)).reap();
  } catch (const std::exception& e) {
    if (output != nullptr) *output = e.what();
    return -1;
  }
  if (output != nullptr) {
    std::ifstream in(out_file);
    std::stringstream ss;
    ss << in.rdbuf();
    *output = ss.str();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string EtcdCluster::log_tail(int member, size_t lines) const {
  std::ifstream in(members_[static_cast<size_t>(member)].log);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line)) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

}  // namespace cc::test
