#include "base/base64.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstddef>

namespace gpurun {

std::string base64_encode(const std::string& data) {
  // EVP_EncodeBlock takes an int length: whole groups of 3 bytes at a time, so that '=' padding
  // comes only after the last.
  constexpr std::size_t kChunk = 3 << 20;
  std::string out((data.size() + 2) / 3 * 4 + 1, '\0');  // + 1: EVP_EncodeBlock ends with a NUL
  std::size_t written = 0;
  for (std::size_t at = 0; at < data.size(); at += kChunk) {
    const std::size_t len = std::min(kChunk, data.size() - at);
    written += static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(&out[written]),
                                                        reinterpret_cast<const unsigned char*>(data.data() + at),
                                                        static_cast<int>(len)));
  }
  out.resize(written);
  return out;
}

}  // namespace gpurun
