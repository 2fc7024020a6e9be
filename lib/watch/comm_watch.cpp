#include "lib/watch/comm_watch.hpp"

#include <cstring>
#include <optional>
#include <thread>

#include "common/datatypes.hpp"
#include "common/log.hpp"
#include "lib/watch/trace_signal.hpp"

namespace cc::watch {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct CommWatch::Failure {
  core::State state = core::State::ok;
  std::string story;
  bool tell_others = false;  // this rank's own finding: announce it through the server
};

namespace {

const char* dtype_words(int dtype) {
  const char* n = datatype_name(static_cast<cc_datatype_t>(dtype));
  return std::strncmp(n, "CC_", 3) == 0 ? n + 3 : n;  // "FLOAT32"
}

// A query CUDA refused because a graph capture was under way: no verdict on
// the operation (asked again at the next tick), and not a fault of its kernel.
bool refused_during_capture(cudaError_t e) {
  if (e != cudaErrorStreamCaptureUnsupported && e != cudaErrorStreamCaptureImplicit) return false;
  cudaGetLastError();
  return true;
}

}  // namespace

Status CommWatch::create(core::Core* comm, std::unique_ptr<ControlChannel> channel,
                         std::unique_ptr<CommWatch>* out) {
  int saved = -1;
  if (cudaGetDevice(&saved) != cudaSuccess) saved = -1;
  if (comm->device >= 0 && comm->device != saved) cudaSetDevice(comm->device);
  cudaEvent_t event = nullptr, tail = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&tail, cudaEventDisableTiming);
  if (saved >= 0 && saved != comm->device) cudaSetDevice(saved);
  if (e != cudaSuccess) {
    if (event != nullptr) cudaEventDestroy(event);
    cudaGetLastError();
    return make_status(CC_ERR_CUDA,
                       comm->who() + ": creating the watchdog's CUDA event on device " +
                           std::to_string(comm->device) + " failed: " + cudaGetErrorString(e));
  }
  out->reset(new CommWatch(comm, event, tail, std::move(channel)));
  return Status::success();
}

CommWatch::CommWatch(core::Core* comm, cudaEvent_t event, cudaEvent_t tail_event,
                     std::unique_ptr<ControlChannel> channel)
    : comm_(comm), event_(event), channel_(std::move(channel)), tail_event_(tail_event) {}

CommWatch::~CommWatch() {
  if (event_ != nullptr) cudaEventDestroy(event_);
  if (tail_event_ != nullptr) cudaEventDestroy(tail_event_);
}

std::string CommWatch::op_words(uint64_t seq) const {
  const OpRecord& r = ops_[seq % kOps];
  std::string out = "op #" + std::to_string(seq);
  if (r.seq.load(std::memory_order_acquire) != seq) return out;
  const char* call = r.call.load(std::memory_order_relaxed);
  return out + " " + (call != nullptr ? call : "?") + " " +
         std::to_string(r.count.load(std::memory_order_relaxed)) + " x " +
         dtype_words(r.dtype.load(std::memory_order_relaxed));
}

std::string CommWatch::progress_words() const {
  const uint64_t enqueued = comm_->ops_enqueued.load(std::memory_order_acquire);
  if (enqueued == 0) return "this rank had not called a collective yet";
  return "this rank's last call was " + op_words(enqueued) + "; op #" +
         std::to_string(completed()) + " is the last seen complete";
}

std::string CommWatch::timeout_story(uint64_t waiting) {
  const uint64_t done = completed();
  std::string story = "timed out: " + comm_->who() + " waits in " + op_words(waiting) +
                      ", not complete after " + std::to_string(comm_->timeout.count()) +
                      " ms (CC_TIMEOUT_MS / timeout_ms)";
  if (done + 1 < waiting) story += "; op #" + std::to_string(done) + " is the last seen complete";
  story += ". ";
  if (channel_)
    story += channel_->behind_words(waiting, milliseconds(2000));
  else
    story +=
        "This communicator was made by cc_comm_split and has no rendezvous connection of "
        "its own, so which rank is behind is unknown: compare the calls on every rank";
  return story + ". The NCCL communicator was aborted; destroy this communicator";
}

