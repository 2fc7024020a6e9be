// Challenge and response: the client proves it knows the shared token by
// answering HMAC-SHA256(token, nonce || job_id) for a fresh server nonce, so
// the token never crosses the wire and a recorded answer is useless later.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cc::rv {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kMacSize = 32;

// kNonceSize bytes from the OS's CSPRNG.
std::vector<uint8_t> make_nonce();
std::vector<uint8_t> auth_mac(std::string_view token, std::span<const uint8_t> nonce,
                              std::string_view job_id);
// Constant-time comparison of an answer with the expected MAC.
bool auth_check(std::string_view token, std::span<const uint8_t> nonce, std::string_view job_id,
                std::span<const uint8_t> answer);

}  // namespace cc::rv
