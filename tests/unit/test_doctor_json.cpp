// cc-doctor --json: one valid JSON object, its fields in order, odd strings
// escaped and bytes that are not UTF-8 replaced.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/cc-doctor/doctor_report.hpp"

using cc::tools::doctor::render_json;
using cc::tools::doctor::Report;

namespace {

// The JSON text cc-doctor writes for a host named `host` (the report's first field).
std::string host_json(const std::string& host) {
  Report r;
  r.host = host;
  const std::string text = render_json(r);
  const size_t start = std::string(R"({"host":)").size();
  return text.substr(start, text.find(R"(,"cc":{)") - start);
}

// The host name a JSON reader gets back.
std::string host_read_back(const std::string& host) {
  Report r;
  r.host = host;
  return nlohmann::json::parse(render_json(r)).at("host").get<std::string>();
}

}  // namespace

TEST_CASE("cc-doctor's JSON strings are escaped", "[doctor]") {
  CHECK(host_json("plain") == "\"plain\"");
  CHECK(host_json("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(host_json("line\nnext\ttab\r") == "\"line\\nnext\\ttab\\r\"");
  CHECK(host_json(std::string("\x01\x1f", 2)) == "\"\\u0001\\u001f\"");
  CHECK(host_json(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
  CHECK(host_json("caf\xc3\xa9 \xe2\x82\xac") ==
        "\"caf\xc3\xa9 \xe2\x82\xac\"");  // valid UTF-8 kept
  CHECK(host_read_back(std::string("\x01\x1f\x7f", 3)) == std::string("\x01\x1f\x7f", 3));
  CHECK(host_read_back(std::string("nul\0x", 5)) == std::string("nul\0x", 5));
}

TEST_CASE("cc-doctor's JSON reads bytes that are not UTF-8 as U+FFFD", "[doctor]") {
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(host_read_back("bad\xff") == "bad" + fffd);
  CHECK(host_read_back("cut\xe2\x82") == "cut" + fffd);  // one for the cut sequence
  CHECK(host_read_back("overlong\xc0\xaf") == "overlong" + fffd + fffd);
  CHECK(host_read_back("surrogate\xed\xa0\x80") == "surrogate" + fffd + fffd + fffd);
}

TEST_CASE("cc-doctor's JSON has every field, in order, on one line", "[doctor]") {
  Report r;
  r.host = "node-1";
  r.cc_version_code = 100;
  r.cc_version = "0.1.0";
  r.nccl_version_code = 22809;
  r.nccl_version = "2.28.9";
  r.cuda_runtime = 13000;
  r.cuda_driver = 12080;
  r.device_count = 2;
  cc::tools::doctor::Gpu g;
  g.name = "NVIDIA H200";
  g.uuid = "GPU-0a1b";
  g.pci_bus_id = "0000:3b:00.0";
  g.memory_bytes = 150754820096ull;
  g.cc_major = 9;
  g.p2p_peers = {1};
  g.nvlinks_active = 18;
  g.nvlinks_to = {{1, 16}, {-1, 2}};
  r.gpus.push_back(g);
  g.index = 1;
  g.p2p_peers = {};
  g.nvlinks_active = -1;
  g.nvlinks_to = {};
  r.gpus.push_back(g);
  r.nvml = true;
  cc::launch::Interface lo;
  lo.name = "lo";
  lo.up = lo.running = lo.loopback = true;
  lo.addresses = {{2, "127.0.0.1", 8}, {10, "::1", 128}};
  r.interfaces.push_back(lo);
  r.master_addr = "127.0.0.1";
  r.master_addr_var = "--master-addr";
  r.master_port = 29500;
  r.master_port_var = "MASTER_PORT";
  r.route_found = true;
  r.route = {"127.0.0.1", "127.0.0.1", "lo", 2};
  r.probe.answer = cc::tools::doctor::Answer::refused;
  r.probe.address = "127.0.0.1";
  r.probe.detail = "connection refused";
  r.probe.elapsed_ms = 3;
  r.shm_bytes = 1LL << 30;
  r.nofile_soft = 1024;
  r.nofile_hard = UINT64_MAX;
  r.env = {{"CC_JOB_ID", "j"}, {"NCCL_DEBUG", "WARN"}};
  r.add("rendezvous", cc::tools::doctor::Level::error, "nothing listens", "start it");
  r.add("cuda", cc::tools::doctor::Level::info, "no driver");
  CHECK_NOTHROW(nlohmann::json::parse(render_json(r)));
  CHECK(render_json(r) ==
        R"({"host":"node-1","cc":{"version":"0.1.0","code":100},"nccl":{"version":"2.28.9",)"
        R"("code":22809},"cuda":{"runtime":13000,"driver":12080,"device_count":2},)"
        R"("gpus":[{"index":0,"name":"NVIDIA H200","uuid":"GPU-0a1b","pci_bus_id":"0000:3b:00.0",)"
        R"("memory_bytes":150754820096,"compute_capability":"9.0","p2p_peers":[1],)"
        R"("nvlinks_active":18,"nvlinks_to":[{"gpu":1,"links":16},{"gpu":null,)"
        R"("links":2}]},{"index":1,"name":"NVIDIA H200","uuid":"GPU-0a1b",)"
        R"("pci_bus_id":"0000:3b:00.0","memory_bytes":150754820096,"compute_capability":"9.0",)"
        R"("p2p_peers":[],"nvlinks_active":null,"nvlinks_to":[]}],"nvml":true,)"
        R"("interfaces":[{"name":"lo","up":true,"running":true,"loopback":true,)"
        R"("addresses":[{"family":"ipv4","address":"127.0.0.1","prefix_len":8},{"family":"ipv6",)"
        R"("address":"::1","prefix_len":128}]}],"master":{"addr":"127.0.0.1",)"
        R"("addr_from":"--master-addr","port":29500,"port_from":"MASTER_PORT",)"
        R"("route":{"interface":"lo","source_address":"127.0.0.1","target":"127.0.0.1"},)"
        R"("route_error":"","answer":"refused","detail":"connection refused",)"
        R"("address_tried":"127.0.0.1","server":"","auth_required":false,"elapsed_ms":3},)"
        R"("shm_bytes":1073741824,"open_files":{"soft":1024,"hard":18446744073709551615},)"
        R"("env":{"CC_JOB_ID":"j","NCCL_DEBUG":"WARN"},"findings":[{"section":"rendezvous",)"
        R"("level":"error","what":"nothing listens","fix":"start it"},{"section":"cuda",)"
        R"("level":"info","what":"no driver","fix":""}]})"
        "\n");
}
