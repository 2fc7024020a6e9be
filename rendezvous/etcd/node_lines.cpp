#include "rendezvous/etcd/node_lines.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace cc::rv::etcd::node {

bool write_line(int fd, const json& message) {
  std::string line = message.dump();
  line.push_back('\n');
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string read_lines(int fd, size_t max_line, const std::function<bool(json)>& on_message) {
  std::string buf;
  char chunk[64 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return {};
    buf.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
      auto m = parse_line(buf.substr(start, nl - start));
      if (!m) return "a line that is not one JSON object";
      if (!on_message(std::move(*m))) return {};
    }
    buf.erase(0, start);
    if (buf.size() > max_line) return "a line over " + std::to_string(max_line) + " bytes";
  }
}

}  // namespace cc::rv::etcd::node