// An event query failed: a kernel fault (or worse) while `seq` ran.
bool CommWatch::cuda_fault(cudaError_t e, uint64_t seq, Failure* f) {
  cudaGetLastError();
  f->state = core::State::aborted;
  f->story = comm_->who() + ": CUDA reported '" + cudaGetErrorString(e) + "' while " +
             op_words(seq) + " ran. Look for a kernel fault in this process (compute-sanitizer)";
  f->tell_others = true;
  return true;
}

bool CommWatch::check_inflight(Clock::time_point now, Failure* f) {
  const int state = event_state_.load(std::memory_order_acquire);
  if (state == kPending) {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) {
      completed_.store(event_seq_, std::memory_order_relaxed);
      pending_since_ = {};
      event_state_.store(kIdle, std::memory_order_release);
      return false;
    }
    if (e != cudaErrorNotReady && !refused_during_capture(e)) return cuda_fault(e, event_seq_, f);
    if (pending_since_ == Clock::time_point{}) pending_since_ = now;
    if (now - pending_since_ <= comm_->timeout) return false;
    f->state = core::State::timed_out;
    f->story = timeout_story(event_seq_);
    f->tell_others = true;
    return true;
  }
  if (state != kIdle) return false;
  // Calls made while `event_` was busy: the tail event follows the newest.
  const uint64_t tail_seq = tail_seq_.load(std::memory_order_relaxed);
  if (tail_seq <= completed()) return false;
  int idle = kIdle;
  if (!tail_state_.compare_exchange_strong(idle, kBusy, std::memory_order_acquire)) return false;
  // Read under kBusy: no call re-records it meanwhile.
  const uint64_t seq = tail_seq_.load(std::memory_order_relaxed);
  const cudaError_t e = cudaEventQuery(tail_event_);
  tail_state_.store(kIdle, std::memory_order_release);
  if (e == cudaSuccess) {
    if (seq > completed()) completed_.store(seq, std::memory_order_relaxed);
    tail_since_ = {};
    return false;
  }
  if (e != cudaErrorNotReady && !refused_during_capture(e)) return cuda_fault(e, seq, f);
  // Timed from when this operation became the newest still running; newer
  // calls restart the clock (the main event covers a caller that keeps going).
  if (seq != tail_watched_seq_ || tail_since_ == Clock::time_point{}) {
    tail_watched_seq_ = seq;
    tail_since_ = now;
    return false;
  }
  if (now - tail_since_ <= comm_->timeout) return false;
  f->state = core::State::timed_out;
  f->story = timeout_story(seq);
  f->tell_others = true;
  return true;
}

bool CommWatch::check_nccl(Failure* f) {
  for (ncclComm_t n : {comm_->nccl, comm_->nccl_ctl}) {
    if (n == nullptr) continue;
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(n, &state) != ncclSuccess) continue;
    if (state == ncclSuccess || state == ncclInProgress) continue;
    f->state = state == ncclRemoteError || state == ncclSystemError ? core::State::peer_failed
                                                                    : core::State::aborted;
    const char* last = ncclGetLastError(n);
    f->story = "NCCL reported an asynchronous error on " + comm_->who() + ": " +
               ncclGetErrorString(state) +
               (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string()) +
               "; the last operation seen complete is #" + std::to_string(completed()) +
               ". A remote error usually means another rank died or its network went away: look at "
               "the other ranks' output, run with NCCL_DEBUG=WARN";
    f->tell_others = true;
    return true;
  }
  return false;
}

void CommWatch::write_recorder(const char* reason) {
  if (recorder_ == nullptr || recorder_->dir().empty()) return;
  std::string path;
  if (Status st = recorder_->write(recorder_->dir(), reason, completed(), &path); !st.ok())
    log().warn("{}: {}", comm_->who(), st.message);
  else
    log().warn("{}: flight recorder written to {} ({})", comm_->who(), path, reason);
}

// Once per communicator, whichever thread declared the failure.
void CommWatch::write_failure_trace() {
  if (failure_written_) return;
  failure_written_ = true;
  const auto state = static_cast<core::State>(comm_->state.load(std::memory_order_acquire));
  write_recorder(state == core::State::mismatch    ? "mismatch"
                 : state == core::State::timed_out ? "timeout"
                                                   : "failure");
}

