#pragma once

#include <string>

namespace gpurun {

// RFC 4648 base64 of `data` (an AdmissionResponse's patch, a Secret's data): padded with '=', no
// line breaks. Any bytes, of any length. libcrypto's: its caller links it (core/CMakeLists.txt).
std::string base64_encode(const std::string& data);

}  // namespace gpurun
