#include "backend.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

namespace cc_torch {
namespace {

// One tensor as cc sees it: complex tensors travel as their real pairs, bool
// as bytes (reduced with max/min for or/and, as ProcessGroupNCCL does).
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  cc_datatype_t dtype = CC_FLOAT32;
  size_t element_size = 0;
  bool is_bool = false;
  bool is_complex = false;
};

std::string where(int rank, const char* op) {
  return std::string("cc backend (rank ") + std::to_string(rank) + ") " + op + ": ";
}

// torch's dtypes cc carries, and as what.
constexpr std::pair<at::ScalarType, cc_datatype_t> kDtypes[] = {
    {at::ScalarType::Char, CC_INT8},
    {at::ScalarType::Byte, CC_UINT8},
    {at::ScalarType::Bool, CC_UINT8},
    {at::ScalarType::Int, CC_INT32},
    {at::ScalarType::UInt32, CC_UINT32},
    {at::ScalarType::Long, CC_INT64},
    {at::ScalarType::UInt64, CC_UINT64},
    {at::ScalarType::Half, CC_FLOAT16},
    {at::ScalarType::BFloat16, CC_BFLOAT16},
    {at::ScalarType::Float, CC_FLOAT32},
    {at::ScalarType::ComplexFloat, CC_FLOAT32},
    {at::ScalarType::Double, CC_FLOAT64},
    {at::ScalarType::ComplexDouble, CC_FLOAT64},
    {at::ScalarType::Float8_e4m3fn, CC_FLOAT8_E4M3},
    {at::ScalarType::Float8_e5m2, CC_FLOAT8_E5M2},
};

cc_datatype_t dtype_of(at::ScalarType t, int rank, const char* op) {
  for (const auto& [torch_type, cc_type] : kDtypes)
    if (torch_type == t) return cc_type;
  fail(where(rank, op) + "dtype " + std::string(c10::toString(t)) +
       " is not one cc carries (int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, "
       "float32, float64, float8_e4m3fn, float8_e5m2, bool, complex64, complex128)");
}

// `elementwise` operations (all-reduce, broadcast, send, ...) accept any dense
// layout, the same on every rank; the others need row-major contiguity.
Buffer buffer_of(const at::Tensor& t, int rank, const char* op, bool elementwise) {
  if (!t.defined()) fail(where(rank, op) + "a tensor is undefined");
  if (!t.is_cuda())
    fail(where(rank, op) + "the tensor is on " + t.device().str() +
         "; the cc backend serves CUDA tensors. Move it with .cuda(), or give CPU tensors their "
         "own backend: init_process_group(\"cpu:gloo,cuda:cc\")");
  if (t.is_sparse()) fail(where(rank, op) + "sparse tensors are not supported");
  const bool dense = elementwise ? t.is_non_overlapping_and_dense() : t.is_contiguous();
  if (!dense)
    fail(where(rank, op) + "the tensor is not contiguous (sizes " + list_of(t.sizes()) +
         ", strides " + list_of(t.strides()) + "): pass tensor.contiguous()");
  Buffer b;
  b.dtype = dtype_of(t.scalar_type(), rank, op);
  b.is_bool = t.scalar_type() == at::ScalarType::Bool;
  b.is_complex = t.is_complex();
  b.data = t.data_ptr();
  b.count = static_cast<size_t>(t.numel()) * (b.is_complex ? 2 : 1);
  b.element_size = static_cast<size_t>(t.element_size()) / (b.is_complex ? 2 : 1);
  return b;
}

// The tensor of an operation that takes one per process (all-reduce,
// broadcast, reduce, send, recv), as cc sees it.
Buffer single_buffer(const std::vector<at::Tensor>& tensors, int rank, const char* op) {
  if (tensors.size() != 1)
    fail(where(rank, op) + "takes one tensor per process, got " + std::to_string(tensors.size()));
  return buffer_of(tensors[0], rank, op, true);
}

cc_redop_t op_of(const c10d::ReduceOp& reduce_op, const Buffer& b, int rank, const char* op) {
  switch (reduce_op.op_) {
    case c10d::ReduceOp::SUM:
      return b.is_bool ? CC_MAX : CC_SUM;
    case c10d::ReduceOp::AVG:
      if (b.is_bool) break;
      return CC_AVG;
    case c10d::ReduceOp::PRODUCT:
      if (b.is_complex) break;
      return b.is_bool ? CC_MIN : CC_PROD;
    case c10d::ReduceOp::MIN:
      if (b.is_complex) break;
      return CC_MIN;
    case c10d::ReduceOp::MAX:
      if (b.is_complex) break;
      return CC_MAX;
    default:
      break;
  }
  fail(where(rank, op) +
       "this reduction is not one cc has for this dtype (cc has SUM, AVG, "
       "PRODUCT, MIN, MAX; complex tensors SUM and AVG; bool SUM and PRODUCT)");
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, int rank, const char* op) {
  if (a.scalar_type() != b.scalar_type())
    fail(where(rank, op) + "input is " + std::string(c10::toString(a.scalar_type())) +
         " but output is " + std::string(c10::toString(b.scalar_type())) + ": they must match");
}

// The one CUDA device all tensors live on.
c10::Device device_of(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, int rank,
                      const char* op) {
  const at::Tensor* first = !a.empty() ? &a.front() : (!b.empty() ? &b.front() : nullptr);
  if (first == nullptr) fail(where(rank, op) + "no tensor was given");
  if (!first->is_cuda()) buffer_of(*first, rank, op, true);  // fails with the message
  const c10::Device device = first->device();
  for (const auto* list : {&a, &b})
    for (const auto& t : *list)
      if (t.device() != device)
        fail(where(rank, op) + "tensors on " + device.str() + " and " + t.device().str() +
             ": one operation's tensors must share one CUDA device");
  return device;
}

// The list a rooted operation takes on its root alone (gather's outputs,
// scatter's inputs): one tensor per rank, each of the dtype and element
// count of `single`, the rank's one tensor on the other side; the other
// ranks pass none (as with ProcessGroupNCCL).
enum class ListOf { inputs, outputs };
struct RootList {
  std::vector<at::Tensor> tensors;  // empty off the root
  std::vector<Buffer> buffers;
};
RootList root_list(const std::vector<std::vector<at::Tensor>>& lists, ListOf of,
                   const at::Tensor& single, int root, int rank, int size, const char* op) {
  const bool outputs = of == ListOf::outputs;
  const char* side = outputs ? "output" : "input";
  RootList list;
  if (rank != root) {
    if (!lists.empty())
      fail(text(where(rank, op), "only the root (rank ", root, ") takes an ", side, " list; pass ",
                op, "_list=None on the other ranks"));
    return list;
  }
  if (!(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size)))
    fail(text(where(rank, op), "the root needs one ", side, " list of ", size,
              " tensors (one per rank), got ",
              lists.empty() ? std::string("none")
                            : text(lists.size(), " list(s), the first of ", lists[0].size())));
  list.tensors = lists[0];
  for (const auto& t : list.tensors) {
    same_dtype(outputs ? single : t, outputs ? t : single, rank, op);
    list.buffers.push_back(buffer_of(t, rank, op, false));
    if (t.numel() != single.numel())
      fail(text(where(rank, op), "each ", side, " needs as many elements as the ",
                outputs ? "input" : "output", " (", single.numel(), "); one has ", t.numel()));
  }
  return list;
}

