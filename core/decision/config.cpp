#include "decision/config.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/file_io.hpp"
#include "profiles/profile.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

Error bad(const std::string& source, const std::string& key, const std::string& expected) {
  return usage_error(source + ": key '" + key + "': expected " + expected);
}

std::string one_of(const std::string& source, const std::string& key, const json& v,
                   std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) list += std::string(list.empty() ? "" : "|") + a;
  if (!v.is_string()) throw bad(source, key, list);
  std::string s = v.get<std::string>();
  for (const char* a : allowed)
    if (s == a) return s;
  throw bad(source, key, list + ", got \"" + s.substr(0, 40) + "\"");
}

// A number in (0, 1].
double fraction(const std::string& source, const std::string& key, const json& v) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 || v.get<double>() > 1)
    throw bad(source, key, "a number in (0, 1]");
  return v.get<double>();
}

GuardPolicy parse_guard(const std::string& source, const json& v) {
  if (!v.is_object()) throw bad(source, "guard", "an object with min_free_fraction and step_fraction");
  GuardPolicy g;
  for (const auto& [key, value] : v.items()) {
    if (key == "min_free_fraction")
      g.min_free_fraction = fraction(source, "guard." + key, value);
    else if (key == "step_fraction")
      g.step_fraction = fraction(source, "guard." + key, value);
    else
      throw usage_error(source + ": key 'guard." + key + "': unknown key (known: min_free_fraction, step_fraction)");
  }
  return g;
}

fs::path absolute_path(const std::string& source, const std::string& key, const json& v) {
  if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>()[0] != '/')
    throw bad(source, key, "an absolute path");
  return v.get<std::string>();
}

}  // namespace

fs::path config_path(const std::optional<fs::path>& explicit_path) {
  if (explicit_path && !explicit_path->empty()) return *explicit_path;
  if (const char* env = std::getenv("GPU_RUN_CONFIG"); env && *env) return env;
  return kDefaultConfigPath;
}

Config parse_config(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for "1e999"
    throw usage_error(source + ": malformed JSON: " + std::string(e.what()) +
                      " (fix the file or remove it to use the defaults)");
  }
  if (!doc.is_object()) throw usage_error(source + ": expected a JSON object");
  Config c;
  c.source = source;
  for (const auto& [key, v] : doc.items()) {
    if (key == "default_profile") {
      if (v.is_null())
        c.default_profile.reset();
      else if (v.is_string() && is_valid_profile_name(v.get<std::string>()))
        c.default_profile = v.get<std::string>();
      else
        throw bad(source, key, "null or a profile name");
    } else if (key == "engine") {
      c.engine = one_of(source, key, v, {"docker", "podman"});
    } else if (key == "gpu_request") {
      c.gpu_request = one_of(source, key, v, {"docker", "cdi", "none"});
    } else if (key == "profile_dirs") {
      if (!v.is_array()) throw bad(source, key, "an array of absolute paths");
      for (const auto& d : v) c.profile_dirs.push_back(absolute_path(source, key, d));
    } else if (key == "runtimes") {
      if (!v.is_array() || v.empty()) throw bad(source, key, "a non-empty array of runtime names or paths");
      c.runtimes.clear();
      for (const auto& r : v) {
        if (!r.is_string() || r.get<std::string>().empty()) throw bad(source, key, "strings");
        c.runtimes.push_back(r.get<std::string>());
      }
    } else if (key == "hook_path") {
      c.hook_path = absolute_path(source, key, v);
    } else if (key == "log_file") {
      c.log_file = absolute_path(source, key, v);
    } else if (key == "perf_log") {
      c.perf_log = absolute_path(source, key, v);
    } else if (key == "log_level") {
      c.log_level = one_of(source, key, v, {"error", "warn", "info", "debug"});
    } else if (key == "on_error") {
      c.on_error = one_of(source, key, v, {"fail", "warn"}) == "fail" ? OnError::kFail : OnError::kWarn;
    } else if (key == "memory_fraction_max") {
      c.memory_fraction_max = fraction(source, key, v);
    } else if (key == "guard") {
      c.guard = parse_guard(source, v);
    } else if (key == "$schema" || key == "comment") {
      continue;
    } else {
      throw usage_error(
          source + ": key '" + key +
          "': unknown key (known: default_profile, engine, gpu_request, "
          "profile_dirs, runtimes, hook_path, log_file, log_level, on_error, memory_fraction_max, perf_log, guard)");
    }
  }
  return c;
}

Config load_config(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return Config{};
  return parse_config(read_small_file(path, 1 << 20, "config"), path.string());
}

std::vector<std::string> passthrough_runtimes(const fs::path& path) {
  try {
    return load_config(path).runtimes;
  } catch (const Error&) {
    // The config's own runtimes when they read, though another key does not.
  }
  try {
    const json doc = json::parse(read_small_file(path, 1 << 20, "config"), nullptr, /*allow_exceptions=*/false);
    if (doc.is_object() && doc.contains("runtimes")) {
      json only = json::object();
      only["runtimes"] = doc["runtimes"];
      return parse_config(only.dump(), path.string()).runtimes;
    }
  } catch (const std::exception&) {
    // Unreadable, or its runtimes are malformed too: the default.
  }
  return Config{}.runtimes;
}

std::string effective_gpu_request(const Config& config, const std::string& engine) {
  if (!config.gpu_request.empty()) return config.gpu_request;
  return engine == "podman" ? "cdi" : "docker";
}

}  // namespace gpurun
