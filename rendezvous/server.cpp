// The Asio side of the rendezvous server: accepting, reading, writing and the
// one timer. Every decision is ServerCore's; this file only moves bytes, and
// bounds what moving them holds: a connection the core forgot has the drain
// timeout to write its last replies, then is closed, read or not (and counts
// as open until then); replies queued for clients that do not read are bounded per
// connection and in all; a stop takes at most the drain timeout and a second; out of descriptors,
// a spare one accepts each waiting connection to refuse it as text.
#include "rendezvous/server.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <asio.hpp>

#include "common/log.hpp"
#include "common/run_until_stopped.hpp"
#include "rendezvous/server_core.hpp"
#include "rendezvous/tls/stream.hpp"
#include "rendezvous/tls/words.hpp"

namespace cc::rv {
namespace {

using asio::ip::tcp;

// Grows this process's descriptor table now to what the server may use (at
// most 64 Ki entries, 512 KiB): the kernel grows it by doubling as
// connections arrive, and in a process with more than one thread each
// doubling waits for an RCU grace period (milliseconds each), which would make
// the first thousand connections to a fresh server cost twice the later ones.
// Here, before the io thread starts, it is one step. The table never shrinks.
void reserve_descriptors(int fd, size_t max_connections) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const size_t want =
      std::min<size_t>({static_cast<size_t>(rl.rlim_cur), max_connections + 64, 65536});
  if (want < 2) return;
  // F_DUPFD takes the lowest free number >= its argument, so no open
  // descriptor is touched.
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(want - 1));
  if (high >= 0) ::close(high);
}

std::string endpoint_text(const tcp::endpoint& ep) {
  asio::ip::address a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  if (a.is_v6()) return "[" + a.to_string() + "]:" + std::to_string(ep.port());
  return a.to_string() + ":" + std::to_string(ep.port());
}

struct Session {
  Session(ConnId i, tcp::socket s) : id(i), sock(std::move(s)) {}
  ConnId id;
  tcp::socket sock;
  std::vector<uint8_t> pending;  // frames queued while a write is in flight
  std::vector<uint8_t> writing;  // the bytes of the write in flight
  size_t written = 0;            // of writing, already taken by the socket
  bool write_busy = false;
  bool dirty = false;    // in the server's flush list
  bool closing = false;  // the core forgot it: flush, then close
  bool closed = false;
  bool agent = false;       // a node agent's: its ranks are bounded by the core
  bool overflowed = false;  // queued past a bound: it does not read
  std::string overflow_reason;
  size_t counted = 0;  // of pending and writing, in the server's total of queued bytes
  std::optional<asio::steady_timer> linger;
  // With TLS (ServerOptions::tls): the connection's TLS, and its peer for messages.
  std::unique_ptr<tls::Stream> tls;
  std::string peer;
};
using SessionPtr = std::shared_ptr<Session>;

constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);
constexpr int kReadsPerWake = 16;
// A client that stops reading its replies is dropped once this much waits
// for it, or once the replies waiting for every client pass kMaxQueuedTotal.
// A node agent's connection is bounded by the total only: the core ends
// those of its ranks past kMaxQueued (relay.cpp).
constexpr size_t kMaxQueued = ServerCore::kMaxQueuedReplies;
constexpr size_t kMaxQueuedTotal = size_t{1} << 30;
// The most one write to a socket takes from a connection's replies.
constexpr size_t kWritePiece = size_t{256} << 10;
// How long stop() waits for the io thread, beyond the drain timeout, before
// stopping its loop outright.
constexpr auto kStopMargin = std::chrono::seconds(1);

class AsioServer final : public Server, private Sink {
 public:
  explicit AsioServer(const ServerOptions& o)
      : opt_(o), acceptor_(io_), timer_(io_), accept_backoff_(io_), core_(o, *this) {}

  ~AsioServer() override {
    stop();
    if (spare_fd_ >= 0) ::close(spare_fd_);
  }

