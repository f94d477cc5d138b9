#include "shm/perf_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "base/error.hpp"

namespace gpurun {

std::string perf_record_line(const PerfRecord& r) {
  nlohmann::ordered_json j;
  j["time"] = r.time;
  if (!r.source.empty()) j["source"] = r.source;
  j["engine"] = r.engine;
  j["container"] = r.container;
  j["image"] = r.image;
  j["profile"] = r.profile;
  j["gpus"] = r.gpus;
  j["workers"] = r.workers;
  j["batch_size"] = r.batch_size;
  j["prefetch_factor"] = r.prefetch_factor;
  j["planned_shm"] = r.planned_shm;
  j["applied_shm"] = r.applied_shm;
  j["shm_size"] = r.shm_size;
  j["peak_shm"] = r.peak_shm;
  j["burst_shm"] = r.burst_shm;
  j["samples"] = r.samples;
  j["duration_s"] = std::round(r.duration_s * 1000) / 1000;
  j["growths"] = r.growths;
  if (r.pin_thread) j["pin_thread"] = *r.pin_thread;
  j["exit_status"] = r.exit_status ? nlohmann::ordered_json(*r.exit_status) : nlohmann::ordered_json();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

PerfRecord parse_perf_record(const std::string& line, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    throw usage_error(where + ": not a performance record (one JSON object a line, as gpu-run --record writes)");
  PerfRecord r;
  const auto text = [&](const char* key, std::string& out) {
    if (!j.contains(key)) return;
    if (!j[key].is_string()) throw usage_error(where + ": \"" + key + "\" is not a string");
    out = j[key].get<std::string>();
  };
  const auto count = [&](const char* key, auto& out) {
    if (!j.contains(key)) return;
    if (!j[key].is_number_unsigned())
      throw usage_error(where + ": \"" + key + "\" is not a count (a whole number, 0 or more)");
    const std::uint64_t v = j[key].get<std::uint64_t>();
    using T = std::decay_t<decltype(out)>;
    if (v > std::numeric_limits<T>::max()) throw usage_error(where + ": \"" + key + "\" is out of range");
    out = static_cast<T>(v);
  };
  text("time", r.time);
  text("source", r.source);
  text("engine", r.engine);
  text("container", r.container);
  text("image", r.image);
  text("profile", r.profile);
  count("gpus", r.gpus);
  count("workers", r.workers);
  count("batch_size", r.batch_size);
  count("prefetch_factor", r.prefetch_factor);
  count("planned_shm", r.planned_shm);
  count("applied_shm", r.applied_shm);
  count("shm_size", r.shm_size);
  count("peak_shm", r.peak_shm);
  count("burst_shm", r.burst_shm);
  count("samples", r.samples);
  count("growths", r.growths);
  if (j.contains("duration_s") && j["duration_s"].is_number()) r.duration_s = j["duration_s"].get<double>();
  if (j.contains("pin_thread")) {
    if (!j["pin_thread"].is_boolean()) throw usage_error(where + ": \"pin_thread\" is not true or false");
    r.pin_thread = j["pin_thread"].get<bool>();
  }
  if (j.contains("exit_status") && !j["exit_status"].is_null()) {
    if (!j["exit_status"].is_number_integer()) throw usage_error(where + ": \"exit_status\" is not a whole number");
    r.exit_status = j["exit_status"].get<int>();
  }
  return r;
}

fs::path perf_log_path(const Config& config, const EnvLookup& env) {
  if (!config.perf_log.empty()) return config.perf_log;
  // The XDG spec says a relative XDG_STATE_HOME is invalid and must be ignored.
  if (auto state = env("XDG_STATE_HOME"); state && !state->empty() && (*state)[0] == '/')
    return fs::path(*state) / "gpu-run" / "perf.jsonl";
  if (auto home = env("HOME"); home && !home->empty())
    return fs::path(*home) / ".local" / "state" / "gpu-run" / "perf.jsonl";
  throw usage_error(
      "--record: neither XDG_STATE_HOME nor HOME is set: set perf_log in the config to say where records go");
}

UniqueFd open_perf_log(const fs::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error("--record: create directory " + path.parent_path().string() + ": " + ec.message(), ec.value());
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) {
    const int err = errno;
    throw Error("--record: open the performance log " + path.string() + ": " + std::strerror(err) +
                    " (set perf_log in the config to another file)",
                err);
  }
  return fd;
}

void append_perf_line(int fd, const std::string& line, const fs::path& path) {
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw system_error("append to the performance log " + path.string(), errno);
  if (static_cast<std::size_t>(n) != line.size())
    throw Error("append to the performance log " + path.string() + ": short write (" + std::to_string(n) + " of " +
                    std::to_string(line.size()) + " bytes; disk full?)",
                0, kExitFailure);
}

}  // namespace gpurun
