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
    core_.upstream_lost("no address to reach the rendezvous at " + target_.where, Clock::now());
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
      core_.upstream_lost("cannot reach the rendezvous at " + target_.where + " after " +
                              std::to_string(attempts_) + " attempts: " + last_error_ +
                              ". Is node 0's cc-run (or cc-rendezvous) running there? Check "
                              "MASTER_ADDR/MASTER_PORT and firewalls",
                          Clock::now());
      return;
    }
    retry_timer_.expires_after(pause);
    retry_timer_.async_wait([this, alive](std::error_code e) {
      if (!e && *alive) connect_next();
    });
  });
}

void AgentLoop::connected() {
  std::error_code ec;
  connecting_.set_option(asio::ip::tcp::no_delay(true), ec);
  connecting_.set_option(asio::socket_base::keep_alive(true), ec);
  std::unique_ptr<tls::Stream> secured;
  if (target_.tls) {
    ssl_st* ssl = target_.tls->connect_on(connecting_.native_handle(), target_.host);
    if (ssl == nullptr) {
      core_.upstream_lost("cannot start TLS toward the rendezvous at " + target_.where + ": " +
                              tls::openssl_errors(),
                          Clock::now());
      return;
    }
    secured = std::make_unique<tls::Stream>(ssl);
  }
  upstream_ = std::make_shared<Stream<tls::AsioStream>>(
      tls::AsioStream(std::move(connecting_), std::move(secured)), target_.read_size);
  connecting_ = asio::ip::tcp::socket(io_);
  auto alive = alive_;
  upstream_->start(
      [this, alive](std::span<const uint8_t> bytes) {
        if (!*alive) return;
        core_.upstream_bytes(bytes, Clock::now());
        arm_timer();
      },
      [this, alive](std::error_code e) {
        if (!*alive) return;
        if (const tls::Failure* f = upstream_ ? upstream_->socket().failure() : nullptr) {
          core_.upstream_lost("cc-run's node agent: " +
                                  tls::client_failure_words(*f, target_.where,
                                                            target_.tls->expected_name(target_.host),
                                                            target_.tls->files()),
                              Clock::now());
          return;
        }
        core_.upstream_lost("the connection to the rendezvous at " + target_.where + " ended (" +
                                (e == asio::error::eof ? std::string("closed by the server")
                                                       : lower(e.message())) +
                                ")",
                            Clock::now());
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
    arm_timer();
  });
}

void AgentLoop::to_upstream(std::vector<uint8_t> bytes) {
  if (upstream_) upstream_->write(bytes);
}

// Posted: the core may give the server up from inside the stream's own read.
void AgentLoop::close_upstream() {
  auto alive = alive_;
  asio::post(io_, [this, alive] {
    if (*alive && upstream_) upstream_->close_now();
  });
}

void AgentLoop::to_rank(LocalId rank, std::span<const uint8_t> bytes) {
  ranks_.to_rank(rank, bytes);
}

void AgentLoop::close_rank(LocalId rank) { ranks_.close_rank(rank); }

}  // namespace cc::rv::agent
