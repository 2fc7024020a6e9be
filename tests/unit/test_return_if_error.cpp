// CC_RETURN_IF_ERROR (common/return_if_error.hpp): a failed Status comes back
// as it was, code and message; a success goes on to the next line.
#include <catch2/catch.hpp>

#include <string>

#include "common/return_if_error.hpp"

namespace {

// Runs `first`, then records that it got past it and returns `second`.
cc::Status two_steps(const cc::Status& first, const cc::Status& second, int* calls, bool* past) {
  CC_RETURN_IF_ERROR((++*calls, first));
  *past = true;
  return second;
}

}  // namespace

TEST_CASE("CC_RETURN_IF_ERROR returns a failed Status as it is, once evaluated") {
  int calls = 0;
  bool past = false;
  const cc::Status st = two_steps(cc::make_status(CC_ERR_TIMEOUT, "rank 1 (host h1) timed out"),
                                  cc::Status::success(), &calls, &past);
  CHECK(st.code == CC_ERR_TIMEOUT);
  CHECK(st.message == "rank 1 (host h1) timed out");
  CHECK(calls == 1);
  CHECK_FALSE(past);
}

TEST_CASE("CC_RETURN_IF_ERROR goes on after a success") {
  int calls = 0;
  bool past = false;
  const cc::Status st =
      two_steps(cc::Status::success(), cc::invalid_argument("the second step"), &calls, &past);
  CHECK(past);
  CHECK(calls == 1);
  CHECK(st.code == CC_ERR_INVALID_ARGUMENT);
  CHECK(st.message == "the second step");
}
