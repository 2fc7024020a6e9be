// A client of a server on 127.0.0.1 (cc's own, or a fake one), with 5 s
// deadlines; the case fails with the client's message when it cannot connect.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/frame_client.hpp"

namespace cc::test {

inline std::unique_ptr<cc::rv::Client> loopback_client(int port,
                                                       const std::string& job = "default") {
  cc::rv::FrameClientOptions o;
  o.addr = "127.0.0.1";
  o.port = port;
  o.job_id = job;
  o.connect_timeout = std::chrono::milliseconds(5000);
  o.request_timeout = std::chrono::milliseconds(5000);
  std::unique_ptr<cc::rv::Client> c;
  const cc::Status s = cc::rv::connect_frame_client(o, &c);
  INFO(s.message);
  REQUIRE(s.ok());
  return c;
}

}  // namespace cc::test
