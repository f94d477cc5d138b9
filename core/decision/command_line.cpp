#include "decision/command_line.hpp"

#include <cstring>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"

namespace gpurun {

std::optional<CommandWorkers> command_worker_flag(const std::vector<std::string>& command) {
  static const std::set<std::string> long_flags = {"--workers", "--num-workers", "--num_workers",
                                                   "--dataloader-num-workers", "--dataloader_num_workers"};
  std::vector<std::string> words;
  for (const auto& arg : command) {
    std::istringstream in(arg);
    for (std::string w; in >> w;) {
      // A shell's punctuation around a word: `-j 8; next`, `(python t.py -j 8)`, `"-j" "8"`.
      while (!w.empty() && std::strchr(";&|)'\"", w.back())) w.pop_back();
      while (!w.empty() && std::strchr("('\"", w.front())) w.erase(0, 1);
      if (!w.empty()) words.push_back(w);
    }
  }
  auto count = [](const std::string& s) -> std::optional<std::uint64_t> {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(s);
  };
  std::optional<CommandWorkers> seen;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const auto eq = w.find('=');
    const std::string name = w.substr(0, eq);
    std::optional<std::uint64_t> n;
    std::string flag;
    if (long_flags.count(name) && eq != std::string::npos) {
      n = count(w.substr(eq + 1));
      flag = w;
    } else if ((long_flags.count(w) || w == "-j") && i + 1 < words.size()) {
      n = count(words[i + 1]);
      flag = w + " " + words[i + 1];
    } else if (w.size() > 2 && w.compare(0, 2, "-j") == 0) {
      n = count(w.substr(2));
      flag = w;
    }
    if (n) seen = CommandWorkers{flag, *n};
  }
  return seen;
}

std::string command_workers_warning(const ContainerRequest& request, const ShmPlan& plan, const SpecFacts& spec,
                                    const Config& config, const ProfileStore& store, const HostFacts& host) {
  const auto seen = command_worker_flag(spec.args);
  if (!seen || seen->workers == plan.workers) return "";
  const RequestWords& words = *request.words;
  const std::string n = std::to_string(seen->workers);
  std::string origin = "the profile's workers_per_gpu";
  if (request.workers)
    origin = words.workers;
  else if (plan.workers_auto)
    origin = "auto: " + counted(plan.cpus, "CPU") + " / " + counted(plan.ranks, "rank");
  std::string line = "the command line's '" + seen->flag.substr(0, 80) + "' asks for " + n +
                     " DataLoader workers, but /dev/shm (" + format_size(plan.shm) + ") is planned for " +
                     std::to_string(plan.workers) + " DataLoader worker" + (plan.workers == 1 ? "" : "s") +
                     " per GPU rank (" + origin + ")";
  ContainerRequest asked = request;
  asked.workers = n;
  try {
    const ShmPlan other = plan_request(asked, spec, config, store, host);
    line += "; " + n + " need " + format_size(other.shm);
  } catch (const Error&) {
    // The line still says what to do; planning for that count says why it cannot be planned.
  }
  std::string remedy = words.set_workers;
  remedy.replace(remedy.find("{n}"), 3, n);
  return line + ": " + remedy + ", or make the script read " + request_key(RequestKey::kWorkers).env;
}

}  // namespace gpurun
