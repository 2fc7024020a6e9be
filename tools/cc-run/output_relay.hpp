// Relaying the ranks' output: every line a rank writes to stdout or stderr
// goes to cc-run's own, prefixed "[rank R] ", whole lines only (a line
// longer than 64 KiB is cut rather than held forever).
#pragma once

#include <array>
#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cc::tools::run {

class OutputRelay {
 public:
  // `closed` is called whenever one of the streams ends.
  OutputRelay(asio::io_context& io, std::function<void()> closed);

  // Relays the read ends `out_fd` and `err_fd` (owned from here) for `rank`,
  // replacing what was relayed for the rank under `slot` before.
  void relay(size_t slot, int rank, int out_fd, int err_fd);

  // Relays at once what the rank of `slot` has written so far (before cc-run
  // says it died); with `close`, also its last partial line, and stops
  // relaying it (what its children still hold is not the rank's any more).
  void flush(size_t slot, bool close);

  // Everything still open, partial lines included, then closed.
  void flush_all();

  // Whether any stream is still open.
  bool any_open() const;

 private:
  struct Stream {
    explicit Stream(asio::io_context& io) : pipe(io) {}
    asio::posix::stream_descriptor pipe;
    int to_fd = 1;  // cc-run's stdout or stderr
    std::string prefix;
    std::string partial;
    std::array<char, 65536> buf{};
  };
  using StreamPtr = std::shared_ptr<Stream>;

  void read_more(const StreamPtr& s);
  void take(Stream& s, const char* data, size_t n);
  void read_available(Stream& s);
  void close(Stream& s);

  asio::io_context& io_;
  std::function<void()> closed_;
  std::vector<std::array<StreamPtr, 2>> streams_;  // per slot: stdout, stderr
};

}  // namespace cc::tools::run