void CommWatch::add_split(std::shared_ptr<SplitReport> child) {
  std::lock_guard<std::mutex> lock(splits_mu_);
  splits_.push_back(std::move(child));
}

void CommWatch::end_split() {
  if (!split_) return;
  std::lock_guard<std::mutex> lock(split_->mu);
  split_->line.calls = nullptr;
}

// The children's points go on this communicator's connection; what the
// rendezvous says about them waits for the child's own tick.
void CommWatch::tick_splits(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(splits_mu_);
  for (size_t i = 0; i < splits_.size();) {
    SplitReport& r = *splits_[i];
    std::lock_guard<std::mutex> line_lock(r.mu);
    if (r.line.calls == nullptr) {  // the child stopped
      splits_.erase(splits_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (!r.failure) r.failure = channel_->poll_split(now, r.line);
    ++i;
  }
}

std::optional<ChannelFailure> CommWatch::split_failure() {
  std::lock_guard<std::mutex> lock(split_->mu);
  std::optional<ChannelFailure> f;
  f.swap(split_->failure);
  return f;
}

void CommWatch::watch_tick(Clock::time_point now) {
  // The application may be capturing a CUDA graph on another thread in
  // global mode (torch.cuda.graph's default) while this thread queries
  // events. In CUDA's default mode such a call from any thread is refused
  // and invalidates that capture; relaxed mode, set once for this thread,
  // permits the queries and leaves the capture alone.
  static thread_local const bool relaxed = [] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    return cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
  }();
  (void)relaxed;
  core::Core* c = comm_;
  if (recorder_ != nullptr) {
    recorder_->calls().completed_through(
        completed(), std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
    if (const uint64_t asked = trace_requests(); asked != trace_requests_seen_) {
      trace_requests_seen_ = asked;
      write_recorder("SIGUSR1");
    }
  }
  const bool usable = core::usable(*c) && !c->abort_requested.load(std::memory_order_acquire);
  std::optional<ChannelFailure> peer;
  if (channel_) peer = channel_->poll(now, completed());  // heartbeats go on after a failure
  if (channel_) tick_splits(now);
  if (!peer && split_) peer = split_failure();
  if (!usable) {
    if (!core::usable(*c)) write_failure_trace();  // failed on another thread (a call's deadline, abort)
    return;
  }
  Failure f;
  if (c->parent != nullptr && !core::usable(*c->parent)) {
    const Status st = core::state_status("the parent communicator", *c->parent,
                                         /*for_caller=*/false);
    f.state = static_cast<core::State>(c->parent->state.load());
    f.story = "its parent communicator (cc_comm_split) failed: " + st.message;
  } else if (peer && peer->kind == ChannelFailure::Kind::mismatch) {
    f.state = core::State::mismatch;
    f.story = peer->story;
  } else if (peer) {
    f.state = core::State::peer_failed;
    f.story = peer->story + "; " + progress_words();
  } else {
    core::CallGuard guard(*c);
    if (c->abort_requested.load(std::memory_order_seq_cst)) return;
    if (!check_nccl(&f)) check_inflight(now, &f);
    if (f.state != core::State::ok && f.state != core::State::timed_out && channel_) {
      // NCCL often notices a dead peer first; the rendezvous says which one.
      const auto until = Clock::now() + milliseconds(300);
      while (!peer && Clock::now() < until) {
        peer = channel_->poll(Clock::now(), completed());
        if (!peer) std::this_thread::sleep_for(milliseconds(5));
      }
      if (peer && peer->kind == ChannelFailure::Kind::mismatch)
        f = {core::State::mismatch, peer->story, false};
      else if (peer)
        f = {core::State::peer_failed, peer->story + "; " + progress_words() + " (" + f.story + ")",
             false};
    }
  }
  if (f.state == core::State::ok) return;
  if (core::fail(*c, f.state, f.story)) {
    log().error("{}: {}", c->who(), f.story);
    if (f.tell_others && channel_) channel_->announce_abort(f.story);
    write_failure_trace();
  }
}

}  // namespace cc::watch