// The (input, output) buffers of a coalesced operation, one pair per
// operation; the larger side of each pair holds world size times the
// other's elements (the output for all-gathers, the input for
// reduce-scatters).
enum class Larger { input, output };
std::vector<std::pair<Buffer, Buffer>> buffer_pairs(const std::vector<at::Tensor>& inputs,
                                                    const std::vector<at::Tensor>& outputs,
                                                    Larger larger, int rank, int size,
                                                    const char* op) {
  if (outputs.size() != inputs.size())
    fail(where(rank, op) + "needs as many outputs (" + std::to_string(outputs.size()) +
         ") as inputs (" + std::to_string(inputs.size()) + ")");
  std::vector<std::pair<Buffer, Buffer>> pairs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    same_dtype(inputs[i], outputs[i], rank, op);
    const Buffer in = buffer_of(inputs[i], rank, op, false);
    const Buffer out = buffer_of(outputs[i], rank, op, false);
    const bool input_larger = larger == Larger::input;
    const size_t big = input_larger ? in.count : out.count;
    const size_t small = input_larger ? out.count : in.count;
    if (big != small * static_cast<size_t>(size))
      fail(where(rank, op) + (input_larger ? "input " : "output ") + std::to_string(i) +
           " needs world size times " + (input_larger ? "output " : "input ") + std::to_string(i) +
           "'s elements");
    pairs.emplace_back(in, out);
  }
  return pairs;
}

