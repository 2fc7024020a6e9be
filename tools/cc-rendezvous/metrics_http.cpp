// The metrics endpoint on cpp-httplib: httplib accepts on its own thread and
// hands each connection to a worker of its pool, where this file reads one
// request through a Connection (the request under one deadline, the answer
// under another) and closes it. httplib parses the request; the
// pre-routing handler decides the answer before any body is read.
#include "tools/cc-rendezvous/metrics_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <httplib.h>

#include "common/return_if_error.hpp"
#include "common/unique_fd.hpp"

namespace cc::tools::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(5);  // to read a request, and to write the answer
constexpr char kOnlyMetrics[] = "only GET /metrics is served\n";

// An IPv4 or IPv6 address with its port, as the socket calls take it.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t size = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

// Also gives the address as inet_ntop writes it, in *text.
bool parse_address(const std::string& addr, int port, SocketAddress* out, std::string* text) {
  char buf[INET6_ADDRSTRLEN] = "";
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->storage);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out->size = sizeof(sockaddr_in);
    *text = inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return true;
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    out->size = sizeof(sockaddr_in6);
    *text = inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    return true;
  }
  return false;
}

// "127.0.0.1:9464", "[::1]:9464".
std::string host_port(const std::string& ip, int port) {
  return ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port)
                                           : fmt::format("{}:{}", ip, port);
}

// The address and port of a socket's end, for httplib's Request.
void ip_and_port(const sockaddr_storage& ss, std::string* ip, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(ss);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    *port = ntohs(v6.sin6_port);
  } else {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(ss);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    *port = ntohs(v4.sin_port);
  }
  *ip = text;
}

