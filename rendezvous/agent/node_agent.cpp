#include "rendezvous/agent/node_agent.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <unordered_set>

#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "common/log.hpp"
#include "rendezvous/agent/agent_loop.hpp"
#include "rendezvous/agent/socket_folder.hpp"
#include "rendezvous/agent/stream.hpp"

namespace cc::rv::agent {

namespace {

using Local = asio::local::stream_protocol;
using RankStream = Stream<Local::socket>;

class UnixNodeAgent final : public NodeAgent, private RankSide {
 public:
  UnixNodeAgent(asio::io_context& io, const NodeAgentOptions& o, UpstreamTarget target,
                SocketFolder folder)
      : folder_(std::move(folder)),
        path_(folder_.path() + "/agent.sock"),
        acceptor_(io),
        loop_(io, o.agent, *this, std::move(target)) {}

  ~UnixNodeAgent() override {
    *alive_ = false;
    loop_.stop();
    std::error_code ec;
    acceptor_.close(ec);
    accept_backoff_.cancel();
    for (auto& [id, s] : streams_) s->close_now();
    streams_.clear();  // folder_ goes last, with the socket in it
  }

  Status listen() {
    std::error_code ec;
    acceptor_.open(Local(), ec);
    if (!ec) acceptor_.bind(Local::endpoint(path_), ec);
    if (!ec && ::chmod(path_.c_str(), 0600) != 0) ec = std::error_code(errno, std::system_category());
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return make_status(CC_ERR_SYSTEM,
                         "cannot listen on the node agent's socket " + path_ + ": " + ec.message());
    accept();
    loop_.start();
    return Status::success();
  }

  const std::string& socket_path() const override { return path_; }

  void process_exited(pid_t group, const std::string& words) override {
    loop_.core().process_exited(group, words, Clock::now());
    loop_.after_input();
  }

  size_t rank_count() const override { return streams_.size(); }

 private:
  // Out of descriptors (or any failed accept), the next waits a little:
  // the waiting connection stays in the backlog and would fail it again at once.
  void accept() {
    auto alive = alive_;
    acceptor_.async_accept([this, alive](std::error_code ec, Local::socket socket) {
      if (!*alive || ec == asio::error::operation_aborted) return;
      if (!ec) {
        on_accepted(std::move(socket));
        return accept();
      }
      log().warn("node agent: cannot accept a rank's connection on {}: {}; trying again in {} ms",
                 path_, ec.message(), kAcceptBackoff.count());
      accept_backoff_.expires_after(kAcceptBackoff);
      accept_backoff_.async_wait([this, alive](std::error_code wec) {
        if (*alive && !wec) accept();
      });
    });
  }

  void on_accepted(Local::socket socket) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    pid_t pid = 0, group = 0;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        cred.uid != ::geteuid()) {
      // The folder is 0700, so only another user with privileges gets here.
      log().warn("node agent: refused a connection on {} from uid {} (pid {}): only this "
                 "user's ranks (uid {}) may use it",
                 path_, cred.uid, cred.pid, ::geteuid());
      return;
    }
    pid = cred.pid;
    group = ::getpgid(cred.pid);
    if (group < 0) group = 0;
    const LocalId id = next_id_++;
    auto stream = std::make_shared<RankStream>(std::move(socket), 16 * 1024);
    streams_.emplace(id, stream);
    loop_.core().rank_connected(id, pid, group, Clock::now());
    auto alive = alive_;
    stream->start(
        [this, alive, id](std::span<const uint8_t> bytes) {
          if (!*alive) return;
          loop_.core().rank_bytes(id, bytes, Clock::now());
          loop_.after_input();
        },
        [this, alive, id](std::error_code) {
          if (!*alive) return;
          streams_.erase(id);
          loop_.core().rank_closed(id, Clock::now());
          loop_.after_input();
        });
  }

  // A rank that does not read is cut off past kMaxQueuedToRank, as the
  // server drops a client that does not read (told from outside the core's call).
  void to_rank(LocalId rank, std::span<const uint8_t> bytes) override {
    auto it = streams_.find(rank);
    if (it == streams_.end()) return;
    it->second->write(bytes);
    const size_t queued = it->second->queued_bytes();
    if (queued <= kMaxQueuedToRank || !cut_off_.insert(rank).second) return;
    auto alive = alive_;
    std::weak_ptr<RankStream> stream = it->second;
    asio::post(acceptor_.get_executor(), [this, alive, rank, queued, stream] {
      if (!*alive) return;
      cut_off_.erase(rank);
      loop_.core().rank_cut_off(
          rank,
          "it does not read its replies: " + std::to_string(queued >> 20) +
              " MiB waited for it at cc-run's node agent, past its bound of " +
              std::to_string(kMaxQueuedToRank >> 20) + " MiB a rank",
          Clock::now());
      loop_.after_input();
      // What waits for it would never be read: closed now, not after it.
      if (auto s = stream.lock()) s->close_now();
    });
  }

  void close_rank(LocalId rank) override {
    auto it = streams_.find(rank);
    if (it == streams_.end()) return;
    it->second->close_after_writes();
    streams_.erase(it);
  }

  static constexpr size_t kMaxQueuedToRank = size_t{64} << 20;
  static constexpr std::chrono::milliseconds kAcceptBackoff{50};

  SocketFolder folder_;
  std::string path_;
  Local::acceptor acceptor_;
  asio::steady_timer accept_backoff_{acceptor_.get_executor()};
  std::unordered_set<LocalId> cut_off_;  // a cut-off is posted for them
  AgentLoop loop_;
  std::unordered_map<LocalId, std::shared_ptr<RankStream>> streams_;
  LocalId next_id_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

Status NodeAgent::start(asio::io_context& io, const NodeAgentOptions& options,
                        std::unique_ptr<NodeAgent>* out) {
  UpstreamTarget target;
  target.where = options.server_host + ":" + std::to_string(options.server_port);
  target.deadline = Clock::now() + options.connect_timeout;
  asio::ip::tcp::resolver resolver(io);
  std::error_code ec;
  std::string host = options.server_host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto results = resolver.resolve(host, std::to_string(options.server_port), ec);
  if (ec || results.empty())
    return make_status(CC_ERR_RENDEZVOUS,
                       "cc-run's node agent cannot resolve the rendezvous host '" + host +
                           "': " + (ec ? ec.message() : std::string("no address")) +
                           ". Check MASTER_ADDR and the name service (DNS, /etc/hosts)");
  for (const auto& r : results) target.endpoints.push_back(r.endpoint());
  target.tls = options.tls;
  target.host = host;
  target.locate = options.locate;
  SocketFolder folder;
  if (Status s = SocketFolder::make(&folder); !s.ok()) return s;
  auto agent = std::make_unique<UnixNodeAgent>(io, options, std::move(target), std::move(folder));
  if (Status s = agent->listen(); !s.ok()) return s;
  log().debug("node agent listening on {} for the rendezvous at {}:{}", agent->socket_path(),
              options.server_host, options.server_port);
  *out = std::move(agent);
  return Status::success();
}

}  // namespace cc::rv::agent
