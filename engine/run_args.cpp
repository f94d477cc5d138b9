#include "engine/run_args.hpp"

#include <cstring>
#include <set>
#include <utility>

#include "base/error.hpp"

namespace gpurun {
namespace {

struct OwnOption {
  const char* name;
  bool takes_value;
};

constexpr OwnOption kOwnOptions[] = {
    {"--profile", true},         {"--gpus", true},        {"--workers", true},  {"--batch-size", true},
    {"--prefetch-factor", true}, {"--profile-dir", true}, {"--engine", true},   {"--gpu-request", true},
    {"--dry-run", false},        {"--explain", false},    {"--json", false},    {"--help", false},
    {"--version", false},        {"--record", false},     {"--timeline", true}, {"--guard", false},
    {"--over-budget", false},
};

// Where each of gpu-run's own options lands in WrapperOptions (--profile-dir, repeatable, is
// appended by hand).
constexpr std::pair<const char*, bool WrapperOptions::*> kFlagFields[] = {
    {"--dry-run", &WrapperOptions::dry_run}, {"--explain", &WrapperOptions::explain},
    {"--json", &WrapperOptions::json},       {"--help", &WrapperOptions::help},
    {"--version", &WrapperOptions::version}, {"--record", &WrapperOptions::record},
    {"--guard", &WrapperOptions::guard},     {"--over-budget", &WrapperOptions::over_budget}};
constexpr std::pair<const char*, std::optional<std::string> SizingFlags::*> kSizingFields[] = {
    {"--profile", &SizingFlags::profile},
    {"--gpus", &SizingFlags::gpus},
    {"--workers", &SizingFlags::workers},
    {"--batch-size", &SizingFlags::batch_size},
    {"--prefetch-factor", &SizingFlags::prefetch_factor},
    {"--gpu-request", &SizingFlags::gpu_request}};
constexpr std::pair<const char*, std::optional<std::string> WrapperOptions::*> kValueFields[] = {
    {"--engine", &WrapperOptions::engine}, {"--timeline", &WrapperOptions::timeline}};

// Long options of `docker run` and `podman run` that take no value. Every other long
// option takes one (as `--opt value` or `--opt=value`).
const std::set<std::string>& engine_flags() {
  static const std::set<std::string> flags = {"--rm",
                                              "--detach",
                                              "--interactive",
                                              "--tty",
                                              "--privileged",
                                              "--init",
                                              "--read-only",
                                              "--publish-all",
                                              "--no-healthcheck",
                                              "--oom-kill-disable",
                                              "--sig-proxy",
                                              "--disable-content-trust",
                                              "--quiet",
                                              "--use-api-socket",
                                              "--replace",
                                              "--rootfs",
                                              "--rmi",
                                              "--no-hosts",
                                              "--env-host",
                                              "--http-proxy",
                                              "--read-only-tmpfs",
                                              "--tls-verify",
                                              "--passwd",
                                              "--no-healthcheck",
                                              "--help"};
  return flags;
}

// Short options that take no value: -d -i -t -P -q.
bool is_short_flag(char c) { return std::strchr("ditPq", c) != nullptr; }

const OwnOption* find_own(const std::string& name) {
  for (const auto& o : kOwnOptions)
    if (name == o.name) return &o;
  return nullptr;
}

}  // namespace

WrapperOptions split_wrapper_args(const std::vector<std::string>& args) {
  WrapperOptions opts;
  std::size_t i = 0;
  auto value_of = [&](const std::string& name, std::optional<std::string> inline_value) -> std::string {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size()) throw usage_error(name + ": missing value (see gpu-run --help)");
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      auto eq = arg.find('=');
      std::string name = arg.substr(0, eq);
      std::optional<std::string> inline_value;
      if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
      if (const OwnOption* own = find_own(name)) {
        if (!own->takes_value) {
          if (inline_value) throw usage_error(name + ": takes no value");
          for (const auto& [flag, field] : kFlagFields)
            if (name == flag) opts.*field = true;
          continue;
        }
        std::string v = value_of(name, inline_value);
        for (const auto& [option, field] : kSizingFields)
          if (name == option) opts.sizing.*field = v;
        for (const auto& [option, field] : kValueFields)
          if (name == option) opts.*field = v;
        if (name == "--profile-dir") opts.sizing.profile_dirs.push_back(v);
        continue;
      }
      opts.engine_options.push_back(arg);
      if (!inline_value && !engine_flags().count(name)) {
        if (i + 1 >= args.size()) throw usage_error(name + ": missing value (an option of the engine's run command)");
        opts.engine_options.push_back(args[++i]);
      }
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      opts.engine_options.push_back(arg);
      // A cluster such as -it or -itv a:b or -eFOO=1: a value option consumes the rest or the next arg.
      for (std::size_t k = 1; k < arg.size(); ++k) {
        if (is_short_flag(arg[k])) continue;
        if (k + 1 == arg.size()) {
          if (i + 1 >= args.size())
            throw usage_error(std::string("-") + arg[k] + ": missing value (an option of the engine's run command)");
          opts.engine_options.push_back(args[++i]);
        }
        break;
      }
      continue;
    }
    break;
  }
  if (opts.help || opts.version) return opts;
  if (opts.timeline && !opts.record && !opts.guard)
    throw usage_error("--timeline " + opts.timeline->substr(0, 80) +
                      ": the timeline is drawn from --record's samples: add --record or --guard (or follow a running "
                      "container with gpu-run-ctl watch --timeline FILE)");
  if (opts.timeline && opts.timeline->empty()) throw usage_error("--timeline: empty path: give FILE.svg");
  if (i >= args.size())
    throw usage_error("missing IMAGE: usage: gpu-run [gpu-run options] [docker run options] IMAGE [COMMAND [ARG...]]");
  opts.image = args[i++];
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return opts;
}