void check(cc_result_t r, const char* call) {
  if (r != CC_SUCCESS) fail(call, r);
}

// Makes count calls, call(i) for i in [0, count), fused into one cc group
// (one launch); stops at the first that fails, still ends the group (so
// this thread's group nesting stays balanced) and throws that call's message,
// `what` naming it.
template <class Call>
void fused(size_t count, const char* what, Call&& call) {
  check(api().group_start(), "cc backend: cc_group_start");
  cc_result_t r = CC_SUCCESS;
  for (size_t i = 0; i < count && r == CC_SUCCESS; ++i) r = call(i);
  const std::string failed = r != CC_SUCCESS ? words(what, r) : "";
  const cc_result_t end = api().group_end();
  if (!failed.empty()) fail("cc backend: " + failed);
  check(end, "cc backend: cc_group_end");
}

// torch's shrink flags (distributed_c10d.SHRINK_DEFAULT, SHRINK_ABORT: NCCL's values).
constexpr int kShrinkDefault = 0;
constexpr int kShrinkAbort = 1;

char* at_element(const Buffer& b, size_t index) {
  return static_cast<char*>(b.data) + index * b.element_size;
}

}  // namespace

#ifdef __clang__
#pragma clang diagnostic ignored "-Winconsistent-missing-override"
#endif

CCBackend::CCBackend(int rank, int size, Rendezvous rendezvous)
    : c10d::Backend(rank, size),
      state_(std::make_shared<CommState>(rank, size, std::move(rendezvous))) {
  init();
}

CCBackend::CCBackend(std::shared_ptr<CommState> state)
    : c10d::Backend(state->rank(), state->size()), state_(std::move(state)) {
  init();
}

CCBackend::~CCBackend() = default;  // state_ destroys the communicator and the server

intptr_t CCBackend::comm_handle() const { return reinterpret_cast<intptr_t>(state_->handle()); }

template <class Enqueue>
c10::intrusive_ptr<c10d::Work> CCBackend::run(c10d::OpType type, c10::Device device,
                                              const std::vector<at::Tensor>& inputs,
                                              const std::vector<at::Tensor>& outputs,
                                              Enqueue&& enqueue, bool host_wait) {
  // One operation at a time: the ordering event and the coalescing state are shared.
  std::lock_guard<std::mutex> lock(run_mutex_);
  cc_comm_t comm = state_->comm(device.index());
  c10::cuda::CUDAGuard guard(device);
  const c10::cuda::CUDAStream& stream = state_->stream();
  // cc's stream waits for what the caller queued so far (ProcessGroupNCCL's syncStream).
  order_event_.record(c10::cuda::getCurrentCUDAStream(device.index()));
  order_event_.block(stream);
  // The memory is in use on cc's stream until the operation is done there.
  for (const auto* list : {&inputs, &outputs})
    for (const auto& t : *list)
      if (t.numel() > 0)
        c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  if (coalescing_) {
    // A failure inside a block ends it here: torch does not call
    // endCoalescing after an exception, and a cc group left open on this
    // thread would swallow every later cc call of this thread, on any
    // communicator (the destroy of this one included).
    try {
      if (!group_open_) {
        check(api().group_start(), "cc backend: cc_group_start");
        group_open_ = true;
        group_thread_ = std::this_thread::get_id();
      }
      enqueue(comm, stream.stream());
    } catch (...) {
      abandon_coalescing();
      throw;
    }
    if (!coalesced_)
      coalesced_ =
          c10::make_intrusive<CCWork>(rank_, c10d::OpType::COALESCED, device, state_, false);
    coalesced_->add_outputs(outputs);
    return coalesced_;
  }
  enqueue(comm, stream.stream());
  auto work = c10::make_intrusive<CCWork>(rank_, type, device, state_, host_wait);
  work->add_outputs(outputs);
  work->enqueued(stream);
  return work;
}

// ------------------------------------------------------------- collectives

