// A watch stream's create requests, confirmed in time or the stream dropped.
//
// etcd's JSON gateway turns one HTTP request into one gRPC watch stream: it
// decodes the first create request, then reads the rest of the request body
// while it already forwards etcd's answers. When the first answer is flushed
// before the gateway has read the others, Go's HTTP/1.1 server discards the
// unread part of the body, and those watches are never made. Nothing says
// so: the stream simply carries fewer watches than were asked for. (Seen on
// etcd 3.4: a generation watch of four keys confirmed three, so a rank's
// death went unheard.) A stream of several creates that has not confirmed
// them all within the grace of its answer's start is stopped here, so the
// caller opens it again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>

namespace cc::rv::etcd {

class CreateConfirmation {
 public:
  // `stop` shuts the stream's connection (from this object's thread); it is
  // called again every few milliseconds until finish(), which must come
  // before the connection goes.
  CreateConfirmation(size_t creates, std::chrono::milliseconds grace, std::function<void()> stop);
  ~CreateConfirmation();
  CreateConfirmation(const CreateConfirmation&) = delete;
  CreateConfirmation& operator=(const CreateConfirmation&) = delete;

  // The stream's answer began (HTTP 200): the grace counts from here, so a
  // slow connection or a busy member's late headers are not taken for a loss.
  void begin();
  // `created` of the creates are confirmed so far.
  void confirmed(size_t created);
  // The stream is over (the caller's send returned): no stop after this.
  // True when the grace passed with creates unconfirmed and the stream was
  // stopped: open it again.
  bool finish();

 private:
  void run();

  const size_t creates_;
  const std::chrono::milliseconds grace_;
  const std::function<void()> stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool begun_ = false;
  bool settled_ = false;  // all confirmed, or the stream over
  bool expired_ = false;
  std::thread thread_;
};

}  // namespace cc::rv::etcd