  Status open() {
    std::error_code ec;
    asio::ip::address addr = asio::ip::make_address(opt_.bind_addr, ec);
    if (ec) {
      tcp::resolver resolver(io_);
      auto results =
          resolver.resolve(opt_.bind_addr, std::to_string(opt_.port), tcp::resolver::passive, ec);
      if (ec || results.empty())
        return make_status(CC_ERR_SYSTEM,
                           "cannot resolve the bind address '" + opt_.bind_addr +
                               "': " + (ec ? ec.message() : "no address") +
                               "; give an IP address or a host name of this machine");
      addr = results.begin()->endpoint().address();
    }
    const tcp::endpoint ep(addr, static_cast<unsigned short>(opt_.port));
    const std::string where = (addr.is_v6() ? "[" + opt_.bind_addr + "]" : opt_.bind_addr) + ":" +
                              std::to_string(opt_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec && addr.is_v6() && addr.is_unspecified())
      acceptor_.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(65535, ec);
    if (!ec) {
      // Linux gives accepted connections the listener's TCP_NODELAY: one
      // system call less per connection (elsewhere on_accepted sets it).
      std::error_code nodelay_ec;
      acceptor_.set_option(tcp::no_delay(true), nodelay_ec);
    }
    if (ec == asio::error::address_in_use)
      return make_status(CC_ERR_SYSTEM,
                         "cannot listen on " + where +
                             ": address already in use; another cc-rendezvous or program "
                             "holds the port: stop it or choose another port (--port / "
                             "MASTER_PORT)");
    if (ec)
      return make_status(CC_ERR_SYSTEM, "cannot listen on " + where + ": " + ec.message() +
                                            (ec == std::errc::address_not_available
                                                 ? "; the address is not one of this machine's"
                                                 : ""));
    port_ = acceptor_.local_endpoint().port();
    const std::string shown =
        endpoint_text(tcp::endpoint(addr, static_cast<unsigned short>(port_)));
    if (opt_.token.empty() && opt_.job_tokens.empty())
      log().warn(
          "rendezvous server on {} has no token: anyone who can reach the port can join any job "
          "(set a token with --token-file or CC_RENDEZVOUS_TOKEN)",
          shown);
    log().info("listening on {}{}", shown,
               addr.to_string() == opt_.bind_addr ? "" : " (" + opt_.bind_addr + ")");
    if (opt_.durable) {
      if (Status st = restore(); !st.ok()) return st;
    }
    reserve_descriptors(acceptor_.native_handle(), opt_.max_connections);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    accept();
    if (opt_.successor) {  // its grace period for resumes starts now
      asio::post(io_, [this] {
        core_.expire(Clock::now());
        flush();
      });
    }
    thread_ = std::thread([this] { run(); });
    return Status::success();
  }

  int port() const override { return port_; }

  // What the durable store kept, into the core before the first connection.
  Status restore() {
    size_t keys = 0, sessions = 0;
    Status st = opt_.durable->load(
        [&](const DurableWrite& w) {
          core_.restore(w);
          ++keys;
        },
        [&](const DurableSession& s) {
          core_.restore(s);
          ++sessions;
        });
    if (!st.ok())
      return make_status(st.code, "cannot read the store back from " + opt_.durable->where() +
                                      ": " + st.message);
    core_.restored(Clock::now());
    log().info("rendezvous server: {} key(s) and {} session(s) read back from {}", keys, sessions,
               opt_.durable->where());
    return Status::success();
  }

  void abandon() override {
    asio::post(io_, [this] { drop_everything(); });
  }

  // No longer the leader: every connection is closed unanswered, so clients
  // go to the next leader, and nothing more is read or written.
  void drop_everything() {
    if (stopping_) return;
    stopping_ = true;
    log().warn("rendezvous server on port {} no longer leads: every connection is closed "
               "unanswered, so its clients reconnect to the next leader",
               port_);
    std::error_code ec;
    acceptor_.close(ec);
    accept_backoff_.cancel();
    timer_.cancel();
    armed_.reset();
    for (auto& [id, session] : sessions_) {
      session->closed = true;
      session->sock.close(ec);
    }
    sessions_.clear();
    for (auto& [job, done] : idle_waiters_) done->set_value(true);
    idle_waiters_.clear();
    io_.stop();
  }

  bool still_leading() {
    if (!opt_.still_leading || opt_.still_leading()) return true;
    drop_everything();
    return false;
  }

  void stop() override { stop(StopMode::fail); }

