#include "decision/decision_record.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "base/units.hpp"
#include "decision/contract.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

// Bounds of what a record may say: larger is not a decision any door makes.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;  // 1 PiB
constexpr std::uint64_t kMaxCount = 1u << 20;
constexpr std::size_t kMaxWords = 256;

const std::string* lookup(const std::map<std::string, std::string>* m, const char* key) {
  if (!m) return nullptr;
  auto it = m->find(key);
  return it == m->end() ? nullptr : &it->second;
}

std::uint64_t number_at(const json& doc, const char* key, std::uint64_t max, const std::string& where) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return 0;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0))
    throw Error(where + ": \"" + key + "\" must be a whole number of at least 0");
  const std::uint64_t n = it->get<std::uint64_t>();
  if (n > max)
    throw Error(where + ": \"" + key + "\" of " + std::to_string(n) + " is more than " + std::to_string(max));
  return n;
}

std::string words_at(const json& doc, const char* key, const std::string& where) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return "";
  if (!it->is_string()) throw Error(where + ": \"" + key + "\" must be a string");
  const std::string s = it->get<std::string>();
  if (s.size() > kMaxWords)
    throw Error(where + ": \"" + key + "\" of " + std::to_string(s.size()) + " bytes is longer than " +
                std::to_string(kMaxWords));
  for (unsigned char ch : s)
    if (ch < 0x20 || ch == 0x7f) throw Error(where + ": \"" + key + "\" holds a control character");
  return s;
}

// Creates `dir` (its parent must exist) with exactly `mode`, whatever the umask; an existing
// directory is left as it is.
void make_directory(const fs::path& dir, mode_t mode) {
  if (::mkdirat(AT_FDCWD, dir.c_str(), mode) != 0) {
    if (errno == EEXIST) return;
    throw Error("create " + dir.string(), errno);
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::fchmod(fd.get(), mode) != 0) throw Error("set the mode of " + dir.string(), errno);
}

bool is_id_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
         ch == '.';
}

}  // namespace

DecisionRecord decision_record(const ShmDecision& d, const std::string& door, bool applied,
                               std::optional<std::uint64_t> ceiling) {
  DecisionRecord r;
  r.door = door;
  if (applied) r.size = d.size;
  r.reason = d.reason.substr(0, kMaxWords);
  if (d.plan) {
    const ShmPlan& p = *d.plan;
    const GuardLimits limits = guard_limits(p);
    r.need = p.need;
    r.headroom = limits.headroom;
    r.batch_bytes = p.batch_bytes;
    for (const LoaderPlan& loader : p.loaders) r.batch_bytes = std::max(r.batch_bytes, loader.batch_bytes);
    const std::uint64_t cap = growth_ceiling(limits, 0);
    r.ceiling = cap ? std::max(cap, d.size) : 0;
    r.profile = p.profile;
    r.gpus = p.gpus;
    r.workers = p.workers;
    r.batch_size = p.batch_size;
  } else {
    r.profile = d.profile;
    r.gpus = d.gpus;
    r.workers = d.workers;
  }
  if (ceiling) r.ceiling = *ceiling;
  r.command_flag = d.command_flag.substr(0, kMaxWords);
  r.command_workers = std::min<std::uint64_t>(d.command_workers, kMaxCount);
  return r;
}

std::string decision_text(const DecisionRecord& r) {
  // nlohmann's ordered_json keeps this order: the version first, then what a person reads first.
  nlohmann::ordered_json j;
  j["version"] = r.version;
  j["door"] = r.door;
  j["size"] = r.size ? json(*r.size) : json();
  j["need"] = r.need;
  j["ceiling"] = r.ceiling;
  j["headroom"] = r.headroom;
  j["batch_bytes"] = r.batch_bytes;
  j["profile"] = r.profile;
  j["gpus"] = r.gpus;
  j["workers"] = r.workers;
  j["batch_size"] = r.batch_size;
  j["reason"] = r.reason;
  if (!r.command_flag.empty()) {
    j["command_flag"] = r.command_flag;
    j["command_workers"] = r.command_workers;
  }
  return j.dump();
}

DecisionRecord parse_decision(const std::string& text, const std::string& where) {
  if (text.size() > kMaxDecisionBytes)
    throw Error(where + ": " + std::to_string(text.size()) + " bytes, more than a record's " +
                std::to_string(kMaxDecisionBytes));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw Error(where + ": not JSON");
  if (!doc.is_object()) throw Error(where + ": expected a JSON object");
  DecisionRecord r;
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer())
    throw Error(where + ": no \"version\" (a record gpu-run wrote has one)");
  if (version->get<std::int64_t>() != kDecisionVersion)
    throw Error(where + ": version " + std::to_string(version->get<std::int64_t>()) + ", this gpu-run reads version " +
                std::to_string(kDecisionVersion) + " (upgrade the reader)");
  r.door = words_at(doc, "door", where);
  if (const auto size = doc.find("size"); size != doc.end() && !size->is_null())
    r.size = number_at(doc, "size", kMaxBytes, where);
  r.need = number_at(doc, "need", kMaxBytes, where);
  r.ceiling = number_at(doc, "ceiling", kMaxBytes, where);
  r.headroom = number_at(doc, "headroom", kMaxBytes, where);
  r.batch_bytes = number_at(doc, "batch_bytes", kMaxBytes, where);
  r.profile = words_at(doc, "profile", where);
  r.gpus = static_cast<unsigned>(number_at(doc, "gpus", 1024, where));
  r.workers = number_at(doc, "workers", kMaxCount, where);
  r.batch_size = number_at(doc, "batch_size", kMaxCount, where);
  r.reason = words_at(doc, "reason", where);
  r.command_flag = words_at(doc, "command_flag", where);
  r.command_workers = number_at(doc, "command_workers", kMaxCount, where);
  return r;
}

