#include "guard/guard_state.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/file_io.hpp"

namespace gpurun {

void to_json(nlohmann::json& j, const GuardLimits& l) {
  j = {{"headroom", l.headroom},
       {"bound", l.bound},
       {"batch", l.batch},
       {"max_shm", l.max_shm},
       {"size_limit", l.size_limit},
       {"recorded_ceiling", l.recorded_ceiling},
       {"budget_bytes", l.budget_bytes ? nlohmann::json(*l.budget_bytes) : nlohmann::json()}};
}

void from_json(const nlohmann::json& j, GuardLimits& l) {
  l.headroom = j.at("headroom").get<std::uint64_t>();
  l.bound = j.at("bound").get<std::uint64_t>();
  l.batch = j.at("batch").get<std::uint64_t>();
  l.max_shm = j.at("max_shm").get<std::uint64_t>();
  l.size_limit = j.value("size_limit", std::uint64_t{0});
  l.recorded_ceiling = j.value("recorded_ceiling", std::uint64_t{0});
  const nlohmann::json& budget = j.at("budget_bytes");
  if (!budget.is_null()) l.budget_bytes = budget.get<std::uint64_t>();
}

NLOHMANN_JSON_SERIALIZE_ENUM(IpcKind, {{IpcKind::kOther, "other"},
                                       {IpcKind::kPrivate, "private"},
                                       {IpcKind::kShareable, "shareable"},
                                       {IpcKind::kJoined, "joined"},
                                       {IpcKind::kNone, "none"},
                                       {IpcKind::kHost, "host"}})

void to_json(nlohmann::json& j, const IpcMode& m) { j = {{"kind", m.kind}, {"owner", m.owner}, {"text", m.text}}; }

void from_json(const nlohmann::json& j, IpcMode& m) {
  m.kind = j.at("kind").get<IpcKind>();
  m.owner = j.at("owner").get<std::string>();
  m.text = j.at("text").get<std::string>();
}

void to_json(nlohmann::json& j, const GuardStateEntry& e) {
  j = {{"id", e.info.id},
       {"name", e.info.name},
       {"engine", e.info.engine},
       {"pid", e.info.pid},
       {"start_time", e.start_time},
       {"profile", e.profile},
       {"note", e.note},
       {"labels", e.info.labels},
       {"annotations", e.info.annotations},
       {"shm_empty_dir", e.info.shm_empty_dir},
       {"ipc", e.info.ipc},
       {"limits", e.limits}};
}

void from_json(const nlohmann::json& j, GuardStateEntry& e) {
  e.info.id = j.at("id").get<std::string>();
  e.info.name = j.at("name").get<std::string>();
  e.info.engine = j.at("engine").get<std::string>();
  e.info.pid = j.at("pid").get<int>();
  e.info.running = true;
  e.info.labels = j.at("labels").get<std::map<std::string, std::string>>();
  e.info.annotations = j.value("annotations", std::map<std::string, std::string>{});
  e.info.shm_empty_dir = j.value("shm_empty_dir", false);
  if (j.contains("ipc")) e.info.ipc = j.at("ipc").get<IpcMode>();  // a state written before it: private
  e.start_time = j.at("start_time").get<std::uint64_t>();
  e.profile = j.at("profile").get<std::string>();
  e.note = j.at("note").get<std::string>();
  e.limits = j.at("limits").get<GuardLimits>();
}

std::string guard_state_text(const std::vector<GuardStateEntry>& entries) { return nlohmann::json(entries).dump(); }

std::vector<GuardStateEntry> parse_guard_state(const std::string& text) {
  std::vector<GuardStateEntry> out;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return out;
  for (const nlohmann::json& j : doc) {
    try {
      GuardStateEntry e = j.get<GuardStateEntry>();
      if (e.info.id.empty() || e.info.pid <= 0 || e.start_time == 0) continue;
      out.push_back(std::move(e));
    } catch (const nlohmann::json::exception&) {
      continue;  // a malformed entry: that container is found by the first look at the engine
    }
  }
  return out;
}

std::uint64_t process_start_time(int pid) {
  try {
    const std::string stat = read_small_file("/proc/" + std::to_string(pid) + "/stat", 4096, "the process's stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // after "(comm) "
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
      if (i == 22) return std::stoull(field);
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace gpurun
