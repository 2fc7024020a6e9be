// The daemon's metrics endpoint: HTTP on its own port and thread, answering
// only GET /metrics with the Prometheus text the daemon renders; any other
// method or path, and anything that is not HTTP, is refused. No token: bind
// it to loopback (the default) unless the scraper needs more. HTTP is
// cpp-httplib, the HTTP library the etcd backend uses too. Each connection
// has a deadline and one request; at most kMaxMetricsConnections are open at
// once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.hpp"

namespace cc::tools::rendezvous {

inline constexpr int kMaxMetricsConnections = 32;

struct MetricsEndpoint {
  std::string addr = "127.0.0.1";
  int port = 0;
};

// "PORT" (on 127.0.0.1), "ADDR:PORT" or "[IPV6]:PORT"; false with a message.
bool parse_metrics_endpoint(const std::string& text, MetricsEndpoint* out, std::string* error);

class MetricsServer {
 public:
  // The exposition, or nullopt when it cannot be had now (answered 503).
  using Render = std::function<std::optional<std::string>()>;

  // Binds and starts the thread. A taken port or a bad address is
  // CC_ERR_SYSTEM with a message naming it.
  static Status start(const MetricsEndpoint& at, Render render,
                      std::unique_ptr<MetricsServer>* out);
  virtual ~MetricsServer() = default;
  virtual int port() const = 0;
  // "127.0.0.1:9464" as bound.
  virtual std::string where() const = 0;
  // Requests answered 200, and requests refused (another method or path,
  // not HTTP, too large, too slow, too many at once). Any thread.
  virtual uint64_t served() const = 0;
  virtual uint64_t refused() const = 0;
  // Closes the port and joins the thread. Idempotent.
  virtual void stop() = 0;
};

}  // namespace cc::tools::rendezvous