c10::intrusive_ptr<c10d::Work> CCBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::AllreduceOptions& opts) {
  const char* op = "allreduce";
  const Buffer b = single_buffer(tensors, rank_, op);
  const cc_redop_t redop = op_of(opts.reduceOp, b, rank_, op);
  return run(c10d::OpType::ALLREDUCE, tensors[0].device(), tensors, tensors,
             [&](cc_comm_t comm, cudaStream_t s) {
               check(api().allreduce(b.data, b.data, b.count, b.dtype, redop, comm, s),
                     "cc backend: cc_allreduce");
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* op = "allreduce_coalesced";
  std::vector<Buffer> buffers;
  std::vector<cc_redop_t> redops;
  for (const auto& t : tensors) {
    buffers.push_back(buffer_of(t, rank_, op, true));
    redops.push_back(op_of(opts.reduceOp, buffers.back(), rank_, op));
  }
  return run(c10d::OpType::ALLREDUCE_COALESCED, device_of(tensors, {}, rank_, op), tensors, tensors,
             [&](cc_comm_t comm, cudaStream_t s) {
               fused(buffers.size(), "cc_allreduce", [&](size_t i) {
                 const Buffer& b = buffers[i];
                 return api().allreduce(b.data, b.data, b.count, b.dtype, redops[i], comm, s);
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                    const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  const Buffer b = single_buffer(tensors, rank_, op);
  const int root = static_cast<int>(opts.rootRank + opts.rootTensor);
  return run(c10d::OpType::BROADCAST, tensors[0].device(), tensors, tensors,
             [&](cc_comm_t comm, cudaStream_t s) {
               check(api().broadcast(b.data, b.data, b.count, b.dtype, root, comm, s),
                     "cc backend: cc_broadcast");
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::reduce(std::vector<at::Tensor>& tensors,
                                                 const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  const Buffer b = single_buffer(tensors, rank_, op);
  const cc_redop_t redop = op_of(opts.reduceOp, b, rank_, op);
  const int root = static_cast<int>(opts.rootRank + opts.rootTensor);
  return run(c10d::OpType::REDUCE, tensors[0].device(), tensors, tensors,
             [&](cc_comm_t comm, cudaStream_t s) {
               check(api().reduce(b.data, b.data, b.count, b.dtype, redop, root, comm, s),
                     "cc backend: cc_reduce");
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "allgather";
  if (!(inputs.size() == 1 && outputs.size() == 1))
    fail(text(where(rank_, op), "takes one input and one output list per process"));
  if (!(static_cast<int>(outputs[0].size()) == size_))
    fail(text(where(rank_, op), "the output list holds ", outputs[0].size(),
              " tensors; it needs one per rank (", size_, ")"));
  const Buffer in = buffer_of(inputs[0], rank_, op, false);
  std::vector<Buffer> outs;
  for (const auto& t : outputs[0]) {
    same_dtype(inputs[0], t, rank_, op);
    outs.push_back(buffer_of(t, rank_, op, false));
  }
  // Output i holds rank i's input, so sizes may differ from rank to rank
  // (all_gather_v, as ProcessGroupNCCL serves it); this rank's own slot
  // must hold its input.
  const auto self = static_cast<size_t>(rank_);
  if (!(outs[self].count == in.count))
    fail(text(where(rank_, op), "output ", rank_, " (this rank's) has ",
              outputs[0][self].numel(), " elements; it receives this rank's input, which has ",
              inputs[0].numel()));
  // One broadcast from each rank into its slot, of that slot's size, fused
  // into one launch.
  return run(c10d::OpType::ALLGATHER, device_of(inputs, outputs[0], rank_, op), inputs, outputs[0],
             [&](cc_comm_t comm, cudaStream_t s) {
               fused(outs.size(), "cc_broadcast", [&](size_t root) {
                 return api().broadcast(in.data, outs[root].data, outs[root].count, in.dtype,
                                        static_cast<int>(root), comm, s);
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                          const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "all_gather_into_tensor";
  same_dtype(input, output, rank_, op);
  const Buffer in = buffer_of(input, rank_, op, false);
  const Buffer out = buffer_of(output, rank_, op, false);
  if (!(out.count == in.count * static_cast<size_t>(size_)))
    fail(text(where(rank_, op), "the output has ", output.numel(),
              " elements; it needs world size (", size_, ") times the input's ", input.numel()));
  return run(c10d::OpType::_ALLGATHER_BASE, device_of({input}, {output}, rank_, op), {input},
             {output}, [&](cc_comm_t comm, cudaStream_t s) {
               check(api().allgather(in.data, out.data, in.count, in.dtype, comm, s),
                     "cc backend: cc_allgather");
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "allgather_into_tensor_coalesced";
  const auto pairs = buffer_pairs(inputs, outputs, Larger::output, rank_, size_, op);
  return run(c10d::OpType::COALESCED, device_of(inputs, outputs, rank_, op), inputs, outputs,
             [&](cc_comm_t comm, cudaStream_t s) {
               fused(pairs.size(), "cc_allgather", [&](size_t i) {
                 const auto& [src, dst] = pairs[i];
                 return api().allgather(src.data, dst.data, src.count, src.dtype, comm, s);
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  if (!(outputs.size() == 1 && inputs.size() == 1))
    fail(text(where(rank_, op), "takes one output and one input list per process"));
  if (!(static_cast<int>(inputs[0].size()) == size_))
    fail(text(where(rank_, op), "the input list holds ", inputs[0].size(),
              " tensors; it needs one per rank (", size_, ")"));
  const Buffer out = buffer_of(outputs[0], rank_, op, false);
  const cc_redop_t redop = op_of(opts.reduceOp, out, rank_, op);
  std::vector<Buffer> ins;
  for (const auto& t : inputs[0]) {
    same_dtype(t, outputs[0], rank_, op);
    ins.push_back(buffer_of(t, rank_, op, false));
  }
  // Input i is reduced into rank i's output, so sizes may differ from rank to
  // rank (reduce_scatter_v, as ProcessGroupNCCL serves it); this rank's own
  // slot must match its output.
  const auto self = static_cast<size_t>(rank_);
  if (!(ins[self].count == out.count))
    fail(text(where(rank_, op), "input ", rank_, " (this rank's) has ", inputs[0][self].numel(),
              " elements; it is reduced into this rank's output, which has ",
              outputs[0].numel()));
  // One reduce to each rank from its slot, of that slot's size, fused into
  // one launch. The receive buffer matters on the root only; elsewhere it is
  // the slot itself, which has the right size (as in ProcessGroupNCCL).
  return run(c10d::OpType::REDUCE_SCATTER, device_of(inputs[0], outputs, rank_, op), inputs[0],
             outputs, [&](cc_comm_t comm, cudaStream_t s) {
               fused(ins.size(), "cc_reduce", [&](size_t root) {
                 void* into = root == self ? out.data : ins[root].data;
                 return api().reduce(ins[root].data, into, ins[root].count, out.dtype, redop,
                                     static_cast<int>(root), comm, s);
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  same_dtype(input, output, rank_, op);
  const Buffer in = buffer_of(input, rank_, op, false);
  const Buffer out = buffer_of(output, rank_, op, false);
  const cc_redop_t redop = op_of(opts.reduceOp, out, rank_, op);
  if (!(in.count == out.count * static_cast<size_t>(size_)))
    fail(text(where(rank_, op), "the input has ", input.numel(), " elements; it needs world size (",
              size_, ") times the output's ", output.numel()));
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, device_of({input}, {output}, rank_, op), {input},
             {output}, [&](cc_comm_t comm, cudaStream_t s) {
               check(api().reducescatter(in.data, out.data, out.count, out.dtype, redop, comm, s),
                     "cc backend: cc_reducescatter");
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor_coalesced";
  const auto pairs = buffer_pairs(inputs, outputs, Larger::input, rank_, size_, op);
  std::vector<cc_redop_t> redops;
  for (const auto& pair : pairs) redops.push_back(op_of(opts.reduceOp, pair.second, rank_, op));
  return run(c10d::OpType::COALESCED, device_of(inputs, outputs, rank_, op), inputs, outputs,
             [&](cc_comm_t comm, cudaStream_t s) {
               fused(pairs.size(), "cc_reducescatter", [&](size_t i) {
                 const auto& [src, dst] = pairs[i];
                 return api().reducescatter(src.data, dst.data, dst.count, dst.dtype, redops[i],
                                            comm, s);
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                        std::vector<int64_t>& output_split_sizes,
                                                        std::vector<int64_t>& input_split_sizes,
                                                        const c10d::AllToAllOptions& /*opts*/) {
  const char* op = "all_to_all_single";
  same_dtype(input, output, rank_, op);
  const Buffer in = buffer_of(input, rank_, op, false);
  const Buffer out = buffer_of(output, rank_, op, false);
  const c10::Device device = device_of({input}, {output}, rank_, op);
  const auto n = static_cast<size_t>(size_);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    if (!(in.count == out.count && in.count % n == 0))
      fail(text(where(rank_, op),
                "input and output need the same number of elements, divisible by the world size ",
                size_, " (input ", input.numel(), ", output ", output.numel(), ")"));
    return run(c10d::OpType::ALLTOALL_BASE, device, {input}, {output},
               [&](cc_comm_t comm, cudaStream_t s) {
                 check(api().alltoall(in.data, out.data, in.count / n, in.dtype, comm, s),
                       "cc backend: cc_alltoall");
               });
  }
  // Uneven splits (in rows of dim 0): one send and one receive per peer, fused.
  struct Slice {
    size_t at = 0;  // first element
    size_t count = 0;
  };
  auto slices = [&](const std::vector<int64_t>& splits, const at::Tensor& t, const Buffer& b,
                    const char* which) {
    if (!(splits.empty() || splits.size() == n))
      fail(text(where(rank_, op), which, " split sizes need one entry per rank (", size_, "), got ",
                splits.size()));
    std::vector<Slice> out_slices(n);
    const size_t rows = t.dim() > 0 ? static_cast<size_t>(t.size(0)) : 1;
    const size_t row = rows > 0 ? b.count / rows : 0;
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const size_t split = splits.empty() ? rows / n : static_cast<size_t>(splits[i]);
      out_slices[i] = {total * row, split * row};
      total += split;
    }
    if (!(total == rows))
      fail(text(where(rank_, op), which, " split sizes add up to ", total,
                " rows but the tensor has ", rows));
    return out_slices;
  };
  const std::vector<Slice> send = slices(input_split_sizes, input, in, "input");
  const std::vector<Slice> recv = slices(output_split_sizes, output, out, "output");
  return run(
      c10d::OpType::ALLTOALL_BASE, device, {input}, {output}, [&](cc_comm_t comm, cudaStream_t s) {
        fused(n, "cc_send/cc_recv", [&](size_t peer) {
          const int p = static_cast<int>(peer);
          cc_result_t r = CC_SUCCESS;
          if (send[peer].count > 0)
            r = api().send(at_element(in, send[peer].at), send[peer].count, in.dtype, p, comm, s);
          if (r == CC_SUCCESS && recv[peer].count > 0)
            r = api().recv(at_element(out, recv[peer].at), recv[peer].count, out.dtype, p, comm, s);
          return r;
        });
      });
}

c10::intrusive_ptr<c10d::Work> CCBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::AllToAllOptions& /*opts*/) {
  const char* op = "all_to_all";
  const auto n = static_cast<size_t>(size_);
  if (!(inputs.size() == n && outputs.size() == n))
    fail(text(where(rank_, op), "takes one input and one output tensor per rank (", size_,
              "), got ", inputs.size(), " inputs and ", outputs.size(), " outputs"));
  std::vector<Buffer> sends, recvs;
  for (size_t i = 0; i < n; ++i) {
    same_dtype(inputs[0], inputs[i], rank_, op);
    same_dtype(inputs[0], outputs[i], rank_, op);
    sends.push_back(buffer_of(inputs[i], rank_, op, false));
    recvs.push_back(buffer_of(outputs[i], rank_, op, false));
  }
  // Input i goes to rank i, output i comes from rank i (sizes may differ
  // pair by pair): one send and one receive per peer, this rank included,
  // fused into one launch; empty tensors are left out on both sides.
  return run(c10d::OpType::ALLTOALL, device_of(inputs, outputs, rank_, op), inputs, outputs,
             [&](cc_comm_t comm, cudaStream_t s) {
               fused(n, "cc_send/cc_recv", [&](size_t peer) {
                 const int p = static_cast<int>(peer);
                 cc_result_t r = CC_SUCCESS;
                 if (sends[peer].count > 0)
                   r = api().send(sends[peer].data, sends[peer].count, sends[peer].dtype, p, comm,
                                  s);
                 if (r == CC_SUCCESS && recvs[peer].count > 0)
                   r = api().recv(recvs[peer].data, recvs[peer].count, recvs[peer].dtype, p, comm,
                                  s);
                 return r;
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                 std::vector<at::Tensor>& inputs,
                                                 const c10d::GatherOptions& opts) {
  const char* op = "gather";
  const int root = root_of(opts.rootRank, op);
  if (inputs.size() != 1)
    fail(text(where(rank_, op), "takes one input tensor per process, got ", inputs.size()));
  const Buffer in = buffer_of(inputs[0], rank_, op, false);
  const RootList gathered = root_list(outputs, ListOf::outputs, inputs[0], root, rank_, size_, op);
  const std::vector<Buffer>& outs = gathered.buffers;
  // The root receives each rank's input into that rank's output (its own
  // through a send to itself); every other rank sends its input to the
  // root. Fused into one launch.
  return run(c10d::OpType::GATHER, device_of(inputs, gathered.tensors, rank_, op), inputs,
             gathered.tensors, [&](cc_comm_t comm, cudaStream_t s) {
               if (rank_ != root) {
                 fused(in.count > 0 ? size_t{1} : size_t{0}, "cc_send", [&](size_t) {
                   return api().send(in.data, in.count, in.dtype, root, comm, s);
                 });
                 return;
               }
               fused(outs.size(), "cc_send/cc_recv", [&](size_t peer) {
                 const int p = static_cast<int>(peer);
                 cc_result_t r = CC_SUCCESS;
                 if (outs[peer].count == 0) return r;
                 if (p == root) r = api().send(in.data, in.count, in.dtype, p, comm, s);
                 if (r == CC_SUCCESS)
                   r = api().recv(outs[peer].data, outs[peer].count, outs[peer].dtype, p, comm, s);
                 return r;
               });
             });
}

c10::intrusive_ptr<c10d::Work> CCBackend::scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  const int root = root_of(opts.rootRank, op);
  if (outputs.size() != 1)
    fail(text(where(rank_, op), "takes one output tensor per process, got ", outputs.size()));
  const Buffer out = buffer_of(outputs[0], rank_, op, false);
  const RootList scattered = root_list(inputs, ListOf::inputs, outputs[0], root, rank_, size_, op);
  const std::vector<Buffer>& ins = scattered.buffers;
  // The root sends input i to rank i (its own through a send to itself);
  // every rank receives its output from the root. Fused into one launch.
  return run(c10d::OpType::SCATTER, device_of(scattered.tensors, outputs, rank_, op),
             scattered.tensors, outputs, [&](cc_comm_t comm, cudaStream_t s) {
               if (rank_ != root) {
                 fused(out.count > 0 ? size_t{1} : size_t{0}, "cc_recv", [&](size_t) {
                   return api().recv(out.data, out.count, out.dtype, root, comm, s);
                 });
                 return;
               }
               fused(ins.size(), "cc_send/cc_recv", [&](size_t peer) {
                 const int p = static_cast<int>(peer);
                 cc_result_t r = CC_SUCCESS;
                 if (ins[peer].count == 0) return r;
                 r = api().send(ins[peer].data, ins[peer].count, ins[peer].dtype, p, comm, s);
                 if (r == CC_SUCCESS && p == root)
                   r = api().recv(out.data, out.count, out.dtype, p, comm, s);
                 return r;
               });
             });
}

int CCBackend::root_of(int64_t root, const char* op) const {
  if (!(root >= 0 && root < size_))
    fail(text(where(rank_, op), "root rank ", root, " is outside the group's ranks [0, ", size_,
              ")"));
  return static_cast<int>(root);
}

c10::intrusive_ptr<c10d::Work> CCBackend::barrier(const c10d::BarrierOptions& opts) {
  // The device: the group's, once it has one; else the one asked for; else
  // the one torch binds the group to; else the caller's current device.
  c10::DeviceIndex index;
  if (state_->created())
    index = state_->device();
  else if (!opts.device_ids.empty())
    index = static_cast<c10::DeviceIndex>(opts.device_ids.front());
  else if (getBoundDeviceId().has_value())
    index = getBoundDeviceId()->index();
  else
    index = c10::cuda::current_device();
  const c10::Device device(c10::DeviceType::CUDA, index);
  // Like ProcessGroupNCCL's barrier, wait() blocks the host until all arrived.
  return run(
      c10d::OpType::BARRIER, device, {}, {},
      [&](cc_comm_t comm, cudaStream_t s) {
        check(api().barrier(comm, s), "cc backend: cc_barrier");
      },
      /*host_wait=*/true);
}

// ------------------------------------------------------------- point to point

c10::intrusive_ptr<c10d::Work> CCBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                               int /*tag*/) {
  const char* op = "send";
  const Buffer b = single_buffer(tensors, rank_, op);
  return run(
      c10d::OpType::SEND, tensors[0].device(), tensors, {}, [&](cc_comm_t comm, cudaStream_t s) {
        check(api().send(b.data, b.count, b.dtype, dst_rank, comm, s), "cc backend: cc_send");
      });
}

c10::intrusive_ptr<c10d::Work> CCBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                               int /*tag*/) {
  const char* op = "recv";
  const Buffer b = single_buffer(tensors, rank_, op);
  return run(
      c10d::OpType::RECV, tensors[0].device(), {}, tensors, [&](cc_comm_t comm, cudaStream_t s) {
        check(api().recv(b.data, b.count, b.dtype, src_rank, comm, s), "cc backend: cc_recv");
      });
}

// ------------------------------------------------------------- coalescing

void CCBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (coalescing_) {
    // The last block never ended (its caller raised before endCoalescing):
    // what it queued is dropped rather than fused into this one.
    const std::string warning = where(rank_, "startCoalescing") +
                                "the previous coalescing block was never ended; its operations "
                                "are dropped";
    TORCH_WARN(warning);  // one std::string: c10::str passes it through without a stream
    abandon_coalescing();
  }
  coalescing_ = true;
  group_open_ = false;  // opened by the first operation, after the communicator exists
  coalesced_.reset();
}

c10::intrusive_ptr<c10d::Work> CCBackend::endCoalescing() {
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (!coalescing_)
    fail(text(where(rank_, "endCoalescing"),
              "no coalescing block is open (an operation that fails inside one ends it)"));
  coalescing_ = false;
  auto work = std::move(coalesced_);
  if (group_open_) {
    group_open_ = false;
    check(api().group_end(), "cc backend: cc_group_end");
  }
  if (!work) {  // an empty block
    const c10::Device device(c10::DeviceType::CUDA,
                             state_->created() ? state_->device() : c10::cuda::current_device());
    auto empty = c10::make_intrusive<CCWork>(rank_, c10d::OpType::COALESCED, device, state_, false);
    empty->nothing_queued();
    return empty;
  }
  work->enqueued(state_->stream());
  return work;
}

void CCBackend::abandon_coalescing() noexcept {
  if (coalesced_)
    coalesced_->never_queued(where(rank_, "coalescing block") +
                             "the block ended without endCoalescing (an operation in it failed, "
                             "or its caller raised), so none of its operations ran");
  // cc's groups belong to a thread: only the one that opened it ends it
  // (its result only repeats the failure that got us here). On another
  // thread the open group cannot be reached; it stays that thread's.
  if (group_open_ && group_thread_ == std::this_thread::get_id()) (void)api().group_end();
  group_open_ = false;
  coalescing_ = false;
  coalesced_.reset();
}

// ------------------------------------------------------------- life

void CCBackend::shutdown() {
  std::string mismatch;
  {
    // Not while an operation is being queued (libcc's calls on one
    // communicator must not overlap its destroy), and never inside a cc group.
    std::lock_guard<std::mutex> lock(run_mutex_);
    abandon_coalescing();
    mismatch = state_->shutdown();
  }
  // destroy_process_group raises what the ranks' last calls showed: a
  // desync just before the end is never silent.
  if (!mismatch.empty()) fail(mismatch);
}

void CCBackend::abort() { state_->abort(); }

// ------------------------------------------------------------- shrink

c10::intrusive_ptr<c10d::Backend> CCBackend::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<c10d::Backend::Options>& /*opts_override*/) {
  const char* op = "shrink";
  if (!(shrink_flags == kShrinkDefault || shrink_flags == kShrinkAbort))
    fail(text(where(rank_, op), "shrink_flags ", shrink_flags,
              " is neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1)"));
  std::vector<int64_t> excluded(ranks_to_exclude);
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  if (excluded.empty()) fail(text(where(rank_, op), "no rank to exclude was given"));
  for (const int64_t r : excluded)
    if (!(r >= 0 && r < size_))
      fail(text(where(rank_, op), "rank ", r, " is outside the group's ranks [0, ", size_, ")"));
  if (!(excluded.size() < static_cast<size_t>(size_)))
    fail(text(where(rank_, op), "cannot exclude every rank of the group"));
  if (std::binary_search(excluded.begin(), excluded.end(), static_cast<int64_t>(rank_)))
    fail(text(where(rank_, op),
              "this rank is among those to exclude; only the ranks that stay call shrink_group"));
  // No operation is queued meanwhile, and an open coalescing block ends here.
  std::lock_guard<std::mutex> lock(run_mutex_);
  abandon_coalescing();
  return c10::make_intrusive<CCBackend>(state_->shrink(excluded, shrink_flags == kShrinkAbort));
}

}  // namespace cc_torch
