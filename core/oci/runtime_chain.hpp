#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpurun {

namespace fs = std::filesystem;

// A chain file: what an engine's gpu-run entry runs when gpu-run-runtime must exec another
// runtime than runc (NVIDIA's, as the engine's default). An executable text file:
//
//   #!/usr/bin/gpu-run-runtime --chain
//   # comment lines
//   runtime=/usr/bin/nvidia-container-runtime
//
// The kernel runs it as `gpu-run-runtime --chain FILE ARGS...`; gpu-run-runtime reads FILE for
// the runtime it execs with ARGS. `gpu-run-ctl configure docker|containerd` writes it
// (docs/ARCHITECTURE.md, "The runtime chain").
constexpr const char* kChainOption = "--chain";

// A chain file's two paths.
struct RuntimeChain {
  fs::path runtime;  // gpu-run-runtime: the #! line's program
  fs::path next;     // the runtime it execs
};

// The text of a chain file for `chain`, with `comment` as "# " lines. Throws Error (exit 2)
// when a path cannot be written there: not absolute, blank characters or a newline, or a #!
// line over 127 bytes (the limit of kernels before 5.1).
std::string runtime_chain_text(const RuntimeChain& chain, const std::vector<std::string>& comment);

// Reads a chain file's text: nullopt when `text` does not start with a `#!... --chain` line
// (not a chain file). Throws Error (exit 2) naming `source` for a chain file whose runtime=
// line is missing, repeated or not an absolute path, or that has another key.
std::optional<RuntimeChain> parse_runtime_chain(const std::string& text, const std::string& source);

// The chain file at `file` (a regular file of at most 4 KiB). Throws Error naming it when it
// cannot be read or is not a chain file.
RuntimeChain read_runtime_chain(const fs::path& file);

}  // namespace gpurun