fs::path decision_state_path(const fs::path& dir, const std::string& id) {
  const bool ok =
      !id.empty() && id.size() <= 128 && id != "." && id != ".." && std::all_of(id.begin(), id.end(), is_id_char);
  if (!ok) throw Error("container id '" + id.substr(0, 64) + "' cannot name a decision record file");
  return dir / (id + ".json");
}

void write_decision_state(const fs::path& dir, const std::string& id, const DecisionRecord& record) {
  const fs::path path = decision_state_path(dir, id);
  // /run is a tmpfs emptied at boot: the hook may be the first to need /run/gpu-run since.
  if (::mkdirat(AT_FDCWD, dir.c_str(), 0700) != 0 && errno != EEXIST) {
    if (errno != ENOENT) throw Error("create " + dir.string(), errno);
    make_directory(dir.parent_path(), 0755);
    if (::mkdirat(AT_FDCWD, dir.c_str(), 0700) != 0 && errno != EEXIST) throw Error("create " + dir.string(), errno);
  }
  write_file_atomic(path.string(), decision_text(record) + "\n", 0600, Durability::kVolatile);
}

void remove_decision_state(const fs::path& dir, const std::string& id) {
  std::error_code ec;
  try {
    fs::remove(decision_state_path(dir, id), ec);
  } catch (const Error&) {
    // Not an id a record was written for: nothing to remove.
  }
}

Recorded read_recorded(const RecordPlaces& places) {
  Recorded out;
  const auto take = [&](const std::string& text, const std::string& where) {
    try {
      out.record = parse_decision(text, where + " " + kDecisionKey);
      out.where = where;
      out.error.clear();
      return true;
    } catch (const Error& e) {
      if (out.error.empty()) out.error = e.what();
      return false;
    }
  };
  bool found = false;
  if (!places.state_dir.empty() && !places.id.empty()) {
    try {
      const fs::path path = decision_state_path(places.state_dir, places.id);
      std::error_code ec;
      if (fs::exists(path, ec))
        found = take(read_small_file(path, kMaxDecisionBytes, "the hook's record"), "hook state file");
    } catch (const Error& e) {
      out.error = e.what();
    }
  }
  if (!found)
    if (const std::string* v = lookup(places.annotations, kDecisionKey)) found = take(*v, "annotation");
  if (!found)
    if (const std::string* v = lookup(places.labels, kDecisionKey)) found = take(*v, "label");
  if (!found)
    if (const std::string* v = lookup(places.env, kEnvDecision)) found = take(*v, "environment");
  if (found) return out;
  static const std::map<std::string, std::string> kNone;
  out.legacy = recorded_request(places.env ? *places.env : kNone, places.labels ? *places.labels : kNone);
  const std::string* size = lookup(places.env, kEnvShmSize);
  if (!size) size = lookup(places.labels, kLabelShmSize);
  out.legacy_size = size && !size->empty();
  return out;
}

Recorded read_recorded(const ContainerInfo& c, const fs::path& state_dir) {
  std::map<std::string, std::string> labels = c.labels;
  for (const char* key : {kLabelProfile, kLabelGpus, kLabelShmSize})
    if (auto it = c.annotations.find(key); it != c.annotations.end()) labels.emplace(key, it->second);
  return read_recorded(RecordPlaces{&labels, &c.annotations, &c.env, c.id, state_dir});
}

GuardLimits guard_limits_of_record(const DecisionRecord& r, const GuardLimits& own, std::uint64_t host_memory) {
  GuardLimits l = own;
  l.recorded_ceiling = r.ceiling;  // a cap among the guard's own: it can only lower them
  if (host_memory) l.host_memory = host_memory;
  std::uint64_t cap = host_memory ? host_memory : UINT64_MAX;
  for (std::uint64_t c : {l.max_shm, l.recorded_ceiling, l.size_limit, l.budget_bytes.value_or(0)})
    if (c) cap = std::min(cap, c);
  l.headroom = std::min(r.headroom, cap);
  if (l.headroom && r.profile != kDefaultProfileName) {
    l.bound = std::min(r.need, cap);
    l.batch = std::min(r.batch_bytes, l.headroom);
  } else {
    l.bound = 0;
    l.batch = 0;
  }
  return l;
}

std::string describe(const DecisionRecord& r) {
  std::string out = "door=" + log_quote(r.door) + " size=" + (r.size ? format_size(*r.size) : std::string("none"));
  if (r.need) out += " need=" + format_size(r.need);
  out += " ceiling=" + (r.ceiling ? format_size(r.ceiling) : std::string("none"));
  if (!r.profile.empty()) out += " profile=" + log_quote(r.profile);
  if (r.gpus) out += " gpus=" + std::to_string(r.gpus);
  if (r.workers) out += " workers=" + std::to_string(r.workers);
  if (r.batch_size) out += " batch_size=" + std::to_string(r.batch_size);
  return out;
}

}  // namespace gpurun
