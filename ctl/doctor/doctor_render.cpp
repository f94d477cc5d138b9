#include "ctl/doctor/doctor_render.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"

namespace gpurun {

namespace {

// What every report for programs holds besides its facts.
nlohmann::json findings_json(const std::string& target, const std::vector<Finding>& findings) {
  nlohmann::json j;
  j["target"] = target;
  j["worst"] = level_name(worst_level(findings));
  j["exit_code"] = doctor_exit_code(findings);
  j["findings"] = nlohmann::json::array();
  for (const auto& x : findings)
    j["findings"].push_back({{"level", level_name(x.level)},
                             {"check", x.check},
                             {"message", x.message},
                             {"fix", x.fix.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.fix)},
                             {"engine", x.engine.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.engine)}});
  return j;
}

// A level's word for a terminal: SGR red, yellow or green, then the reset.
std::string colored(Level level) {
  const char* sgr = level == Level::kFail ? "\033[1;31m" : level == Level::kWarn ? "\033[1;33m" : "\033[32m";
  return sgr + std::string(level_name(level)) + "\033[0m";
}

}  // namespace

bool use_color(const std::string& mode, bool stdout_is_tty, const EnvLookup& env) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  if (mode != "auto") throw usage_error("--color '" + mode.substr(0, 40) + "': expected auto, always or never");
  const auto no_color = env("NO_COLOR");
  const auto term = env("TERM");
  return stdout_is_tty && !(no_color && !no_color->empty()) && term && !term->empty() && *term != "dumb";
}

std::string format_findings(const std::string& target, const std::vector<Finding>& findings, bool color) {
  const auto word = [color](Level l) { return color ? colored(l) : std::string(level_name(l)); };
  std::ostringstream s;
  s << "gpu-run-ctl doctor: " << target << "\n";
  std::size_t width = 0;
  for (const auto& x : findings) width = std::max(width, x.check.size());
  const std::string indent(6 + width + 2, ' ');
  for (const auto& x : findings) {
    const std::string level = level_name(x.level);
    s << word(x.level) << std::string(6 - level.size(), ' ') << x.check << std::string(width - x.check.size() + 2, ' ')
      << x.message << "\n";
    if (!x.fix.empty() && x.level != Level::kOk) s << indent << "fix: " << x.fix << "\n";
  }
  s << "worst: " << word(worst_level(findings)) << "\n";
  return s.str();
}

nlohmann::json doctor_json(const DoctorFacts& f, const std::vector<Finding>& findings) {
  nlohmann::json j = findings_json(f.target, findings);
  nlohmann::json facts;
  facts["from_host"] = f.from_host;
  facts["engine"] = f.from_host ? nlohmann::json(f.engine) : nlohmann::json(nullptr);
  facts["shm_mount"] = shm_mount_name(f.shm_mount);
  facts["shm_size_bytes"] = f.shm_size;
  facts["shm_used_bytes"] = f.shm_used;
  facts["shm_is_host"] = f.shm_is_host ? nlohmann::json(*f.shm_is_host) : nlohmann::json(nullptr);
  facts["ipc_mode"] = f.ipc ? nlohmann::json(ipc_mode_name(*f.ipc)) : nlohmann::json(nullptr);
  facts["memory_limit_bytes"] = f.memory_limit ? nlohmann::json(*f.memory_limit) : nlohmann::json(nullptr);
  facts["memory_fraction_max"] = f.memory_fraction_max;
  facts["cpus"] = f.cpus ? nlohmann::json(*f.cpus) : nlohmann::json(nullptr);
  facts["cpus_source"] = f.cpus_source;
  nlohmann::json entries = nlohmann::json::array();
  for (const RuntimeEntryFacts& e : f.runtime_entries)
    entries.push_back({{"file", e.file},
                       {"engine", e.engine},
                       {"name", e.name},
                       {"gpu_run", e.gpu_run},
                       {"execs", e.gpu_run ? nlohmann::json(e.execs) : nlohmann::json(nullptr)},
                       {"binary", e.gpu_run ? nlohmann::json(nullptr) : nlohmann::json(e.binary)},
                       {"gpu", e.gpu}});
  facts["runtime_entries"] = entries;
  facts["env"] = f.env;
  facts["decision"] = f.recorded.record ? nlohmann::json::parse(decision_text(*f.recorded.record)) : nlohmann::json();
  facts["files"] = nlohmann::json::array();
  for (const auto& file : f.files) facts["files"].push_back({{"name", file.name}, {"bytes", file.bytes}});
  facts["sysctls"] = f.sysctls;
  j["facts"] = facts;
  return j;
}

nlohmann::json crash_json(const CrashFacts& crash, const std::vector<Finding>& findings) {
  nlohmann::json j = findings_json(crash.source, findings);
  nlohmann::json facts;
  facts["lines"] = crash.lines;
  facts["exit_code"] = crash.exit_code ? nlohmann::json(*crash.exit_code) : nlohmann::json(nullptr);
  facts["shm_size_bytes"] = crash.shm_size ? nlohmann::json(*crash.shm_size) : nlohmann::json(nullptr);
  facts["profile"] = crash.profile ? nlohmann::json(*crash.profile) : nlohmann::json(nullptr);
  facts["planned_shm_bytes"] = crash.planned_shm ? nlohmann::json(*crash.planned_shm) : nlohmann::json(nullptr);
  facts["engines"] = crash.engines;
  facts["evidence"] = nlohmann::json::array();
  const auto optional_bytes = [](const std::optional<std::uint64_t>& n) {
    return n ? nlohmann::json(*n) : nlohmann::json(nullptr);
  };
  for (const CrashEvidence& e : crash.evidence)
    facts["evidence"].push_back({{"kind", crash_kind_name(e.kind)},
                                 {"line", e.line},
                                 {"text", e.text},
                                 {"bytes", optional_bytes(e.bytes)},
                                 {"available_bytes", optional_bytes(e.available)},
                                 {"detail", e.detail.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.detail)}});
  j["facts"] = facts;
  return j;
}

}  // namespace gpurun
