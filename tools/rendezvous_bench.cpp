// cc-rendezvous-bench: N simulated ranks against a rendezvous server, each on
// its own TCP connection: hello, set its key, add a counter (the last adder
// sets "done"), wait for "done", get a neighbour's key. Prints the wall time
// from the first connect to the last completion.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>

// GCC 12 reports asio's coroutine frame operator delete as mismatched (a false
// positive, GCC bug 109224).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "log.hpp"
#include "protocol.hpp"
#include "server.hpp"

namespace {

namespace rv = cc::rv;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

const char* kUsage =
    "usage: cc-rendezvous-bench [-n N]... [--addr ADDR --port PORT] [--window W]\n"
    "\n"
    "Runs N simulated ranks (default: 1024, 4096 and 16384 in turn), each on its\n"
    "own connection: hello, set its key, add a counter (the last adder sets\n"
    "'done'), get 'done' (waits on the server), get its neighbour's key.\n"
    "Without --addr/--port it starts its own server (in this process, or in a\n"
    "child process when the open-file limit cannot hold both ends).\n"
    "  --window W  ranks between connect and the server's first answer at once\n"
    "              (default 1024): beyond the kernel's listen backlog (somaxconn)\n"
    "              SYNs are dropped and cost a 1 s retransmit\n";

struct Run {
  int n = 0;
  std::string job;
  tcp::endpoint server;
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::string first_error;
  Clock::time_point last_done;
  int next_to_start = 0;
  int window = 1024;
};

awaitable<rv::Message> call(tcp::socket& s, uint32_t rid, const rv::Message& m) {
  auto frame = rv::encode_frame(rid, m);
  co_await asio::async_write(s, asio::buffer(frame), use_awaitable);
  std::array<uint8_t, rv::kHeaderSize> header{};
  co_await asio::async_read(s, asio::buffer(header), use_awaitable);
  rv::FrameHeader h;
  if (rv::parse_header(header, rv::Limits{}, &h) != rv::DecodeError::none)
    throw std::runtime_error("bad reply header");
  std::vector<uint8_t> payload(h.length);
  co_await asio::async_read(s, asio::buffer(payload), use_awaitable);
  rv::Message out;
  if (rv::decode_message(h.type, payload, rv::Limits{}, &out) != rv::DecodeError::none)
    throw std::runtime_error("bad reply payload");
  if (auto* e = std::get_if<rv::Error>(&out)) throw std::runtime_error("server error: " + e->message);
  co_return out;
}

void start_more(Run& run, asio::any_io_executor ex);

awaitable<void> rank(Run& run, int i) {
  tcp::socket s(co_await asio::this_coro::executor);
  try {
    if (run.server.address().is_v4() && run.server.address().is_loopback()) {
      // Real ranks come from many hosts. From one address, the kernel's search
      // for a free source port grows with every open connection (it dominated
      // the time at N=16384), so spread the ranks over 127.0.0.0/8.
      s.open(tcp::v4());
      const int opt_on = 1;
      ::setsockopt(s.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &opt_on, sizeof opt_on);
      const uint32_t src = (127u << 24) | (2u + static_cast<uint32_t>(i % 4096));
      s.bind(tcp::endpoint(asio::ip::address_v4(src), 0));
    }
    co_await s.async_connect(run.server, use_awaitable);
    s.set_option(tcp::no_delay(true));
    s.set_option(asio::socket_base::linger(true, 0));  // no TIME_WAIT on this side
    // Messages are built before co_await: GCC 12 miscompiles braced
    // initialisers inside co_await expressions.
    rv::Message hello = rv::Hello{run.job, "bench", static_cast<uint32_t>(i), "cc-rendezvous-bench"};
    co_await call(s, 1, hello);
    start_more(run, s.get_executor());  // accepted and answered: let the next one connect
    const std::string mine = "rank/" + std::to_string(i);
    rv::Message set = rv::Set{mine, std::vector<uint8_t>(mine.begin(), mine.end())};
    co_await call(s, 2, set);
    rv::Message add = rv::Add{"count", 1};
    auto count = co_await call(s, 3, add);
    if (std::get<rv::Integer>(count).value == run.n) {
      rv::Message done = rv::Set{"done", std::vector<uint8_t>(1, 1)};
      co_await call(s, 4, done);
    }
    rv::Message wait_done = rv::Get{"done", 600000};
    co_await call(s, 5, wait_done);
    const std::string neighbour = "rank/" + std::to_string((i + 1) % run.n);
    rv::Message get = rv::Get{neighbour, 0};
    auto v = co_await call(s, 6, get);
    const auto& value = std::get<rv::Value>(v).value;
    if (std::string(value.begin(), value.end()) != neighbour) throw std::runtime_error("wrong neighbour value");
    run.last_done = Clock::now();
    ++run.done;
  } catch (const std::exception& e) {
    if (run.failed++ == 0) run.first_error = "rank " + std::to_string(i) + ": " + e.what();
    start_more(run, s.get_executor());
  }
  co_return;
}

void start_more(Run& run, asio::any_io_executor ex) {
  if (run.next_to_start < run.n) {
    const int i = run.next_to_start++;
    asio::co_spawn(ex, rank(run, i), asio::detached);
  }
}

bool run_once(int n, const tcp::endpoint& server, int window) {
  Run run;
  run.n = n;
  run.server = server;
  run.window = window;
  run.job = "bench-" + std::to_string(n) + "-" + std::to_string(getpid()) + "-" +
            std::to_string(Clock::now().time_since_epoch().count());
  asio::io_context io(1);
  const auto t0 = Clock::now();
  for (int k = 0; k < window && run.next_to_start < n; ++k) start_more(run, io.get_executor());
  io.run();
  const double ms = std::chrono::duration<double, std::milli>(run.last_done - t0).count();
  if (run.failed > 0) {
    std::printf("N=%-6d FAILED: %d of %d ranks failed; first: %s\n", n, run.failed.load(), n,
                run.first_error.c_str());
    return false;
  }
  std::printf("N=%-6d %9.1f ms  (%.1f us per rank)\n", n, ms, ms * 1000.0 / n);
  std::fflush(stdout);
  return true;
}

rlim_t raise_fd_limit() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

// A server in a child process, for when one process cannot hold both ends.
pid_t fork_server(int* port) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    std::unique_ptr<rv::Server> server;
    if (!rv::Server::start(o, &server).ok()) _exit(1);
    const int p = server->port();
    if (write(fds[1], &p, sizeof p) != sizeof p) _exit(1);
    close(fds[1]);
    server->wait();  // until SIGTERM ends the process
    _exit(0);
  }
  close(fds[1]);
  const bool ok = read(fds[0], port, sizeof *port) == sizeof *port;
  close(fds[0]);
  if (!ok) {
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  std::string addr;
  int port = 0;
  int window = 1024;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cc-rendezvous-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-n") {
      sizes.push_back(std::atoi(next()));
    } else if (a == "--addr") {
      addr = next();
    } else if (a == "--port") {
      port = std::atoi(next());
    } else if (a == "--window") {
      window = std::atoi(next());
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "cc-rendezvous-bench: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (sizes.empty()) sizes = {1024, 4096, 16384};
  for (int n : sizes)
    if (n < 1) {
      std::fprintf(stderr, "cc-rendezvous-bench: -n needs a positive number\n");
      return 2;
    }
  if (window < 1) window = 1;
  int max_n = 0;
  for (int n : sizes) max_n = std::max(max_n, n);

  const rlim_t limit = raise_fd_limit();
  std::printf("open-file limit raised to %llu\n", static_cast<unsigned long long>(limit));
  if (static_cast<rlim_t>(max_n) + 64 > limit) {
    std::fprintf(stderr, "cc-rendezvous-bench: %d connections do not fit the open-file limit of %llu; raise "
                         "the hard limit (ulimit -Hn, LimitNOFILE) or use a smaller -n\n",
                 max_n, static_cast<unsigned long long>(limit));
    return 1;
  }

  std::unique_ptr<rv::Server> server;
  pid_t child = -1;
  if (!addr.empty() || port != 0) {
    if (addr.empty() || port == 0) {
      std::fprintf(stderr, "cc-rendezvous-bench: give both --addr and --port\n");
      return 2;
    }
    std::printf("against the server at %s:%d\n", addr.c_str(), port);
  } else if (2 * static_cast<rlim_t>(max_n) + 64 <= limit) {
    rv::ServerOptions o;
    o.bind_addr = "127.0.0.1";
    cc::Status st = rv::Server::start(o, &server);
    if (!st.ok()) {
      std::fprintf(stderr, "cc-rendezvous-bench: %s\n", st.message.c_str());
      return 1;
    }
    addr = "127.0.0.1";
    port = server->port();
    std::printf("embedded server on %s:%d (its own thread in this process)\n", addr.c_str(), port);
  } else {
    child = fork_server(&port);
    if (child < 0) {
      std::fprintf(stderr, "cc-rendezvous-bench: could not start a server process\n");
      return 1;
    }
    addr = "127.0.0.1";
    std::printf("server in a child process on %s:%d (both ends of %d connections exceed this "
                "process's open-file limit)\n",
                addr.c_str(), port, max_n);
  }
  std::fflush(stdout);

  asio::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(addr, ec), static_cast<unsigned short>(port));
  if (ec) {
    asio::io_context io;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(addr, std::to_string(port), ec);
    if (ec || results.empty()) {
      std::fprintf(stderr, "cc-rendezvous-bench: cannot resolve %s: %s\n", addr.c_str(), ec.message().c_str());
      return 1;
    }
    ep = results.begin()->endpoint();
  }

  bool ok = true;
  for (int n : sizes) ok = run_once(n, ep, window) && ok;

  if (server) server->stop();
  if (child > 0) {
    kill(child, SIGTERM);
    waitpid(child, nullptr, 0);
  }
  return ok ? 0 : 1;
}
