// The metrics endpoint on Boost.Beast: one io_context thread, an accept
// loop, and a Session per connection that reads one request under a
// deadline, answers it and closes. Beast parses the request (header at most
// kMaxHeader bytes, no body allowed); this file only decides the answer.
#include "tools/cc-rendezvous/metrics_http.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

// Boost 1.74's boost/asio.hpp pulls in awaitable.hpp, which misses an include
// under C++20; the parts used here are included one by one.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "common/log.hpp"
#include "common/run_until_stopped.hpp"

namespace cc::daemon {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

constexpr auto kDeadline = std::chrono::seconds(5);  // to read a request, and to write the answer
constexpr size_t kMaxHeader = 8 * 1024;

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(ep.port());
}

// What the server and its sessions share; a session may outlive the server
// object by a little (its handlers are destroyed with the io_context).
struct Shared {
  explicit Shared(MetricsServer::Render r) : render(std::move(r)) {}
  void count(bool ok) { (ok ? served : refused).fetch_add(1, std::memory_order_relaxed); }

  MetricsServer::Render render;
  int open = 0;  // sessions alive; io thread only
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> refused{0};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)), buffer_(kMaxHeader) {
    ++shared_->open;
    parser_.header_limit(kMaxHeader);
    parser_.body_limit(0);
  }
  ~Session() { --shared_->open; }

  void start() {
    stream_.expires_after(kDeadline);
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec);
  void answer(http::status status, std::string body, bool metrics);

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> shared_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
};

class BeastMetricsServer final : public MetricsServer {
 public:
  explicit BeastMetricsServer(Render render)
      : shared_(std::make_shared<Shared>(std::move(render))), acceptor_(io_) {}
  ~BeastMetricsServer() override { stop(); }

  Status open(const MetricsEndpoint& at) {
    beast::error_code ec;
    const auto addr = net::ip::make_address(at.addr, ec);
    if (ec)
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         "--metrics: '" + at.addr +
                             "' is not an IP address; give one of this machine's, such as "
                             "127.0.0.1 (loopback only) or 0.0.0.0");
    const tcp::endpoint ep(addr, static_cast<unsigned short>(at.port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(64, ec);
    if (ec)
      return make_status(
          CC_ERR_SYSTEM,
          "cannot serve metrics on " + endpoint_text(ep) + ": " + ec.message() +
              (ec == net::error::address_in_use ? "; another program holds the port: choose "
                                                  "another with --metrics ADDR:PORT"
                                                : ""));
    where_ = endpoint_text(acceptor_.local_endpoint());
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { run(); });
    return Status::success();
  }

  int port() const override { return port_; }
  std::string where() const override { return where_; }
  uint64_t served() const override { return shared_->served.load(std::memory_order_relaxed); }
  uint64_t refused() const override { return shared_->refused.load(std::memory_order_relaxed); }

  void stop() override {
    if (!thread_.joinable()) return;
    net::post(io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      io_.stop();
    });
    thread_.join();
  }

 private:
  void run() { run_until_stopped(io_, "metrics endpoint"); }

  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        if (shared_->open >= kMaxMetricsConnections) {
          shared_->count(false);  // closing it at once is the answer
          beast::error_code ignored;
          socket.close(ignored);
        } else {
          std::make_shared<Session>(std::move(socket), shared_)->start();
        }
      }
      accept();
    });
  }

  std::shared_ptr<Shared> shared_;
  net::io_context io_{1};
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::string where_;
  int port_ = 0;
};

void Session::on_read(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted) {
    shared_->count(false);  // closed or stalled before a whole request: nothing to answer
    return;
  }
  if (ec) {
    answer(http::status::bad_request,
           "not an HTTP request this endpoint takes: " + ec.message() +
               "; it serves only GET /metrics\n",
           false);
    return;
  }
  const auto& request = parser_.get();
  if (request.method() != http::verb::get) {
    answer(http::status::method_not_allowed, "only GET /metrics is served\n", false);
    return;
  }
  if (request.target() != "/metrics") {
    answer(http::status::not_found, "only GET /metrics is served\n", false);
    return;
  }
  std::optional<std::string> text = shared_->render();
  if (!text) {
    answer(http::status::service_unavailable,
           "the rendezvous server did not answer in time; try again\n", false);
    return;
  }
  // This endpoint's own counts, this request included.
  *text +=
      "# HELP cc_rendezvous_metrics_requests_total Requests to this metrics endpoint: "
      "served (GET /metrics) or refused (anything else).\n"
      "# TYPE cc_rendezvous_metrics_requests_total counter\n"
      "cc_rendezvous_metrics_requests_total{result=\"served\"} " +
      std::to_string(shared_->served.load(std::memory_order_relaxed) + 1) +
      "\ncc_rendezvous_metrics_requests_total{result=\"refused\"} " +
      std::to_string(shared_->refused.load(std::memory_order_relaxed)) + "\n";
  answer(http::status::ok, std::move(*text), true);
}

void Session::answer(http::status status, std::string body, bool metrics) {
  shared_->count(metrics);
  response_.version(11);
  response_.result(status);
  response_.set(http::field::server, "cc-rendezvous");
  response_.set(http::field::content_type,
                metrics ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8");
  if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET");
  response_.keep_alive(false);
  response_.body() = std::move(body);
  response_.prepare_payload();
  stream_.expires_after(kDeadline);
  http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code, size_t) {
    beast::error_code ignored;
    self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    self->stream_.close();
  });
}

}  // namespace

bool parse_metrics_endpoint(const std::string& text, MetricsEndpoint* out, std::string* error) {
  MetricsEndpoint ep;
  std::string port = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string::npos) {
      *error = "--metrics '" + text + "': an IPv6 address takes the form [ADDR]:PORT";
      return false;
    }
    ep.addr = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    ep.addr = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (ep.addr.find(':') != std::string::npos) {
      *error = "--metrics '" + text + "': write an IPv6 address in brackets, [ADDR]:PORT";
      return false;
    }
  }
  char* end = nullptr;
  const long v = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || v < 0 || v > 65535 || ep.addr.empty()) {
    *error = "--metrics '" + text +
             "': give PORT (loopback), ADDR:PORT or [ADDR]:PORT with a port from 0 to 65535";
    return false;
  }
  ep.port = static_cast<int>(v);
  *out = ep;
  return true;
}

Status MetricsServer::start(const MetricsEndpoint& at, Render render,
                            std::unique_ptr<MetricsServer>* out) {
  try {
    auto server = std::make_unique<BeastMetricsServer>(std::move(render));
    if (Status st = server->open(at); !st.ok()) return st;
    *out = std::move(server);
    return Status::success();
  } catch (const std::exception& e) {
    return make_status(CC_ERR_SYSTEM,
                       std::string("cannot start the metrics endpoint: ") + e.what());
  }
}

}  // namespace cc::daemon
