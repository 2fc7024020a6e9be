#include "rendezvous/etcd/node_agent_server.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/log.hpp"
#include "rendezvous/etcd/node_lines.hpp"

namespace cc::rv::etcd::node {

namespace {

using std::chrono::milliseconds;

// How long a rank whose connection ended waits for cc-run to tell its exit.
constexpr milliseconds kExitGrace{200};
constexpr size_t kMaxLine = 4 << 20;  // a claim or an answer (rank 0's lists every member)

Status private_folder(std::string* out) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : "/tmp") + "/cc-agent-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    return make_status(CC_ERR_SYSTEM, "cannot make a folder for the node agent's socket (" +
                                          pattern + "): " + std::strerror(errno) +
                                          "; set TMPDIR to a writable folder");
  *out = pattern;
  return Status::success();
}

// One rank's connection; written from several threads (answers, events).
struct Conn {
  int fd = -1;
  pid_t pid = 0, group = 0;
  RankId id = 0;
  std::mutex write_mu;
  std::vector<uint64_t> watches;            // the agent's subscriptions, under the server's mu
  std::map<uint64_t, uint64_t> by_request;  // the rank's watch id -> subscription

  void send(const json& j) {
    std::lock_guard<std::mutex> lock(write_mu);
    (void)write_line(fd, j);  // false: the rank is gone, its reader sees the end
  }
  // Closed with the last holder (a claim's answer may come after the rank
  // went), so that a late answer never reaches another rank that got the
  // same descriptor number.
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

struct AgentServer::Impl {
  std::unique_ptr<Agent> agent;
  std::string folder, path;
  int listen_fd = -1;
  std::thread acceptor;

  mutable std::mutex mu;
  std::condition_variable exit_cv;
  bool stopping = false;
  std::unordered_map<RankId, std::shared_ptr<Conn>> conns;
  std::vector<std::thread> readers;
  std::map<pid_t, std::string> exits;  // process group -> how it ended
  RankId next_id = 1;

  void accept_loop();
  void read_loop(std::shared_ptr<Conn> c);
  void handle(Conn& c, const json& m);
  void closed(const std::shared_ptr<Conn>& c);
  std::shared_ptr<Conn> connection(RankId id) {
    std::lock_guard<std::mutex> lock(mu);
    return conns.at(id);  // a connection is there while its reader runs
  }
};

AgentServer::AgentServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status AgentServer::start(const AgentOptions& options, std::unique_ptr<AgentServer>* out) {
  auto impl = std::make_unique<Impl>();
  if (Status s = Agent::start(options, &impl->agent); !s.ok()) return s;
  if (Status s = private_folder(&impl->folder); !s.ok()) return s;
  impl->path = impl->folder + "/agent.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (impl->path.size() >= sizeof(addr.sun_path))
    return make_status(CC_ERR_SYSTEM, "the node agent's socket path " + impl->path +
                                          " is too long; set TMPDIR to a shorter folder");
  std::memcpy(addr.sun_path, impl->path.data(), impl->path.size());
  impl->listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0 ||
      ::bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(impl->listen_fd, SOMAXCONN) != 0)
    return make_status(CC_ERR_SYSTEM, "cannot listen on the node agent's socket " + impl->path +
                                          ": " + std::strerror(errno));
  Impl* i = impl.get();
  i->agent->on_lease_lost([i](int64_t old) {
    std::lock_guard<std::mutex> lock(i->mu);
    for (auto& [id, c] : i->conns) c->send(json{{"lease_lost", std::to_string(old)}});
  });
  i->agent->on_lease_kept([i] {
    std::lock_guard<std::mutex> lock(i->mu);
    for (auto& [id, c] : i->conns) c->send(json{{"kept", true}});
  });
  i->acceptor = std::thread([i] { i->accept_loop(); });
  log().debug("node agent listening on {} for etcd", i->path);
  out->reset(new AgentServer(std::move(impl)));
  return Status::success();
}

AgentServer::~AgentServer() {
  Impl& i = *impl_;
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> lock(i.mu);
    i.stopping = true;
    for (auto& [id, c] : i.conns) ::shutdown(c->fd, SHUT_RDWR);
  }
  i.exit_cv.notify_all();
  ::shutdown(i.listen_fd, SHUT_RDWR);
  if (i.acceptor.joinable()) i.acceptor.join();
  {
    std::lock_guard<std::mutex> lock(i.mu);
    readers = std::move(i.readers);
  }
  for (auto& t : readers) t.join();
  ::close(i.listen_fd);
  ::unlink(i.path.c_str());
  ::rmdir(i.folder.c_str());
  i.agent.reset();
}

