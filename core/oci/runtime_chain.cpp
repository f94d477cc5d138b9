#include "oci/runtime_chain.hpp"

#include <sstream>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"

namespace gpurun {
namespace {

constexpr std::size_t kMaxChainFile = 4096;
// Kernels before 5.1 read 128 bytes of a script for its #! line.
constexpr std::size_t kMaxShebangLine = 127;
constexpr const char* kRuntimeKey = "runtime=";

bool fits_a_line(const std::string& path) { return path.find_first_of(" \t\r\n") == std::string::npos; }

}  // namespace

std::string runtime_chain_text(const RuntimeChain& chain, const std::vector<std::string>& comment) {
  for (const fs::path* p : {&chain.runtime, &chain.next}) {
    if (!p->is_absolute() || !fits_a_line(p->string()))
      throw usage_error("runtime chain: " + log_quote(p->string().substr(0, 120)) +
                        " cannot go into a chain file: give an absolute path without blanks");
  }
  const std::string shebang = "#!" + chain.runtime.string() + " " + kChainOption;
  if (shebang.size() > kMaxShebangLine)
    throw usage_error("runtime chain: the #! line for " + chain.runtime.string() + " is " +
                      std::to_string(shebang.size()) + " bytes, more than the kernel reads (" +
                      std::to_string(kMaxShebangLine) + "): install gpu-run-runtime at a shorter path");
  std::string text = shebang + "\n";
  for (const std::string& line : comment) text += "# " + line + "\n";
  text += kRuntimeKey + chain.next.string() + "\n";
  return text;
}

std::optional<RuntimeChain> parse_runtime_chain(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line.rfind("#!", 0) != 0) return std::nullopt;
  const std::string suffix = std::string(" ") + kChainOption;
  if (line.size() <= 2 + suffix.size() || line.compare(line.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  RuntimeChain chain;
  chain.runtime = line.substr(2, line.size() - 2 - suffix.size());
  if (!chain.runtime.is_absolute() || !fits_a_line(chain.runtime.string())) return std::nullopt;
  bool seen = false;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(number) + ": ";
    if (line.rfind(kRuntimeKey, 0) != 0)
      throw usage_error(where + "expected runtime=PATH, got '" + line.substr(0, 80) +
                        "': run gpu-run-ctl configure again to rewrite it");
    if (seen) throw usage_error(where + "a second runtime= line: run gpu-run-ctl configure again to rewrite it");
    chain.next = line.substr(std::string(kRuntimeKey).size());
    if (!chain.next.is_absolute() || !fits_a_line(chain.next.string()))
      throw usage_error(where + "runtime= '" + chain.next.string().substr(0, 80) +
                        "': expected an absolute path; run gpu-run-ctl configure again to rewrite it");
    seen = true;
  }
  if (!seen) throw usage_error(source + ": no runtime= line: run gpu-run-ctl configure again to rewrite it");
  return chain;
}

RuntimeChain read_runtime_chain(const fs::path& file) {
  const std::string text = read_small_file(file, kMaxChainFile, "chain file");
  std::optional<RuntimeChain> chain = parse_runtime_chain(text, file.string());
  if (!chain)
    throw usage_error(file.string() + ": not a chain file (its first line is not #!<gpu-run-runtime> " + kChainOption +
                      ")");
  return *chain;
}

}  // namespace gpurun
