// The fast-path calls' argument and state checks, with no GPU: cc_mem_alloc,
// registration and symmetric windows return their code and name the
// argument as text before NCCL sees anything. Runs with
// CUDA_VISIBLE_DEVICES empty, so it behaves the same on a GPU machine.
#include <catch2/catch.hpp>

#include <string>

#include "cc/cc.h"
#include "lib/comm/comm.hpp"

namespace {

std::string last() { return cc_last_error(); }
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A communicator that never touched NCCL: enough for every check that runs
// before NCCL would.
cc_comm_t fake_comm() {
  auto* c = new cc_comm();
  c->rank = 1;
  c->nranks = 2;
  c->host = "testhost";
  c->device = 0;
  return c;
}

void* const kBuf = reinterpret_cast<void*>(0x10000);
void* const kJunk = reinterpret_cast<void*>(0x1);  // a pointer the checks must reset

}  // namespace

TEST_CASE("cc_mem_alloc checks its arguments") {
  CHECK(cc_mem_alloc(nullptr, 16) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last() ==
        "cc_mem_alloc: ptr is NULL; pass the address of a void* to receive the "
        "allocation");
  void* p = kJunk;
  CHECK(cc_mem_alloc(&p, 0) == CC_ERR_INVALID_ARGUMENT);
  CHECK(p == nullptr);
  CHECK(last() == "cc_mem_alloc: size is 0; pass the number of bytes to allocate");
}

TEST_CASE("cc_mem_alloc without a device says so") {
  void* p = kJunk;
  CHECK(cc_mem_alloc(&p, 1 << 20) == CC_ERR_NO_DEVICE);
  CHECK(p == nullptr);
  INFO(last());
  CHECK(last().rfind("cc_mem_alloc: no CUDA device is visible (", 0) == 0);
  CHECK(has(last(), "check CUDA_VISIBLE_DEVICES and the driver (nvidia-smi)"));
}

TEST_CASE("cc_mem_free of NULL is a no-op") {
  cc_mem_alloc(nullptr, 1);  // leaves an error behind
  CHECK(cc_mem_free(nullptr) == CC_SUCCESS);
  CHECK(last().empty());
}

TEST_CASE("registration on a NULL comm names the call") {
  void* h = kJunk;
  CHECK(cc_comm_register(nullptr, kBuf, 64, &h) == CC_ERR_INVALID_ARGUMENT);
  CHECK(h == nullptr);
  CHECK(last().rfind("cc_comm_register: comm is NULL", 0) == 0);
  h = kJunk;
  CHECK(cc_comm_window_register(nullptr, kBuf, 64, &h) == CC_ERR_INVALID_ARGUMENT);
  CHECK(h == nullptr);
  CHECK(last().rfind("cc_comm_window_register: comm is NULL", 0) == 0);
  CHECK(cc_comm_deregister(nullptr, kBuf) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_deregister: comm is NULL", 0) == 0);
  CHECK(cc_comm_window_deregister(nullptr, kBuf) == CC_ERR_INVALID_ARGUMENT);
  CHECK(last().rfind("cc_comm_window_deregister: comm is NULL", 0) == 0);
}

TEST_CASE("registration checks buffer, size and output, naming rank and host") {
  cc_comm_t comm = fake_comm();
  using Fn = cc_result_t (*)(cc_comm_t, void*, size_t, void**);
  struct Case {
    const char* call;
    Fn fn;
    const char* out;
  } cases[] = {{"cc_comm_register", cc_comm_register, "handle"},
               {"cc_comm_window_register", cc_comm_window_register, "window"}};
  for (const auto& c : cases) {
    INFO(c.call);
    const std::string who = std::string(c.call) + " on rank 1 (host testhost): ";
    void* h = kJunk;
    CHECK(c.fn(comm, nullptr, 64, &h) == CC_ERR_INVALID_ARGUMENT);
    CHECK(h == nullptr);
    CHECK(last() == who + "buf is NULL; pass device memory, ideally from cc_mem_alloc");
    h = kJunk;
    CHECK(c.fn(comm, kBuf, 0, &h) == CC_ERR_INVALID_ARGUMENT);
    CHECK(h == nullptr);
    CHECK(last() == who + "size is 0; pass the buffer's size in bytes");
    CHECK(c.fn(comm, kBuf, 64, nullptr) == CC_ERR_INVALID_ARGUMENT);
    CHECK(last() == who + c.out + " is NULL; pass the address of a void* to receive it");
  }
  delete comm;
}

TEST_CASE("deregistering NULL is a no-op") {
  cc_comm_t comm = fake_comm();
  cc_mem_alloc(nullptr, 1);
  CHECK(cc_comm_deregister(comm, nullptr) == CC_SUCCESS);
  CHECK(last().empty());
  cc_mem_alloc(nullptr, 1);
  CHECK(cc_comm_window_deregister(comm, nullptr) == CC_SUCCESS);
  CHECK(last().empty());
  delete comm;
}

TEST_CASE("registration on an aborted comm returns the abort's story") {
  cc_comm_t comm = fake_comm();
  comm->state = static_cast<int>(cc::core::State::peer_failed);
  comm->failure = "rank 0 (host other) vanished";
  void* h = kJunk;
  CHECK(cc_comm_register(comm, kBuf, 64, &h) == CC_ERR_PEER_FAILED);
  CHECK(h == nullptr);
  CHECK(last() == "cc_comm_register on rank 1 (host testhost): rank 0 (host other) vanished");
  CHECK(cc_comm_window_register(comm, kBuf, 64, &h) == CC_ERR_PEER_FAILED);
  CHECK(cc_comm_deregister(comm, kBuf) == CC_ERR_PEER_FAILED);
  CHECK(has(last(), "cc_comm_deregister on rank 1"));
  CHECK(cc_comm_window_deregister(comm, kBuf) == CC_ERR_PEER_FAILED);
  delete comm;
}

TEST_CASE("registration on a destroyed comm is refused") {
  cc_comm_t comm = fake_comm();
  comm->magic = cc::comm::kCommDead;
  void* h = kJunk;
  CHECK(cc_comm_register(comm, kBuf, 64, &h) == CC_ERR_INVALID_ARGUMENT);
  CHECK(h == nullptr);
  CHECK(has(last(), "cc_comm_register: comm was destroyed"));
  CHECK(cc_comm_window_deregister(comm, kBuf) == CC_ERR_INVALID_ARGUMENT);
  CHECK(has(last(), "cc_comm_window_deregister: comm was destroyed"));
  delete comm;
}