  void stop(StopMode mode) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_requested_) {
        cv_.wait(lock, [this] { return stopped_; });
        return;
      }
      stop_requested_ = true;
    }
    if (thread_.joinable()) {
      asio::post(io_, [this, mode] { shutdown(mode); });
      {
        std::unique_lock<std::mutex> lock(mu_);
        const auto bound = opt_.drain_timeout + kStopMargin;
        if (!cv_.wait_for(lock, bound, [this] { return io_done_; })) {
          log().warn(
              "rendezvous server on port {}: the io thread did not end within {} ms of the stop; "
              "stopping its loop",
              port_, std::chrono::duration_cast<std::chrono::milliseconds>(bound).count());
          io_.stop();
        }
      }
      thread_.join();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopped_; });
  }

  std::optional<ServerMetrics> metrics(std::chrono::milliseconds timeout) override {
    return on_io_thread<ServerMetrics>(timeout, [this] {
      ServerMetrics m = core_.metrics(Clock::now());
      m.connections_open = sessions_.size();  // with those still draining their last replies
      return m;
    });
  }

  bool set_tokens(const Tokens& tokens, std::chrono::milliseconds timeout) override {
    return on_io_thread<bool>(timeout, [this, tokens] {
             core_.set_tokens(tokens);
             return true;
           }).value_or(false);
  }

  bool wait_job_idle(const std::string& job_id, std::chrono::milliseconds timeout) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_requested_) return true;
    }
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    asio::post(io_, [this, job_id, done] {
      if (stopping_ || !core_.job_busy(job_id))
        done->set_value(true);
      else
        idle_waiters_.emplace(job_id, done);
    });
    if (result.wait_for(timeout) != std::future_status::ready) return false;
    return result.get();
  }

 private:
  // Runs fn on the io thread (the core's only thread) and returns what it
  // returned; nullopt when the server has stopped or fn did not run within
  // timeout. An fn that has not started by the timeout never runs, so a
  // caller told nullopt knows that nothing was done.
  template <typename T, typename Fn>
  std::optional<T> on_io_thread(std::chrono::milliseconds timeout, Fn fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_requested_) return std::nullopt;
    }
    struct Call {
      std::mutex mu;
      std::condition_variable cv;
      bool abandoned = false;  // the caller gave up: fn must not run
      bool dropped = false;    // the handler is gone, run or not
      std::optional<std::optional<T>> result;
    };
    // Wakes the caller when the handler is destroyed, also unrun (the
    // io_context went with it), so it need not wait out its timeout.
    struct Wake {
      std::shared_ptr<Call> call;
      explicit Wake(std::shared_ptr<Call> c) : call(std::move(c)) {}
      Wake(Wake&&) noexcept = default;
      Wake& operator=(Wake&&) = delete;
      ~Wake() {
        if (!call) return;
        std::lock_guard<std::mutex> lock(call->mu);
        call->dropped = true;
        call->cv.notify_all();
      }
    };
    auto call = std::make_shared<Call>();
    asio::post(io_, [this, wake = Wake(call), fn = std::move(fn)]() mutable {
      Call& c = *wake.call;
      std::lock_guard<std::mutex> lock(c.mu);
      if (c.abandoned) return;
      c.result = stopping_ ? std::nullopt : std::optional<T>(fn());
      c.cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(call->mu);
    if (!call->cv.wait_for(lock, timeout,
                           [&call] { return call->result.has_value() || call->dropped; }) ||
        !call->result) {
      call->abandoned = true;
      return std::nullopt;
    }
    return *call->result;
  }

  void run() {
    run_until_stopped(io_, "rendezvous server");
    {
      std::lock_guard<std::mutex> lock(mu_);
      io_done_ = true;
    }
    cv_.notify_all();
  }

  // ---- Sink ----------------------------------------------------------------

  void send(ConnId conn, uint32_t request_id, const Message& message) override {
    queue(conn, [&](std::vector<uint8_t>& out) { append_frame(out, request_id, message); });
  }

  void send_value(ConnId conn, uint32_t request_id, std::span<const uint8_t> value) override {
    queue(conn, [&](std::vector<uint8_t>& out) { append_value_frame(out, request_id, value); });
  }

  void close(ConnId conn, const std::string&) override {
    auto it = sessions_.find(conn);
    if (it == sessions_.end()) return;
    it->second->closing = true;
    // A write in flight may never end if the client does not read.
    if (it->second->write_busy) start_linger(it->second);
    mark_dirty(it->second);
  }

  void carries_ranks(ConnId conn) override {
    if (auto it = sessions_.find(conn); it != sessions_.end()) it->second->agent = true;
  }

  void job_idle(const std::string& job_id) override {
    auto [b, e] = idle_waiters_.equal_range(job_id);
    for (auto it = b; it != e; ++it) it->second->set_value(true);
    idle_waiters_.erase(b, e);
  }

  // ---- output ----------------------------------------------------------------

  // Appends one frame (written by `append`) to the connection's replies, and
  // overflows a connection past its bound, or past the server's in all.
  template <typename Append>
  void queue(ConnId conn, Append append) {
    auto it = sessions_.find(conn);
    if (it == sessions_.end()) return;
    Session& s = *it->second;
    if (s.closed || s.overflowed) return;  // an overflowed one is dropped at the next flush
    const size_t before = s.pending.size();
    append(s.pending);
    core_.counters().bytes_out += s.pending.size() - before;
    recount(s);
    mark_dirty(it->second);
    const size_t queued = s.pending.size() + s.writing.size();
    if (queued > kMaxQueued && !s.agent) {
      overflow(it->second,
               "it does not read its replies (" + std::to_string(queued >> 20) + " MiB queued)");
    } else if (queued_total_ > kMaxQueuedTotal) {
      overflow(it->second,
               "the replies waiting for clients that do not read passed the server's "
               "bound of " +
                   std::to_string(kMaxQueuedTotal >> 20) + " MiB in all (" +
                   std::to_string(queued >> 20) + " MiB of them for this one)");
    }
  }

  // Keeps queued_total_ in step with what s holds.
  void recount(Session& s) {
    const size_t now_held = s.pending.size() + s.writing.size();
    queued_total_ = queued_total_ - s.counted + now_held;
    s.counted = now_held;
  }

  void overflow(const SessionPtr& s, std::string reason) {
    s->overflowed = true;
    s->overflow_reason = std::move(reason);
    core_.counters().limit(LimitKind::write_queue);
    overflowed_.push_back(s);
  }

  void mark_dirty(const SessionPtr& s) {
    if (s->dirty) return;
    s->dirty = true;
    dirty_.push_back(s);
  }

  // Writes what the core queued; called after every call into the core.
  void flush() {
    while (!overflowed_.empty()) {
      // Told to the core here, not inside send(): a Sink must not re-enter it.
      std::vector<SessionPtr> list;
      list.swap(overflowed_);
      for (auto& s : list) {
        if (s->closing || s->closed) continue;
        s->pending.clear();
        recount(*s);
        core_.on_disconnect(s->id, s->overflow_reason, Clock::now());
        finish_close(s);
      }
    }
    while (!dirty_.empty()) {
      std::vector<SessionPtr> list;
      list.swap(dirty_);
      for (auto& s : list) {
        s->dirty = false;
        start_write(s);
      }
    }
    arm_timer();
  }

  void start_write(const SessionPtr& s) {
    if (s->closed || s->write_busy) return;
    if (handshaking(s)) {  // replies wait for the TLS handshake
      if (s->closing && s->pending.empty()) finish_close(s);
      else if (s->closing) start_linger(s);
      return;
    }
    if (s->written == s->writing.size()) {  // nothing in flight: take what is queued
      s->writing.clear();
      if (s->writing.capacity() > (1u << 20)) s->writing.shrink_to_fit();
      s->written = 0;
      if (s->pending.empty()) {
        recount(*s);
        if (s->closing) finish_close(s);
        return;
      }
      s->writing.swap(s->pending);
      s->pending.clear();
    }
    // One piece per turn of the io thread: a client that asked for 60 MiB
    // of replies cannot make one handler copy tens of MiB into the kernel's
    // socket buffers while the other connections wait. Most replies are
    // written here at once, whole.
    std::error_code ec;
    const size_t piece = std::min(s->writing.size() - s->written, kWritePiece);
    const size_t n = write_some(*s, piece, ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      socket_failed(s, ec);
      return;
    }
    if (!ec) {
      s->written += n;
      if (s->agent) core_.on_written(s->id, n);
    }
    if (s->written == s->writing.size() && s->pending.empty()) {
      s->writing.clear();
      s->written = 0;
      recount(*s);
      if (s->closing) finish_close(s);
      return;
    }
    s->write_busy = true;
    if (s->closing) start_linger(s);
    s->sock.async_wait(tcp::socket::wait_write, [this, s](std::error_code wec) {
      s->write_busy = false;
      if (wec) {
        socket_failed(s, wec);
      } else {
        start_write(s);
      }
      flush();
    });
  }

  void start_linger(const SessionPtr& s) {
    if (s->linger) return;
    s->linger.emplace(io_, opt_.drain_timeout);
    s->linger->async_wait([this, s](std::error_code ec) {
      if (!ec) finish_close(s);
    });
  }

  // peer_gone: the socket already failed (reset, end of stream), so there is
  // nothing to shut down.
  void finish_close(const SessionPtr& s, bool peer_gone = false) {
    if (s->closed) return;
    s->closed = true;
    std::error_code ec;
    if (s->tls && !peer_gone) s->tls->close_notify();
    if (!peer_gone) s->sock.shutdown(tcp::socket::shutdown_both, ec);
    s->sock.close(ec);
    if (s->linger) s->linger->cancel();
    s->pending.clear();
    s->pending.shrink_to_fit();
    recount(*s);  // a write in flight gives its buffer back when it ends (the close ends it)
    sessions_.erase(s->id);
  }

  void socket_failed(const SessionPtr& s, std::error_code ec) {
    if (s->closing) {
      finish_close(s, true);
      return;
    }
    core_.on_disconnect(s->id, ec == asio::error::eof ? ServerCore::kClientClosed : ec.message(),
                        Clock::now());
    finish_close(s, true);
  }

  // ---- input -----------------------------------------------------------------

  void start_read(const SessionPtr& s) {
    s->sock.async_wait(tcp::socket::wait_read,
                       [this, s](std::error_code ec) { on_readable(s, ec); });
  }

  void on_readable(const SessionPtr& s, std::error_code ec) {
    if ((s->closing && !handshaking(s)) || s->closed || !still_leading()) return;
    if (ec) {
      socket_failed(s, ec);
      flush();
      return;
    }
    if (s->tls) {
      read_tls(s);
      flush();
      return;
    }
    for (int i = 0; i < kReadsPerWake && !s->closing; ++i) {
      const size_t n = s->sock.read_some(asio::buffer(rbuf_), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) break;
      if (ec) {
        socket_failed(s, ec);
        flush();
        return;
      }
      core_.on_bytes(s->id, std::span<const uint8_t>(rbuf_.data(), n), Clock::now());
      if (n < rbuf_.size()) break;
    }
    if (!s->closing && !s->closed) start_read(s);
    flush();
  }

  void accept() {
    // The peer's address comes with accept: no getpeername per connection.
    acceptor_.async_accept(peer_, [this](std::error_code ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted || stopping_) return;
      const bool out_of_descriptors =
          ec == asio::error::no_descriptors ||
          (ec.category() == asio::error::get_system_category() && ec.value() == ENFILE);
      if (out_of_descriptors && refuse_for_descriptors()) {
        accept();
        return;
      }
      if (ec) {
        // EMFILE without a spare descriptor, and other failures: the loop
        // must survive; back off a little and say so at most every few
        // seconds.
        ++accept_failures_;
        const auto now = Clock::now();
        if (now - accept_failure_logged_ > std::chrono::seconds(5)) {
          log().warn(
              "rendezvous server: accept failed {} time(s): {}; retrying (raise the fd limit with "
              "ulimit -n if this says 'too many open files')",
              accept_failures_, ec.message());
          accept_failure_logged_ = now;
          accept_failures_ = 0;
        }
        accept_backoff_.expires_after(kAcceptBackoff);
        accept_backoff_.async_wait([this](std::error_code wec) {
          if (!wec && !stopping_) accept();
        });
        return;
      }
      on_accepted(std::move(sock));
      accept();
    });
  }

  // Out of descriptors: the spare one makes room to accept the connection
  // that waits, tell it why as text and close it, so its client fails at
  // once instead of waiting out its deadline. False when there is no spare.
  bool refuse_for_descriptors() {
    if (spare_fd_ < 0) return false;
    ::close(spare_fd_);
    spare_fd_ = -1;
    tcp::endpoint peer;
    socklen_t len = static_cast<socklen_t>(peer.capacity());
    const int fd =
        ::accept4(acceptor_.native_handle(), peer.data(), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    const std::string why =
        "the rendezvous server is out of file descriptors (too many open files) and refuses new "
        "connections until some close; raise its limit (ulimit -n, LimitNOFILE= in its systemd "
        "unit) or lower --max-connections";
    if (fd >= 0) {
      peer.resize(len);
      const std::vector<uint8_t> frame =
          encode_frame(0, Error{static_cast<uint32_t>(CC_ERR_RENDEZVOUS), why});
      [[maybe_unused]] const ssize_t sent =
          ::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
      // What the client sent is read first, so the close does not reset the
      // connection before the client has read the message.
      uint8_t scratch[4096];
      while (::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0) {
      }
      ::close(fd);
      core_.counters().limit(LimitKind::descriptors);
      ++descriptor_refusals_;
      const auto now = Clock::now();
      if (now - descriptor_refusal_logged_ > std::chrono::seconds(5)) {
        log().warn("refusing {} ({} refused since the last such line): {}",
                   endpoint_text(peer), descriptor_refusals_, why);
        descriptor_refusal_logged_ = now;
        descriptor_refusals_ = 0;
      }
    }
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0 && spare_fd_ >= 0;
  }

  void on_accepted(tcp::socket sock) {
    std::error_code ec;
#ifndef __linux__
    sock.set_option(tcp::no_delay(true), ec);
#endif
    sock.non_blocking(true, ec);
    const std::string peer = peer_.port() == 0 ? std::string("unknown peer") : endpoint_text(peer_);
    const ConnId id = next_id_++;
    auto s = std::make_shared<Session>(id, std::move(sock));
    if (opt_.tls && !start_tls(*s, peer)) return;
    const size_t closing = sessions_.size() - core_.connection_count();
    sessions_.emplace(id, s);
    // A TLS connection the core refused is read for its handshake, so the
    // refusal reaches its client.
    if (core_.on_connect(id, peer, Clock::now(), closing) || s->tls) start_read(s);
    flush();
  }

  // ---- TLS ---------------------------------------------------------------------

  static bool handshaking(const SessionPtr& s) { return s->tls && !s->tls->established(); }

  bool start_tls(Session& s, const std::string& peer) {
    ssl_st* ssl = opt_.tls->accept_on(s.sock.native_handle());
    if (ssl == nullptr) {
      log().warn("rendezvous server: no TLS session for {} (out of memory?); closed", peer);
      return false;
    }
    s.tls = std::make_unique<tls::Stream>(ssl);
    s.peer = peer;
    return true;
  }

  size_t write_some(Session& s, size_t piece, std::error_code& ec) {
    const uint8_t* data = s.writing.data() + s.written;
    if (!s.tls) return s.sock.write_some(asio::buffer(data, piece), ec);
    const tls::Result r = s.tls->write({data, piece});
    if (r.io == tls::Io::want_read || r.io == tls::Io::want_write) ec = asio::error::would_block;
    if (r.io == tls::Io::closed) ec = asio::error::eof;
    if (r.io == tls::Io::failed) ec = asio::error::connection_aborted;
    return r.n;
  }

  // The handshake, then reads until OpenSSL wants the socket again (it may
  // hold decrypted bytes the socket no longer signals); past kReadsPerWake
  // the rest waits for the others' turn.
  void read_tls(const SessionPtr& s) {
    if (handshaking(s)) {
      const tls::Result r = s->tls->handshake();
      if (r.io != tls::Io::done) return tls_wait_or_end(s, r);
      start_write(s);  // what the core queued meanwhile
      if (s->closing || s->closed) return;
    }
    for (int i = 0; i < kReadsPerWake; ++i) {
      if (s->closing || s->closed) return;
      const tls::Result r = s->tls->read(rbuf_);
      if (r.io != tls::Io::done) return tls_wait_or_end(s, r);
      core_.on_bytes(s->id, std::span<const uint8_t>(rbuf_.data(), r.n), Clock::now());
    }
    asio::post(io_, [this, s] { on_readable(s, {}); });
  }

  void tls_wait_or_end(const SessionPtr& s, tls::Result r) {
    switch (r.io) {
      case tls::Io::want_read:
        return start_read(s);
      case tls::Io::want_write:
        return s->sock.async_wait(tcp::socket::wait_write,
                                  [this, s](std::error_code ec) { on_readable(s, ec); });
      case tls::Io::closed:
        return socket_failed(s, asio::error::eof);
      case tls::Io::done:
      case tls::Io::failed:
        break;
    }
    const tls::Failure& f = s->tls->failure();
    if (f.kind == tls::FailureKind::clear_peer) refuse_clear(*s);
    shut_after_reading(s->sock.native_handle());  // so the alert is not lost to a reset
    const std::string why = tls::server_failure_words(f, s->peer);
    log().info("rendezvous server: {}", why);
    if (!s->closing) core_.on_disconnect(s->id, why, Clock::now());
    finish_close(s, true);
  }

  // A client that speaks in clear to this TLS server is told so in clear, as
  // refuse_for_descriptors tells its client.
  void refuse_clear(Session& s) {
    const int fd = s.sock.native_handle();
    std::error_code ec;
    const tcp::endpoint here = s.sock.local_endpoint(ec);
    const std::vector<uint8_t> frame =
        tls::clear_client_refusal_frame(ec ? "this address" : endpoint_text(here));
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  // What the client sent is read before the close, so the close does not
  // reset the connection before the client has read the last message.
  static void shut_after_reading(int fd) {
    ::shutdown(fd, SHUT_WR);
    uint8_t scratch[4096];
    while (::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0) {
    }
  }

  // ---- the one timer -----------------------------------------------------------

  void arm_timer() {
    const auto next = core_.next_deadline();
    if (!next || stopping_) return;
    if (armed_ && *armed_ <= *next) return;
    armed_ = *next;
    timer_.expires_at(*next);
    timer_.async_wait([this](std::error_code ec) {
      if (ec) return;  // re-armed or stopping
      armed_.reset();
      core_.expire(Clock::now());
      flush();
    });
  }

  void shutdown(StopMode mode) {
    stopping_ = true;
    std::error_code ec;
    acceptor_.close(ec);
    accept_backoff_.cancel();
    core_.stop(mode);
    flush();
    timer_.cancel();
    armed_.reset();
    for (auto& [job, done] : idle_waiters_) done->set_value(true);
    idle_waiters_.clear();
    log().info("rendezvous server on port {} stopped", port_);
  }

  ServerOptions opt_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer timer_;
  asio::steady_timer accept_backoff_;
  tcp::endpoint peer_;  // filled by each accept
  std::optional<Clock::time_point> armed_;
  ServerCore core_;
  std::unordered_map<ConnId, SessionPtr> sessions_;
  std::vector<SessionPtr> dirty_;
  std::vector<SessionPtr> overflowed_;
  std::multimap<std::string, std::shared_ptr<std::promise<bool>>> idle_waiters_;
  std::array<uint8_t, 64 * 1024> rbuf_{};  // one thread reads, so one buffer serves all
  ConnId next_id_ = 1;
  int port_ = 0;
  uint64_t accept_failures_ = 0;
  Clock::time_point accept_failure_logged_{};
  int spare_fd_ = -1;  // closed to make room for a refusal when out of descriptors
  uint64_t descriptor_refusals_ = 0;
  Clock::time_point descriptor_refusal_logged_{};
  size_t queued_total_ = 0;  // replies queued over every session
  bool stopping_ = false;    // io thread only
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool stopped_ = false;
  bool io_done_ = false;  // the io thread's loop returned
};

}  // namespace

Status Server::start(const ServerOptions& options, std::unique_ptr<Server>* out) {
  try {
    auto server = std::make_unique<AsioServer>(options);
    Status st = server->open();
    if (!st.ok()) return st;
    *out = std::move(server);
    return Status::success();
  } catch (const std::exception& e) {
    return make_status(CC_ERR_SYSTEM,
                       std::string("cannot start the rendezvous server: ") + e.what());
  }
}

}  // namespace cc::rv
