#pragma once

#include <string>

namespace gpurun {

// RFC 4648 base64 of `data` (AdmissionResponse.patch): padded with '=', no line breaks. Any
// bytes, of any length.
std::string base64_encode(const std::string& data);

}  // namespace gpurun
