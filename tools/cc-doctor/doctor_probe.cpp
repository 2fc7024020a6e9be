// What answers at MASTER_ADDR:MASTER_PORT: connect with a deadline, send a
// cc Hello and read the first frame back.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "cc/cc.h"
#include "common/printable.hpp"
#include "common/unique_fd.hpp"
#include "rendezvous/connect_by.hpp"
#include "rendezvous/protocol.hpp"
#include "tools/cc-doctor/doctor_report.hpp"

namespace cc::tools::doctor {
namespace {

using Clock = std::chrono::steady_clock;

using Fd = UniqueFd;

struct AddrinfoFree {
  void operator()(addrinfo* p) const { freeaddrinfo(p); }
};

int ms_left(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

std::string numeric(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

bool send_all(int fd, const std::vector<uint8_t>& bytes, Clock::time_point deadline) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, ms_left(deadline)) <= 0) return false;
  }
  return true;
}

// Reads the answer to Hello and classifies it.
void read_answer(int fd, Clock::time_point deadline, Probe* out) {
  rv::FrameReader reader;
  uint8_t buf[4096];
  size_t total = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, ms_left(deadline));
    if (n <= 0) {
      out->answer = total == 0 ? Answer::silent : Answer::other_program;
      out->detail =
          total == 0
              ? "something accepted the connection but did not answer a cc Hello: "
                "another program holds the port, or a cc rendezvous too busy to answer"
              : "something answered with an incomplete frame: another program holds the port";
      return;
    }
    ssize_t got = recv(fd, buf, sizeof buf, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      out->answer = total == 0 ? Answer::closed : Answer::other_program;
      out->detail = total == 0 ? "something accepted the connection and closed it without a word: "
                                 "another program holds the port, or a proxy with nothing behind it"
                               : "something answered with an incomplete frame and closed: another "
                                 "program holds the port";
      return;
    }
    total += static_cast<size_t>(got);
    reader.feed({buf, static_cast<size_t>(got)});
    auto frame = reader.next();
    if (reader.error() == rv::DecodeError::bad_version) {
      out->answer = Answer::cc_refused;
      out->detail =
          "a cc rendezvous of another protocol version answers there: use cc-doctor, "
          "cc-rendezvous and libcc of one release";
      return;
    }
    if (reader.error() != rv::DecodeError::none) {
      out->answer = Answer::other_program;
      out->detail = std::string("another program holds the port (its answer is not a cc frame: ") +
                    rv::describe(reader.error()) + ")";
      return;
    }
    if (!frame) continue;
    if (auto* c = std::get_if<rv::Challenge>(&frame->message)) {
      out->answer = Answer::cc_rendezvous;
      out->server = printable(c->server);
      out->auth_required = c->auth_required;
      out->detail = "a cc rendezvous answers: " + out->server +
                    (c->auth_required ? " (requires a token)" : " (no token required)");
    } else if (auto* e = std::get_if<rv::Error>(&frame->message)) {
      out->answer = Answer::cc_refused;
      out->detail = "a cc rendezvous answers but refused the Hello: " + printable(e->message);
    } else {
      out->answer = Answer::cc_refused;
      out->detail = std::string("a cc rendezvous answers with an unexpected '") +
                    rv::type_name(rv::type_of(frame->message)) + "' to Hello";
    }
    return;
  }
}

std::string local_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "cc-doctor";
  return buf;
}

}  // namespace

Probe probe_rendezvous(const std::string& addr_in, int port, const std::string& job_id,
                       int timeout_ms) {
  Probe out;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  const std::string addr = launch::strip_brackets(addr_in);
  const std::string where = addr_in + ":" + std::to_string(port);
  auto finish = [&]() {
    out.elapsed_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
    return out;
  };

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(addr.c_str(), service.c_str(), &hints, &raw); rc != 0) {
    out.answer = Answer::unresolved;
    out.detail = "cannot resolve \"" + addr + "\" (" + gai_strerror(rc) + ")";
    return finish();
  }
  std::unique_ptr<addrinfo, AddrinfoFree> list(raw);

  int last_err = 0;
  for (addrinfo* ai = raw; ai != nullptr; ai = ai->ai_next) {
    out.address = numeric(ai->ai_addr, ai->ai_addrlen);
    Fd fd;
    last_err = rv::connect_by(rv::endpoint_of(ai->ai_addr, ai->ai_addrlen), deadline, &fd);
    if (last_err != 0) continue;

    rv::Hello hello;
    hello.job_id = job_id;
    hello.host = local_host();
    hello.pid = static_cast<uint32_t>(getpid());
    hello.client = std::string("cc-doctor ") + CC_VERSION_STRING;
    if (!send_all(fd.get(), rv::encode_frame(1, hello), deadline)) {
      out.answer = Answer::closed;
      out.detail =
          "something accepted the connection but would not take a cc Hello: another program "
          "holds the port";
      return finish();
    }
    read_answer(fd.get(), deadline, &out);
    return finish();
  }

  if (last_err == ECONNREFUSED) {
    out.answer = Answer::refused;
    out.detail = "connection refused";
  } else if (last_err == ETIMEDOUT) {
    out.answer = Answer::unreachable;
    out.detail =
        "unreachable: no answer from " + where + " within " + std::to_string(timeout_ms) + " ms";
  } else {
    out.answer = Answer::unreachable;
    out.detail =
        "unreachable: connecting to " + where + " failed (" + std::strerror(last_err) + ")";
  }
  return finish();
}

}  // namespace cc::tools::doctor