const std::string& AgentServer::socket_path() const { return impl_->path; }

size_t AgentServer::rank_count() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->conns.size();
}

void AgentServer::process_exited(pid_t group, const std::string& words) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->exits[group] = words;
  }
  impl_->exit_cv.notify_all();
}

void AgentServer::Impl::accept_loop() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c->pid = cred.pid;
      c->group = std::max<pid_t>(0, ::getpgid(cred.pid));
    }
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) return;  // ~Conn closes it
    c->id = next_id++;
    conns.emplace(c->id, c);
    readers.emplace_back([this, c] { read_loop(c); });
  }
}

void AgentServer::Impl::read_loop(std::shared_ptr<Conn> c) {
  const std::string why = read_lines(c->fd, kMaxLine, [&](json m) {
    handle(*c, m);
    return true;
  });
  if (!why.empty()) log().warn("node agent: pid {} sent {}; closing its connection", c->pid, why);
  closed(c);
}

void AgentServer::Impl::handle(Conn& c, const json& m) {
  const std::string op = m.value("op", "");
  const uint64_t id = m.value("id", uint64_t{0});
  if (op == "lease") {
    c.send(json{{"id", id},
                {"lease", std::to_string(agent->lease())},
                {"ttl", agent->lease_ttl()},
                {"node", agent->node_words()}});
  } else if (op == "claim") {
    std::shared_ptr<Conn> keep = connection(c.id);
    agent->claim(m.value("txn", json::object()),
                 [keep, id](const Status& s, const std::string& answer) {
                   if (s.ok())
                     keep->send(json{{"id", id}, {"answer", json::parse(answer, nullptr, false)}});
                   else
                     keep->send(json{{"id", id}, {"error", s.message}, {"code", int(s.code)}});
                 });
  } else if (op == "watch") {
    std::vector<WatchSpec> specs;
    for (const json& s : m.value("specs", json::array()))
      if (auto spec = parse_spec(s)) specs.push_back(std::move(*spec));
    std::shared_ptr<Conn> keep = connection(c.id);
    const uint64_t sub =
        agent->subscribe(std::move(specs), [keep, id](std::vector<WatchEvent> evs) {
          json events = json::array();
          for (const WatchEvent& e : evs) events.push_back(event_json(e));
          keep->send(json{{"watch", id}, {"events", std::move(events)}});
        });
    std::lock_guard<std::mutex> lock(mu);
    c.watches.push_back(sub);
    c.by_request[id] = sub;
  } else if (op == "unwatch") {
    uint64_t sub = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = c.by_request.find(id);
      if (it == c.by_request.end()) return;
      sub = it->second;
      c.by_request.erase(it);
      c.watches.erase(std::remove(c.watches.begin(), c.watches.end(), sub), c.watches.end());
    }
    agent->unsubscribe(sub);
  } else if (op == "own") {
    if (auto key = key_field(m, "key")) agent->own(c.id, std::move(*key));
  } else if (op == "member") {
    if (auto ms = parse_membership(m)) agent->member(c.id, std::move(*ms));
  } else if (op == "left" || op == "ended") {
    auto gen = key_field(m, "gen");
    if (!gen) return;
    if (op == "left")
      agent->left(c.id, *gen);
    else
      agent->ended(c.id, *gen);
  }
}

// The rank's connection ended: its watches go; unless it left, its
// departure is told in the words of its process's end (cc-run tells them
// within the grace), or as a connection closed without leaving.
void AgentServer::Impl::closed(const std::shared_ptr<Conn>& c) {
  std::vector<uint64_t> watches;
  std::string words;
  {
    std::unique_lock<std::mutex> lock(mu);
    watches = std::move(c->watches);
    exit_cv.wait_for(lock, kExitGrace,
                     [&] { return stopping || (c->group != 0 && exits.count(c->group) != 0); });
    auto it = c->group != 0 ? exits.find(c->group) : exits.end();
    words = it != exits.end()
                ? it->second
                : "closed its connection to cc-run's node agent (" + agent->node_words() +
                      ") without leaving, and its process was not seen to exit";
    conns.erase(c->id);
  }
  for (uint64_t sub : watches) agent->unsubscribe(sub);
  agent->rank_gone(c->id, words);
  ::shutdown(c->fd, SHUT_RDWR);  // closed with the last holder (~Conn)
}

}  // namespace cc::rv::etcd::node
