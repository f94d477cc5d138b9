#include "ctl/configure/chain.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <iostream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/process.hpp"
#include "oci/runtime_chain.hpp"

namespace gpurun {

CLI::Option* add_entry_options(CLI::App& cmd, std::optional<std::string>& config,
                               std::optional<std::string>& runtime_path, const std::string& runtime_help, bool& undo,
                               const std::string& undo_help) {
  CLI::Option* config_option =
      cmd.add_option(
             "--config", config,
             "The gpu-run config the runtime should read (default: $GPU_RUN_CONFIG, else /etc/gpu-run/config.json)")
          ->type_name("PATH");
  CLI::Option* runtime_option = cmd.add_option("--runtime-path", runtime_path, runtime_help)->type_name("PATH");
  return cmd.add_flag("--undo", undo, undo_help)->excludes(config_option)->excludes(runtime_option);
}
namespace {

constexpr std::size_t kMaxChainFileRead = 4096;
constexpr const char* kUnchanged = " (gpu-run-ctl leaves the file as it is)";

// The file at `path` when it is a chain file.
std::optional<RuntimeChain> read_chain(const fs::path& path) {
  try {
    return parse_runtime_chain(read_small_file(path, kMaxChainFileRead, "runtime"), path.string());
  } catch (const Error&) {
    return std::nullopt;  // a binary larger than a chain file, or unreadable: not one
  }
}

bool is_gpu_run_runtime(const fs::path& binary, const fs::path& runtime) {
  std::error_code ec;
  return binary.filename() == "gpu-run-runtime" || fs::equivalent(binary, runtime, ec);
}

}  // namespace

fs::path chain_file_path(const fs::path& engine_config, const std::string& entry) {
  return fs::absolute(engine_config).parent_path() / ("gpu-run-runtime." + entry);
}

std::optional<fs::path> chain_of_binary(const fs::path& binary) {
  if (const std::optional<RuntimeChain> chain = read_chain(binary)) return chain->next;
  return std::nullopt;
}

Chain resolve_chain(const DefaultRuntime& d, const std::string& source, const fs::path& runtime) {
  Chain chain{std::nullopt, d.name, d.where};
  if (d.is_entry) {
    // gpu-run is the default already: it keeps chaining what it chains.
    const std::optional<fs::path> kept = chain_of_binary(d.binary);
    if (!kept) return chain;
    chain.next = *kept;
    chain.name = kept->filename().string();
    chain.where = "as " + d.binary + " says";
    if (!find_executable(kept->string()))
      throw usage_error(source + ": gpu-run is the default runtime and chains " + kept->string() + " (" + d.binary +
                        "), which is not an executable file any more: run configure --undo, make the runtime "
                        "gpu-run should exec the default, then configure again" +
                        kUnchanged);
    return chain;
  }
  if (d.binary.empty()) return chain;
  const std::optional<fs::path> found = find_executable(d.binary);
  if (!found)
    throw usage_error(source + ": " + d.where + " is " + d.binary + ", which is not an executable file" +
                      (d.binary.find('/') == std::string::npos ? " on PATH" : "") +
                      ": containers cannot run under it either; install it or fix the file, then run again" +
                      kUnchanged);
  const fs::path next = fs::absolute(*found);
  if (is_gpu_run_runtime(next, runtime) || read_chain(next))
    throw usage_error(source + ": " + d.where + " is " + next.string() +
                      ", gpu-run-runtime itself: chaining it would loop; make the runtime gpu-run should exec "
                      "(runc, NVIDIA's) the default, then run again" +
                      kUnchanged);
  chain.next = next;
  return chain;
}

std::string chain_words(const Chain& chain) {
  if (!chain.next) return "gpu-run-runtime -> the gpu-run config's \"runtimes\" (runc unless it names another)";
  return "gpu-run-runtime -> " + chain.next->filename().string() + " (" + chain.next->string() + ", " + chain.where +
         ")";
}

ChainFile plan_chain_file(const Chain& chain, const fs::path& path, const fs::path& runtime, const std::string& command,
                          const std::string& entry_words, bool entry_changes) {
  ChainFile f;
  f.path = path;
  if (chain.next) {
    f.text = runtime_chain_text(RuntimeChain{runtime, *chain.next},
                                {"Written by `gpu-run-ctl " + command + "` for " + entry_words + ":",
                                 "gpu-run-runtime sizes /dev/shm, then execs the runtime below, " + chain.where + ".",
                                 "`gpu-run-ctl " + command + " --undo` takes the entry out; this file stays for the",
                                 "containers started through it (each exec, stop and delete of one runs it)."});
    try {
      f.write = read_small_file(f.path, kMaxChainFileRead, "chain file") != f.text;
    } catch (const Error&) {
      f.write = true;
    }
  } else {
    f.stale = entry_changes && read_chain(f.path);
  }
  return f;
}

void report_chain_dry_run(const Chain& chain, const ChainFile& f) {
  std::cerr << "gpu-run-ctl: chain: " << chain_words(chain) << "\n";
  if (f.write) std::cerr << "gpu-run-ctl: --dry-run: would write " << f.path.string() << ":\n" << f.text;
  if (f.stale)
    std::cerr << "gpu-run-ctl: " << f.path.string()
              << " would no longer be run by the entry; it stays for the containers started through it\n";
}

void write_chain_file(const ChainFile& f) {
  if (!f.write) return;
  try {
    write_file_atomic(f.path.string(), f.text, 0755, Durability::kDurable);
  } catch (const Error& e) {
    throw e.with_hint(e.errno_value() == EACCES ? " (run as root, or pick another path)" : "");
  }
  std::cout << "wrote " << f.path.string() << "\n";
}

void report_chain(const Chain& chain, const ChainFile& f) {
  std::cout << "chain: " << chain_words(chain) << "\n";
  if (f.stale)
    std::cout << "note: " << f.path.string() << " is no longer run by the entry: remove it once no container "
              << "started through it runs (each exec, stop and delete of one runs it)\n";
}

}  // namespace gpurun
