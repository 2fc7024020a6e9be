// torch.distributed's backend "cc": c10d::Backend over a cc communicator.
//
// Each operation: check the tensors (CUDA, one device, dense, a dtype cc
// carries), create the communicator at the first one, order cc's stream
// after the caller's current stream (an event, no host wait), record the
// tensors' memory as used on cc's stream (so the caching allocator does not
// hand it out again before cc is done), queue the cc call, and return a Work
// whose end event is recorded on cc's stream. Failures are exceptions
// (torch.distributed.DistBackendError) carrying cc's message.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "comm_state.hpp"
#include "work.hpp"

namespace cc_torch {

class CCBackend final : public c10d::Backend {
 public:
  CCBackend(int rank, int size, Rendezvous rendezvous);
  // Around a communicator already made (shrink's new generation).
  explicit CCBackend(std::shared_ptr<CommState> state);
  ~CCBackend() override;

  const std::string getBackendName() const override { return "cc"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;

  // Operations between these two are fused into one cc group (used by
  // batch_isend_irecv and torch's coalescing manager).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Virtual in recent torch releases only; written without `override` so the
  // extension builds against releases with and without them (where they
  // exist, they override by name and signature all the same).
  bool supportsCoalescing() const { return true; }
  void shutdown();
  void abort();

  // dist.shrink_group: a Backend over the communicator's next generation
  // without `ranks_to_exclude` (group ranks), made by cc_comm_shrink. cc's
  // rendezvous leaves out the ranks that failed, so those must be the ones
  // asked for; a rank that is alive is refused with a message. shrink_flags:
  // torch's SHRINK_DEFAULT (0) or SHRINK_ABORT (1: the parent is aborted
  // before the shrink, its pending work stopped, so its destroy returns at
  // once). opts_override is not
  // used: the new generation keeps the parent's deadline.
  bool supportsShrinking() const { return CommState::can_shrink(); }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranks_to_exclude, int shrink_flags = 0,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts_override = nullptr);

  // The communicator's handle (0 before the first operation), for code that
  // shares it with cc.Comm-level calls.
  intptr_t comm_handle() const;

 private:
  // Queues one operation: `enqueue(comm, stream)` makes the cc call(s).
  template <class Enqueue>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, c10::Device device,
                                     const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs, Enqueue&& enqueue,
                                     bool host_wait = false);
  // The root rank of a rooted operation, checked against the group's size.
  int root_of(int64_t root, const char* op) const;
  // Ends an open coalescing block without running it: closes this thread's
  // cc group if the block opened one, and fails the block's Work. Called
  // with run_mutex_ held.
  void abandon_coalescing() noexcept;

  std::shared_ptr<CommState> state_;
  std::mutex run_mutex_;
  at::cuda::CUDAEvent order_event_;  // the caller's stream, recorded for cc's stream to wait on
  bool coalescing_ = false;
  bool group_open_ = false;       // cc_group_start called for the open coalescing block
  std::thread::id group_thread_;  // on this thread
  c10::intrusive_ptr<CCWork> coalesced_;
};

}  // namespace cc_torch
