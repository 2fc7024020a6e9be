#include "rendezvous/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace cc::rv {

std::vector<uint8_t> make_nonce() {
  std::vector<uint8_t> nonce(kNonceSize);
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    throw std::runtime_error("RAND_bytes failed: the OS random source is unavailable");
  return nonce;
}

std::vector<uint8_t> auth_mac(std::string_view token, std::span<const uint8_t> nonce,
                              std::string_view job_id) {
  std::vector<uint8_t> msg(nonce.begin(), nonce.end());
  msg.insert(msg.end(), job_id.begin(), job_id.end());
  std::vector<uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), msg.data(), msg.size(),
           mac.data(), &len) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  mac.resize(len);
  return mac;
}

bool auth_check(std::string_view token, std::span<const uint8_t> nonce, std::string_view job_id,
                std::span<const uint8_t> answer) {
  const std::vector<uint8_t> expected = auth_mac(token, nonce, job_id);
  if (answer.size() != expected.size()) return false;
  return CRYPTO_memcmp(expected.data(), answer.data(), expected.size()) == 0;
}

}  // namespace cc::rv
