// cc_mem_* and cc_comm_(window_)(de)register: thin entry points over lib/comm/memory.
#include "cc/cc.h"
#include "common/last_error.hpp"
#include "lib/comm/memory.hpp"

extern "C" {

CC_API cc_result_t cc_mem_alloc(void** ptr, size_t size) {
  CC_API_RETURN_STATUS(cc::comm::mem_alloc(ptr, size));
}

CC_API cc_result_t cc_mem_free(void* ptr) { CC_API_RETURN_STATUS(cc::comm::mem_free(ptr)); }

CC_API cc_result_t cc_comm_register(cc_comm_t comm, void* buf, size_t size, void** handle) {
  CC_API_RETURN_STATUS(cc::comm::register_buffer(comm, buf, size, handle));
}

CC_API cc_result_t cc_comm_deregister(cc_comm_t comm, void* handle) {
  CC_API_RETURN_STATUS(cc::comm::deregister_buffer(comm, handle));
}

CC_API cc_result_t cc_comm_window_register(cc_comm_t comm, void* buf, size_t size, void** window) {
  CC_API_RETURN_STATUS(cc::comm::register_window(comm, buf, size, window));
}

CC_API cc_result_t cc_comm_window_deregister(cc_comm_t comm, void* window) {
  CC_API_RETURN_STATUS(cc::comm::deregister_window(comm, window));
}

}  // extern "C"
