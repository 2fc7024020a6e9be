#include "rendezvous/agent/agent_loop.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>

#include <asio/post.hpp>

#include "rendezvous/connect_by.hpp"
#include "rendezvous/tls/words.hpp"

namespace cc::rv::agent {

namespace {

using std::chrono::milliseconds;
constexpr milliseconds kAttemptCap{5000};  // one connect attempt to one address
// While following the election: one question to the locator, and how long
// the server it names is dialled before the locator is asked again (a
// server that is gone refuses at once; a lost host does not).
constexpr milliseconds kLocateSlice{1000};
constexpr milliseconds kDialEach{1000};
constexpr milliseconds kLocateAgain{200};  // after the locator named none

std::string host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

AgentLoop::AgentLoop(asio::io_context& io, AgentOptions options, RankSide& ranks,
                     UpstreamTarget target)
    : io_(io),
      ranks_(ranks),
      target_(std::move(target)),
      core_(std::move(options), *this),
      connecting_(io),
      retry_timer_(io),
      timer_(io) {}

AgentLoop::~AgentLoop() {
  *alive_ = false;
  stop();
  if (locator_.joinable()) locator_.join();  // within kLocateSlice and a resolve
}

void AgentLoop::start() { connect_next(); }

void AgentLoop::stop() {
  if (stopped_) return;
  stopped_ = true;
  std::error_code ec;
  connecting_.close(ec);
  retry_timer_.cancel();
  timer_.cancel();
  if (upstream_) upstream_->close_now();
}

void AgentLoop::freeze() {
  if (stopped_) return;
  stopped_ = true;
  retry_timer_.cancel();
  timer_.cancel();
  if (upstream_) upstream_->mute();
}

void AgentLoop::connect_next() {
  if (stopped_) return;
  if (target_.endpoints.empty()) {
    lost("no address to reach the rendezvous at " + target_.where);
    return;
  }
  const auto& endpoint = target_.endpoints[next_endpoint_ % target_.endpoints.size()];
  ++next_endpoint_;
  ++attempts_;
  std::error_code ec;
  connecting_.close(ec);
  connecting_.open(endpoint.protocol(), ec);
  if (target_.source) {
    // The port is still chosen at connect, as without a bind: a port bound
    // here would stay reserved through TIME_WAIT and refuse a later listen
    // on it, one on 0.0.0.0 included.
    const int on = 1;
    ::setsockopt(connecting_.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
    connecting_.bind(asio::ip::tcp::endpoint(*target_.source, 0), ec);
  }
  const auto until = std::min(target_.deadline, Clock::now() + kAttemptCap);
  auto alive = alive_;
  async_connect_by(connecting_, endpoint, until, [this, alive](std::error_code result) {
    if (!*alive || stopped_) return;
    if (!result) return connected();
    last_error_ = result == asio::error::timed_out ? "no answer (connection timed out)"
                                                   : lower(result.message());
    const auto pause = backoff_.next(target_.deadline);
    if (Clock::now() >= target_.deadline) {
      lost("cannot reach the rendezvous at " + target_.where + " after " +
           std::to_string(attempts_) + " attempts: " + last_error_ +
           (core_.following() ? std::string()
                              : ". Is node 0's cc-run (or cc-rendezvous) running there? Check "
                                "MASTER_ADDR/MASTER_PORT and firewalls"));
      return;
    }
    retry_timer_.expires_after(pause);
    retry_timer_.async_wait([this, alive](std::error_code e) {
      if (!e && *alive) connect_next();
    });
  });
}

void AgentLoop::lost(const std::string& why) {
  seeking_ = false;
  core_.upstream_lost(why, Clock::now());
  follow();
  arm_timer();
}

void AgentLoop::follow() {
  if (stopped_ || seeking_ || !target_.locate || !core_.following()) return;
  seeking_ = true;
  if (locator_.joinable()) locator_.join();  // it ended: it posted its answer
  auto alive = alive_;
  locator_ = std::thread([this, alive, locate = target_.locate] {
    std::string host;
    int port = 0;
    Status s = locate(Clock::now() + kLocateSlice, &host, &port);
    std::vector<asio::ip::tcp::endpoint> endpoints;
    if (s.ok()) {
      asio::io_context resolving;
      asio::ip::tcp::resolver resolver(resolving);
      std::error_code ec;
      const auto results = resolver.resolve(host, std::to_string(port), ec);
      for (const auto& r : results) endpoints.push_back(r.endpoint());
      if (endpoints.empty())
        s = make_status(CC_ERR_RENDEZVOUS, "cannot resolve '" + host + "', which the election " +
                                               "names: " + (ec ? ec.message() : "no address"));
    }
    asio::post(io_, [this, alive, s, host, port, endpoints = std::move(endpoints)]() mutable {
      if (*alive) located(s, host, port, std::move(endpoints));
    });
  });
}

void AgentLoop::located(Status s, const std::string& host, int port,
                        std::vector<asio::ip::tcp::endpoint> endpoints) {
  if (stopped_ || !core_.following()) {
    seeking_ = false;
    return;
  }
  if (!s.ok()) {
    last_error_ = s.message;
    auto alive = alive_;
    retry_timer_.expires_after(kLocateAgain);
    retry_timer_.async_wait([this, alive](std::error_code e) {
      if (e || !*alive) return;
      seeking_ = false;
      follow();
    });
    return;
  }
  target_.endpoints = std::move(endpoints);
  target_.where = host_port(host, port);
  target_.host = host;
  target_.deadline = Clock::now() + kDialEach;
  next_endpoint_ = 0;
  attempts_ = 0;
  backoff_ = Backoff();
  core_.upstream_moved(target_.where);
  connect_next();
}

void AgentLoop::connected() {
  if (!core_.upstream_failure().empty()) {  // the core gave the server up meanwhile
    std::error_code ec;
    connecting_.close(ec);
    return;
  }
  std::error_code ec;
  connecting_.set_option(asio::ip::tcp::no_delay(true), ec);
  connecting_.set_option(asio::socket_base::keep_alive(true), ec);
  std::unique_ptr<tls::Stream> secured;
  if (target_.tls) {
    ssl_st* ssl = target_.tls->connect_on(connecting_.native_handle(), target_.host);
    if (ssl == nullptr) {
      lost("cannot start TLS toward the rendezvous at " + target_.where + ": " +
           tls::openssl_errors());
      return;
    }
    secured = std::make_unique<tls::Stream>(ssl);
  }
  upstream_ = std::make_shared<Stream<tls::AsioStream>>(
      tls::AsioStream(std::move(connecting_), std::move(secured)), target_.read_size);
  connecting_ = asio::ip::tcp::socket(io_);
  auto alive = alive_;
  const uint64_t link = ++link_;
  upstream_->start(
      [this, alive, link](std::span<const uint8_t> bytes) {
        if (!*alive || link != link_) return;
        core_.upstream_bytes(bytes, Clock::now());
        // Ready: the seeking is over; dropped by the core meanwhile (an
        // unreadable frame, a refusal): this attempt is over.
        if (core_.upstream_ready() || link != link_) seeking_ = false;
        follow();
        arm_timer();
      },
      [this, alive, link](std::error_code e) {
        if (!*alive || link != link_) return;
        if (const tls::Failure* f = upstream_ ? upstream_->socket().failure() : nullptr) {
          lost("cc-run's node agent: " +
               tls::client_failure_words(*f, target_.where,
                                         target_.tls->expected_name(target_.host),
                                         target_.tls->files()));
          return;
        }
        lost("the connection to the rendezvous at " + target_.where + " ended (" +
             (e == asio::error::eof ? std::string("closed by the server") : lower(e.message())) +
             ")");
      });
  core_.upstream_connected(Clock::now());
  arm_timer();
}

void AgentLoop::after_input() {
  arm_timer();
  if (flush_posted_) return;
  flush_posted_ = true;
  auto alive = alive_;
  asio::post(io_, [this, alive] {
    if (!*alive) return;
    flush_posted_ = false;
    core_.flush();
  });
}

void AgentLoop::arm_timer() {
  if (stopped_) return;
  const Clock::time_point at = core_.next_deadline();
  if (at == armed_for_) return;
  armed_for_ = at;
  if (at == Clock::time_point::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(at);
  auto alive = alive_;
  timer_.async_wait([this, alive](std::error_code ec) {
    if (ec || !*alive) return;
    armed_for_ = Clock::time_point::max();
    core_.tick(Clock::now());
    follow();
    arm_timer();
  });
}

void AgentLoop::to_upstream(std::vector<uint8_t> bytes) {
  if (upstream_) upstream_->write(bytes);
}

// Posted: the core may give the server up from inside the stream's own read.
// What that connection still reports is not the core's any more.
void AgentLoop::close_upstream() {
  ++link_;
  auto alive = alive_;
  asio::post(io_, [alive, stream = upstream_] {
    if (*alive && stream) stream->close_now();
  });
}

void AgentLoop::to_rank(LocalId rank, std::span<const uint8_t> bytes) {
  ranks_.to_rank(rank, bytes);
}

void AgentLoop::close_rank(LocalId rank) { ranks_.close_rank(rank); }

}  // namespace cc::rv::agent