EngineOptionFacts scan_engine_options(const std::vector<std::string>& o) {
  EngineOptionFacts facts;
  auto mounts_host_shm = [&facts](const std::string& spec) {
    // -v SRC:DST[:opts]
    auto a = spec.find(':');
    if (a == std::string::npos) return false;
    auto b = spec.find(':', a + 1);
    std::string src = spec.substr(0, a),
                dst = spec.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
    if (dst != "/dev/shm" || src.empty() || src[0] != '/') return false;
    facts.shm_bind_source = src;
    return true;
  };
  // The value of `key` in a comma-separated option list ("rw,size=1g"), if it is there.
  auto option_value = [](const std::string& list, const std::string& key) -> std::optional<std::string> {
    std::size_t pos = 0;
    while (pos <= list.size()) {
      const std::size_t end = std::min(list.find(',', pos), list.size());
      const std::string item = list.substr(pos, end - pos);
      if (item.compare(0, key.size() + 1, key + "=") == 0) return item.substr(key.size() + 1);
      pos = end + 1;
    }
    return std::nullopt;
  };
  // --tmpfs /dev/shm[:opts]: the user's own tmpfs replaces the engine's /dev/shm.
  auto tmpfs_onto_shm = [&](const std::string& spec) {
    const auto colon = spec.find(':');
    std::string dst = spec.substr(0, colon);
    while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
    if (dst != "/dev/shm") return;
    facts.tmpfs_shm = true;
    if (colon != std::string::npos) facts.tmpfs_shm_size = option_value(spec.substr(colon + 1), "size");
    facts.shm_size_flag = "--tmpfs " + spec;
  };
  auto mount_targets_shm = [&](const std::string& spec) {
    // --mount type=bind,source=/dev/shm,target=/dev/shm (or type=tmpfs,...,tmpfs-size=BYTES)
    const bool tmpfs = spec.find("type=tmpfs") != std::string::npos;
    for (const char* key : {"target=/dev/shm", "dst=/dev/shm", "destination=/dev/shm"}) {
      auto pos = spec.find(key);
      if (pos != std::string::npos) {
        auto end = pos + std::strlen(key);
        if (end != spec.size() && spec[end] != ',' && spec[end] != '/') continue;
        if (tmpfs) {
          facts.tmpfs_shm = true;
          facts.tmpfs_shm_size = option_value(spec, "tmpfs-size");
          facts.shm_size_flag = "--mount " + spec;
          return false;
        }
        for (const char* src : {"source", "src"})
          if (auto v = option_value(spec, src)) facts.shm_bind_source = *v;
        return true;
      }
    }
    return false;
  };
  for (std::size_t i = 0; i < o.size(); ++i) {
    const std::string& arg = o[i];
    std::string name = arg, value;
    bool has_value = false;
    if (arg.compare(0, 2, "--") == 0) {
      auto eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_value = true;
      } else if (!engine_flags().count(arg) && i + 1 < o.size()) {
        value = o[i + 1];
        has_value = true;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      // Short cluster: find its value option, if any.
      for (std::size_t k = 1; k < arg.size(); ++k) {
        if (is_short_flag(arg[k])) continue;
        name = std::string("-") + arg[k];
        if (k + 1 < arg.size())
          value = arg.substr(k + 1);
        else if (i + 1 < o.size())
          value = o[i + 1];
        has_value = true;
        break;
      }
    }
    if (!has_value) continue;
    if (name == "--shm-size")
      facts.shm_size = value;
    else if (name == "--tmpfs")
      tmpfs_onto_shm(value);
    else if (name == "--ipc")
      facts.ipc = value;
    else if (name == "--memory" || name == "-m")
      facts.memory = value;
    else if (name == "--cpus")
      facts.cpus = value;
    else if (name == "--cpuset-cpus")
      facts.cpuset_cpus = value;
    else if (name == "--env" || name == "-e")
      facts.env.push_back(value);
    else if (name == "--env-file")
      facts.env_files.push_back(value);
    else if ((name == "--volume" || name == "-v") && mounts_host_shm(value))
      facts.host_shm_mount = true;
    else if (name == "--mount" && mount_targets_shm(value))
      facts.host_shm_mount = true;
    // Skip the value we just read when it was a separate argument.
    if (arg.compare(0, 2, "--") == 0 && arg.find('=') == std::string::npos)
      ++i;
    else if (arg[0] == '-' && arg.compare(0, 2, "--") != 0 && name.size() == 2 && arg.find(name[1]) + 1 == arg.size())
      ++i;
  }
  // The engine mounts a user's tmpfs over its own /dev/shm: its size is the user's, not --shm-size's.
  if (facts.tmpfs_shm)
    facts.shm_size = facts.tmpfs_shm_size;
  else if (facts.shm_size)
    facts.shm_size_flag = "--shm-size " + *facts.shm_size;
  return facts;
}

std::string shell_quote(const std::string& arg) {
  if (arg.empty()) return "''";
  bool safe = true;
  for (unsigned char c : arg)
    if (!(std::isalnum(c) || std::strchr("@%+=:,./-_", c))) safe = false;
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace gpurun
