// Stand-ins for the part of torch's C++ API that cc.torch's extension
// (python/cc/torch/csrc) uses, for compiling it where torch is absent
// (test_torch_support.ExtensionSources): the c10d::Backend and c10d::Work
// virtuals with the signatures torch 2.11's Backend.hpp and Work.hpp give
// them, and the option structs' fields the extension reads. Bodies are
// placeholders; only the declarations matter (test_torch_support's
// shutdown test also runs comm_state.cpp against them). When the extension
// uses more of torch, declare it here as torch does.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
typedef struct CUstream_st* cudaStream_t;
namespace c10 {
using DeviceIndex = int8_t;
enum class DeviceType { CPU, CUDA };
struct Device {
  Device(DeviceType, DeviceIndex = -1) {}
  DeviceType type() const { return DeviceType::CUDA; }
  DeviceIndex index() const { return 0; }
  bool has_index() const { return true; }
  std::string str() const { return ""; }
  bool operator==(const Device&) const { return true; }
  bool operator!=(const Device&) const { return false; }
};
template <class T> struct ArrayRef {
  ArrayRef(const std::vector<T>&) {}
  size_t size() const { return 0; }
  const T& operator[](size_t) const { static T t; return t; }
};
using IntArrayRef = ArrayRef<int64_t>;
struct intrusive_ptr_target { virtual ~intrusive_ptr_target() = default; };
template <class T> class intrusive_ptr {
 public:
  intrusive_ptr() = default;
  intrusive_ptr(std::nullptr_t) {}
  template <class U> intrusive_ptr(const intrusive_ptr<U>& o) : p_(o.p_) {}
  T* get() const { return p_.get(); }
  T* operator->() const { return p_.get(); }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return bool(p_); }
  void reset() { p_.reset(); }
  std::shared_ptr<T> p_;
};
template <class T, class... A> intrusive_ptr<T> make_intrusive(A&&... a) {
  intrusive_ptr<T> r; r.p_ = std::make_shared<T>(std::forward<A>(a)...); return r;
}
enum class ScalarType { Byte, Char, Short, Int, Long, Half, Float, Double, ComplexHalf, ComplexFloat, ComplexDouble, Bool, BFloat16, Float8_e5m2, Float8_e4m3fn, UInt16, UInt32, UInt64 };
inline const char* toString(ScalarType) { return ""; }
struct DataPtr {};
struct Storage { const DataPtr& data_ptr() const { static DataPtr d; return d; } };
// As torch's: a message (what()); Python sees it as a RuntimeError.
class DistBackendError : public std::runtime_error {
 public:
  explicit DistBackendError(const std::string& message = "") : std::runtime_error(message) {}
};
struct Type { };
using TypePtr = std::shared_ptr<Type>;
struct TensorType { static TypePtr get() { return {}; } };
struct ListType { static TypePtr create(TypePtr) { return {}; } };
template <class... A> std::string str(const A&...) { return ""; }
}  // namespace c10
#define C10_THROW_ERROR(err_type, msg) throw ::c10::err_type(msg)
#define TORCH_WARN(...) (void)0
#define TORCH_CHECK(cond, ...) (void)(cond)
namespace at {
using c10::ScalarType;
using c10::Device;
struct Tensor {
  bool defined() const { return true; }
  bool is_cuda() const { return true; }
  bool is_sparse() const { return false; }
  bool is_complex() const { return false; }
  bool is_contiguous() const { return true; }
  bool is_non_overlapping_and_dense() const { return true; }
  c10::Device device() const { return c10::Device(c10::DeviceType::CUDA, 0); }
  c10::IntArrayRef sizes() const { return std::vector<int64_t>{}; }
  c10::IntArrayRef strides() const { return std::vector<int64_t>{}; }
  ScalarType scalar_type() const { return ScalarType::Float; }
  void* data_ptr() const { return nullptr; }
  int64_t numel() const { return 0; }
  int64_t element_size() const { return 4; }
  int64_t dim() const { return 1; }
  int64_t size(int64_t) const { return 0; }
  c10::Storage storage() const { return {}; }
};
}  // namespace at
namespace c10 {
struct IValue { IValue(std::vector<at::Tensor>) {} };
namespace ivalue {
struct Future : intrusive_ptr_target {
  Future(TypePtr, std::vector<Device>) {}
  void markCompleted(IValue) {}
  void setError(std::exception_ptr) {}
  bool completed() const { return false; }
};
}  // namespace ivalue
namespace cuda {
struct CUDAStream { cudaStream_t stream() const { return nullptr; } DeviceIndex device_index() const { return 0; } };
inline CUDAStream getCurrentCUDAStream(DeviceIndex = -1) { return {}; }
inline CUDAStream getStreamFromPool(bool = false, DeviceIndex = -1) { return {}; }
inline DeviceIndex current_device() { return 0; }
struct CUDAGuard { explicit CUDAGuard(Device) {} explicit CUDAGuard(DeviceIndex) {} };
struct CUDAStreamGuard { explicit CUDAStreamGuard(const CUDAStream&) {} };
namespace CUDACachingAllocator { inline void recordStream(const DataPtr&, CUDAStream) {} }
}  // namespace cuda
}  // namespace c10
namespace at::cuda {
struct CUDAEvent {
  void record(const c10::cuda::CUDAStream&) {}
  void block(const c10::cuda::CUDAStream&) {}
  bool query() const { return true; }
};
}  // namespace at::cuda
namespace torch { using CustomClassHolder = c10::intrusive_ptr_target; }
namespace c10d {
constexpr auto kUnsetTimeout = std::chrono::milliseconds(-1);
enum class OpType : std::uint8_t { BROADCAST, ALLREDUCE, ALLREDUCE_COALESCED, REDUCE, ALLGATHER, _ALLGATHER_BASE, ALLGATHER_COALESCED, GATHER, SCATTER, REDUCE_SCATTER, ALLTOALL_BASE, ALLTOALL, SEND, RECV, RECVANYSOURCE, BARRIER, _REDUCE_SCATTER_BASE, COALESCED, _ALLREDUCE_SPARSE, UNKNOWN };
inline std::string opTypeToString(OpType) { return ""; }
struct ReduceOp { enum RedOpType : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM, UNUSED }; RedOpType op_ = SUM; };
struct BroadcastOptions { int64_t rootRank = 0; int64_t rootTensor = 0; std::chrono::milliseconds timeout = kUnsetTimeout; bool asyncOp = true; };
struct AllreduceOptions { ReduceOp reduceOp; std::chrono::milliseconds timeout = kUnsetTimeout; };
struct AllreduceCoalescedOptions : AllreduceOptions {};
struct ReduceOptions { ReduceOp reduceOp; int64_t rootRank = 0; int64_t rootTensor = 0; std::chrono::milliseconds timeout = kUnsetTimeout; };
struct AllgatherOptions { std::chrono::milliseconds timeout = kUnsetTimeout; bool asyncOp = true; };
struct GatherOptions { int64_t rootRank = 0; std::chrono::milliseconds timeout = kUnsetTimeout; };
struct ScatterOptions { int64_t rootRank = 0; std::chrono::milliseconds timeout = kUnsetTimeout; bool asyncOp = true; };
struct ReduceScatterOptions { ReduceOp reduceOp; std::chrono::milliseconds timeout = kUnsetTimeout; bool asyncOp = true; };
struct AllToAllOptions { std::chrono::milliseconds timeout = kUnsetTimeout; };
struct BarrierOptions { std::vector<int64_t> device_ids; std::chrono::milliseconds timeout = kUnsetTimeout; std::optional<at::Device> device; };
class Work : public torch::CustomClassHolder {
 public:
  static constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds(0);
  Work(int rank = -1, OpType opType = OpType::UNKNOWN) : rank_(rank), opType_(opType) {}
  virtual bool isCompleted() { return false; }
  virtual bool isSuccess() const { return false; }
  virtual std::exception_ptr exception() const { return nullptr; }
  virtual std::vector<at::Tensor> result() { return {}; }
  virtual void synchronize() {}
  virtual bool wait(std::chrono::milliseconds timeout = kNoTimeout) { return true; }
  virtual c10::intrusive_ptr<c10::ivalue::Future> getFuture() { return {}; }
 protected:
  const int rank_;
  OpType opType_;
};
class Backend : public torch::CustomClassHolder {
 public:
  struct Options : torch::CustomClassHolder {
    explicit Options(std::string backend, std::chrono::milliseconds timeout = std::chrono::milliseconds(1800000)) : timeout(timeout), backend(std::move(backend)) {}
    std::chrono::milliseconds timeout;
    const std::string backend;
  };
  explicit Backend(int rank, int size) : rank_(rank), size_(size) {}
  virtual bool supportsSplitting() const { return false; }
  virtual bool supportsCoalescing() const { return false; }
  virtual bool supportsShrinking() const { return false; }
  virtual c10::intrusive_ptr<Backend> shrink(const std::vector<int64_t>& /*ranks_to_exclude*/, int /*shrink_flags*/ = 0, const c10::intrusive_ptr<Options>& /*opts_override*/ = nullptr) { return {}; }
  virtual void startCoalescing() {}
  virtual c10::intrusive_ptr<Work> endCoalescing() { return {}; }
  virtual const std::string getBackendName() const { return ""; }
  virtual c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>&, const BroadcastOptions& = BroadcastOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>&, const AllreduceOptions& = AllreduceOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> allreduce_coalesced(std::vector<at::Tensor>&, const AllreduceCoalescedOptions& = AllreduceCoalescedOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> reduce(std::vector<at::Tensor>&, const ReduceOptions& = ReduceOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> allgather(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const AllgatherOptions& = AllgatherOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> _allgather_base(at::Tensor&, at::Tensor&, const AllgatherOptions& = AllgatherOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>&, std::vector<at::Tensor>&, const AllgatherOptions& = AllgatherOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> gather(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const GatherOptions& = GatherOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&, const ScatterOptions& = ScatterOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> reduce_scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&, const ReduceScatterOptions& = ReduceScatterOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor&, at::Tensor&, const ReduceScatterOptions& = ReduceScatterOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>&, std::vector<at::Tensor>&, const ReduceScatterOptions& = ReduceScatterOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&, std::vector<int64_t>&, const AllToAllOptions& = AllToAllOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> alltoall(std::vector<at::Tensor>&, std::vector<at::Tensor>&, const AllToAllOptions& = AllToAllOptions()) { return {}; }
  virtual c10::intrusive_ptr<Work> send(std::vector<at::Tensor>&, int, int) { return {}; }
  virtual c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>&, int, int) { return {}; }
  virtual c10::intrusive_ptr<Work> barrier(const BarrierOptions& = BarrierOptions()) { return {}; }
  std::optional<at::Device> getBoundDeviceId() const { return {}; }
  virtual void abort() {}
  virtual void shutdown() {}
 protected:
  void init() {}
  int rank_;
  int size_;
};
}  // namespace c10d