// Why `at` cannot be bound, as the kernel says it: httplib only says that it
// could not.
std::string bind_error(const SocketAddress& at) {
  UniqueFd fd(::socket(at.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return std::strerror(errno);
  const int on = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (::bind(fd.get(), at.get(), at.size) != 0) return std::strerror(errno);
  return "the port could not be opened";
}

// What the endpoint counts: requests answered 200 (served) and every other
// connection (refused), each counted once, before its answer is sent.
struct Counts {
  std::atomic<uint64_t> served{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<int> open{0};
};

// One connection as httplib reads and writes it. A request that does not
// arrive whole before the deadline (or whose connection fails) gets no
// answer: the connection is closed. The first bytes of the answer count it.
class Connection final : public httplib::Stream {
 public:
  Connection(int fd, Counts& counts) : fd_(fd), counts_(counts) {}

  // Counts a connection that ended with no answer written.
  ~Connection() override {
    if (!counted_) counts_.refused.fetch_add(1, std::memory_order_relaxed);
  }

  bool is_readable() const override { return !failed_ && wait(POLLIN); }
  bool is_writable() const override { return !failed_ && wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (failed_ || !wait(POLLIN)) return fail();
    const ssize_t n = ::recv(fd_, ptr, size, 0);
    return n < 0 ? fail() : n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (failed_) return -1;
    if (!counted_) {
      counted_ = true;
      const bool ok = std::string_view(ptr, size).starts_with("HTTP/1.1 200 ");
      (ok ? counts_.served : counts_.refused).fetch_add(1, std::memory_order_relaxed);
      deadline_ = Clock::now() + kDeadline;
    }
    if (!wait(POLLOUT)) return fail();
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    return n < 0 ? fail() : n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, &ip, &port);
  }
  socket_t socket() const override { return fd_; }

 private:
  ssize_t fail() {
    failed_ = true;
    return -1;
  }

  // Whether the socket becomes ready for `events` before the deadline.
  bool wait(short events) const {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
      pollfd p{fd_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (n > 0) return true;
      if (n == 0 || errno != EINTR) return false;
    }
  }

  int fd_;
  Counts& counts_;
  Clock::time_point deadline_ = Clock::now() + kDeadline;
  bool failed_ = false;
  bool counted_ = false;
};

class HttplibMetricsServer final : public MetricsServer, private httplib::Server {
 public:
  explicit HttplibMetricsServer(Render render) : render_(std::move(render)) {
    // One worker more than the connections allowed, so that the one over
    // the limit is closed at once instead of waiting in the queue.
    new_task_queue = [] { return new httplib::ThreadPool(kMaxMetricsConnections + 1); };
    set_default_headers({{"Server", "cc-rendezvous"}});
    // SO_REUSEADDR alone: httplib's default SO_REUSEPORT would let a second
    // daemon share a port another one serves, instead of saying it is taken.
    set_socket_options([](socket_t fd) {
      int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
      answer(request, response);
      return HandlerResponse::Handled;
    });
    // Requests httplib refused before the pre-routing handler saw them.
    set_error_handler(HandlerWithResponse([](const httplib::Request&, httplib::Response& response) {
      if (!response.body.empty()) return HandlerResponse::Unhandled;
      response.set_content(
          "not an HTTP request this endpoint takes; it serves only GET /metrics\n",
          "text/plain; charset=utf-8");
      return HandlerResponse::Handled;
    }));
  }
  ~HttplibMetricsServer() override { stop(); }

  Status open(const MetricsEndpoint& at) {
    SocketAddress address;
    std::string ip;
    if (!parse_address(at.addr, at.port, &address, &ip))
      return make_status(CC_ERR_INVALID_ARGUMENT,
                         fmt::format("--metrics: '{}' is not an IP address; give one of this "
                                     "machine's, such as 127.0.0.1 (loopback only) or 0.0.0.0",
                                     at.addr));
    const int port = at.port == 0 ? bind_to_any_port(at.addr)
                                  : (bind_to_port(at.addr, at.port) ? at.port : -1);
    if (port < 0) {
      const std::string why = bind_error(address);
      return make_status(
          CC_ERR_SYSTEM,
          fmt::format("cannot serve metrics on {}: {}{}", host_port(ip, at.port), why,
                      why == std::strerror(EADDRINUSE)
                          ? "; another program holds the port: choose another with "
                            "--metrics ADDR:PORT"
                          : ""));
    }
    port_ = port;
    where_ = host_port(ip, port);
    thread_ = std::thread([this] {
      listen_after_bind();
      listen_ended_ = true;
    });
    // stop() can end the accept loop only once it runs.
    while (!is_running() && !listen_ended_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status::success();
  }

  int port() const override { return port_; }
  std::string where() const override { return where_; }
  uint64_t served() const override { return counts_.served.load(std::memory_order_relaxed); }
  uint64_t refused() const override { return counts_.refused.load(std::memory_order_relaxed); }

  void stop() override {
    if (!thread_.joinable()) return;
    httplib::Server::stop();
    thread_.join();
  }

 private:
  // httplib's worker calls this for each accepted connection.
  bool process_and_close_socket(socket_t fd) override {
    UniqueFd closed_at_end(fd);
    if (counts_.open.fetch_add(1) >= kMaxMetricsConnections) {
      counts_.open.fetch_sub(1);
      counts_.refused.fetch_add(1, std::memory_order_relaxed);  // closing it at once is the answer
      return false;
    }
    bool answered = false;
    {
      Connection connection(fd, counts_);
      bool connection_closed = false;
      answered = process_request(connection, true, connection_closed, [](httplib::Request&) {});
    }
    ::shutdown(fd, SHUT_RDWR);
    counts_.open.fetch_sub(1);
    return answered;
  }

  void answer(const httplib::Request& request, httplib::Response& response) {
    constexpr char kText[] = "text/plain; charset=utf-8";
    if (request.method != "GET") {
      response.status = 405;
      response.set_header("Allow", "GET");
      response.set_content(kOnlyMetrics, kText);
      return;
    }
    if (request.target != "/metrics") {
      response.status = 404;
      response.set_content(kOnlyMetrics, kText);
      return;
    }
    // A GET with a body (a length, even a bad one, or chunks) is no scrape.
    if (request.has_header("Content-Length") || request.has_header("Transfer-Encoding")) {
      response.status = 400;
      response.set_content(kOnlyMetrics, kText);
      return;
    }
    std::optional<std::string> text = render_();
    if (!text) {
      response.status = 503;
      response.set_content("the rendezvous server did not answer in time; try again\n", kText);
      return;
    }
    // This endpoint's own counts, this request included.
    fmt::format_to(std::back_inserter(*text),
                   "# HELP cc_rendezvous_metrics_requests_total Requests to this metrics "
                   "endpoint: served (GET /metrics) or refused (anything else).\n"
                   "# TYPE cc_rendezvous_metrics_requests_total counter\n"
                   "cc_rendezvous_metrics_requests_total{{result=\"served\"}} {}\n"
                   "cc_rendezvous_metrics_requests_total{{result=\"refused\"}} {}\n",
                   served() + 1, refused());
    response.status = 200;
    response.set_content(std::move(*text), "text/plain; version=0.0.4; charset=utf-8");
  }

  Render render_;
  Counts counts_;
  std::thread thread_;
  std::atomic<bool> listen_ended_{false};
  std::string where_;
  int port_ = 0;
};

}  // namespace

bool parse_metrics_endpoint(const std::string& text, MetricsEndpoint* out, std::string* error) {
  MetricsEndpoint ep;
  std::string port = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string::npos) {
      *error = fmt::format("--metrics '{}': an IPv6 address takes the form [ADDR]:PORT", text);
      return false;
    }
    ep.addr = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    ep.addr = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (ep.addr.find(':') != std::string::npos) {
      *error = fmt::format("--metrics '{}': write an IPv6 address in brackets, [ADDR]:PORT", text);
      return false;
    }
  }
  char* end = nullptr;
  const long v = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || v < 0 || v > 65535 || ep.addr.empty()) {
    *error = fmt::format(
        "--metrics '{}': give PORT (loopback), ADDR:PORT or [ADDR]:PORT with a port from 0 to "
        "65535",
        text);
    return false;
  }
  ep.port = static_cast<int>(v);
  *out = ep;
  return true;
}

Status MetricsServer::start(const MetricsEndpoint& at, Render render,
                            std::unique_ptr<MetricsServer>* out) {
  try {
    auto server = std::make_unique<HttplibMetricsServer>(std::move(render));
    CC_RETURN_IF_ERROR(server->open(at));
    *out = std::move(server);
    return Status::success();
  } catch (const std::exception& e) {
    return make_status(CC_ERR_SYSTEM,
                       fmt::format("cannot start the metrics endpoint: {}", e.what()));
  }
}

}  // namespace cc::tools::rendezvous
