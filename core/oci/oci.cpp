#include "oci/oci.hpp"

#include <unistd.h>

#include <sstream>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/file_io.hpp"
#include "base/units.hpp"
#include "oci/gpus.hpp"
#include "oci/host.hpp"

namespace gpurun {
namespace {

using nlohmann::json;

std::map<std::string, std::string> string_map(const json& obj, const std::string& what) {
  std::map<std::string, std::string> out;
  if (obj.is_null()) return out;
  if (!obj.is_object()) throw Error(what + ": expected an object of strings");
  for (const auto& [k, v] : obj.items()) {
    if (!v.is_string()) throw Error(what + ": value of '" + k.substr(0, 60) + "' is not a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

OciState parse_state(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for "1e999"
    throw Error(std::string("OCI state on stdin: malformed JSON: ") + e.what());
  }
  if (!doc.is_object()) throw Error("OCI state on stdin: expected a JSON object");
  OciState s;
  if (!doc.contains("id") || !doc["id"].is_string() || doc["id"].get<std::string>().empty())
    throw Error("OCI state on stdin: missing 'id'");
  s.id = doc["id"].get<std::string>();
  if (!doc.contains("bundle") || !doc["bundle"].is_string() || doc["bundle"].get<std::string>().empty() ||
      doc["bundle"].get<std::string>()[0] != '/')
    throw Error("OCI state on stdin: missing or relative 'bundle'");
  s.bundle = doc["bundle"].get<std::string>();
  if (doc.contains("pid")) {
    if (!doc["pid"].is_number_integer() || doc["pid"].get<std::int64_t>() <= 0 ||
        doc["pid"].get<std::int64_t>() > (1 << 22))
      throw Error("OCI state on stdin: 'pid' is not a process id");
    s.pid = static_cast<int>(doc["pid"].get<std::int64_t>());
  }
  if (doc.contains("status")) {
    if (!doc["status"].is_string()) throw Error("OCI state on stdin: 'status' is not a string");
    s.status = doc["status"].get<std::string>();
  }
  if (doc.contains("annotations")) s.annotations = string_map(doc["annotations"], "OCI state: annotations");
  return s;
}

OciState read_state(int fd) { return parse_state(read_bounded(fd, kMaxStateBytes, "OCI state on stdin")); }

json parse_spec(const std::string& text, SpecParts parts, const std::string& source) {
  // keys[d] is the key being parsed at depth d (1 = the top-level object's keys).
  std::vector<std::string> keys;
  json::parser_callback_t facts_only = [&keys](int depth, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key) return true;
    const auto d = static_cast<std::size_t>(depth);
    keys.resize(d + 1);
    keys[d] = parsed.get<std::string>();
    const std::string& k = keys[d];
    if (d == 1) return k == "root" || k == "annotations" || k == "process" || k == "linux" || k == "mounts";
    if (d == 2 && keys[1] == "process") return k == "env" || k == "args";
    if (d == 2 && keys[1] == "linux")
      return k == "resources" || k == "devices" || k == "namespaces" || k == "cgroupsPath";
    return true;
  };
  try {
    json spec = parts == SpecParts::kFacts ? json::parse(text, facts_only) : json::parse(text);
    if (!spec.is_object()) throw Error(source + ": expected a JSON object");
    return spec;
  } catch (const json::exception& e) {  // parse_error, or out_of_range for "1e999"
    throw Error(source + ": malformed JSON: " + e.what());
  }
}

json load_spec(const fs::path& bundle, SpecParts parts) {
  const fs::path path = bundle / "config.json";
  return parse_spec(read_small_file(path, kMaxSpecBytes, "bundle config"), parts, path.string());
}

SpecFacts spec_facts(const json& spec, const fs::path& bundle) {
  SpecFacts f;
  std::string root = "rootfs";
  if (spec.contains("root") && spec["root"].is_object() && spec["root"].contains("path") &&
      spec["root"]["path"].is_string())
    root = spec["root"]["path"].get<std::string>();
  f.rootfs = fs::path(root).is_absolute() ? fs::path(root) : bundle / root;
  if (spec.contains("annotations")) f.annotations = string_map(spec["annotations"], "config.json: annotations");
  if (spec.contains("process") && spec["process"].is_object() && spec["process"].contains("env") &&
      spec["process"]["env"].is_array()) {
    for (const auto& e : spec["process"]["env"]) {
      if (!e.is_string()) continue;
      const std::string s = e.get<std::string>();
      auto eq = s.find('=');
      if (eq != std::string::npos) f.env[s.substr(0, eq)] = s.substr(eq + 1);
    }
  }
  if (spec.contains("process") && spec["process"].is_object() && spec["process"].contains("args") &&
      spec["process"]["args"].is_array()) {
    for (const auto& a : spec["process"]["args"])
      if (a.is_string()) f.args.push_back(a.get<std::string>());
  }
  static const json kEmpty = json::object();
  auto member = [](const json& obj, const char* key) -> const json& {
    if (!obj.is_object()) return kEmpty;
    auto it = obj.find(key);
    return it == obj.end() ? kEmpty : *it;
  };
  const json& lx = member(spec, "linux");
  if (lx.is_object()) {
    const json& res = member(lx, "resources");
    if (res.is_object()) {
      const json& mem = member(res, "memory");
      if (mem.is_object() && mem.contains("limit") && mem["limit"].is_number_integer() &&
          mem["limit"].get<std::int64_t>() > 0)
        f.memory_limit = mem["limit"].get<std::uint64_t>();
      const json& cpu = member(res, "cpu");
      if (cpu.is_object()) {
        if (cpu.contains("quota") && cpu["quota"].is_number_integer() && cpu["quota"].get<std::int64_t>() > 0) {
          std::int64_t period = cpu.value("period", json(100000)).is_number_integer()
                                    ? cpu.value("period", json(100000)).get<std::int64_t>()
                                    : 100000;
          if (period > 0) f.cpu_quota = static_cast<double>(cpu["quota"].get<std::int64_t>()) / period;
        }
        if (cpu.contains("cpus") && cpu["cpus"].is_string() && !cpu["cpus"].get<std::string>().empty())
          f.cpuset_cpus = parse_cpu_list(cpu["cpus"].get<std::string>());
      }
    }
    if (lx.contains("cgroupsPath") && lx["cgroupsPath"].is_string())
      f.cgroups_path = lx["cgroupsPath"].get<std::string>();
    if (lx.contains("devices") && lx["devices"].is_array()) {
      for (const auto& d : lx["devices"])
        if (d.is_object() && d.contains("path") && d["path"].is_string() &&
            is_gpu_device_path(d["path"].get<std::string>()))
          ++f.gpu_devices;
    }
    if (lx.contains("namespaces") && lx["namespaces"].is_array()) {
      for (const auto& ns : lx["namespaces"]) {
        if (ns.is_object() && ns.value("type", json("")) == "ipc") {
          f.has_ipc_namespace = true;
          f.ipc_namespace_path =
              ns.contains("path") && ns["path"].is_string() && !ns["path"].get<std::string>().empty();
        }
      }
    }
  }
  int idx = find_shm_mount(spec);
  if (idx >= 0) {
    const json& m = spec["mounts"][static_cast<std::size_t>(idx)];
    const json* type = m.contains("type") ? &m["type"] : nullptr;
    f.shm_type = type && type->is_string() && *type == "tmpfs"  ? SpecShmType::kTmpfs
                 : type && type->is_string() && *type == "bind" ? SpecShmType::kBind
                                                                : SpecShmType::kOther;
    if (m.contains("source") && m["source"].is_string()) f.shm_source = m["source"].get<std::string>();
    if (m.contains("options") && m["options"].is_array()) {
      for (const auto& o : m["options"]) {
        if (!o.is_string()) continue;
        std::string s = o.get<std::string>();
        if (s.compare(0, 5, "bind") == 0 || s == "rbind") f.shm_type = SpecShmType::kBind;
        if (s.compare(0, 5, "size=") == 0) {
          try {
            f.shm_size = parse_size(s.substr(5), "size");
          } catch (const Error&) {
            // The engine's option, not the container's request: a size gpu-run cannot read is an
            // unknown current size; a door that acts writes its own size= over it, else runc's
            // mount meets it.
          }
        }
      }
    }
  }
  return f;
}

bool is_engine_shm_source(const std::string& source) {
  fs::path p = fs::path(source).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "/x/shm/"
  if (!p.is_absolute() || p.filename() != "shm") return false;
  const fs::path dir = p.parent_path();
  const fs::path up = dir.parent_path();
  if (dir.filename() == "userdata") return true;  // podman, CRI-O
  if (up.filename() == "sandboxes" && up.parent_path().filename() == "io.containerd.grpc.v1.cri")
    return true;                                                                     // containerd
  return dir.filename() == "mounts" && up.parent_path().filename() == "containers";  // docker
}

bool is_kubelet_empty_dir(const std::string& source) {
  return source.find("/volumes/kubernetes.io~empty-dir/") != std::string::npos;
}

bool uses_host_shm(const SpecFacts& spec) {
  if (!spec.has_ipc_namespace) return true;
  return spec.shm_type == SpecShmType::kBind && (!spec.shm_source || !is_engine_shm_source(*spec.shm_source));
}

int find_shm_mount(const json& spec) {
  if (!spec.contains("mounts") || !spec["mounts"].is_array()) return -1;
  int found = -1;
  for (std::size_t i = 0; i < spec["mounts"].size(); ++i) {
    const json& m = spec["mounts"][i];
    if (!m.is_object() || !m.contains("destination") || !m["destination"].is_string()) continue;
    std::string d = m["destination"].get<std::string>();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (d == "/dev/shm") found = static_cast<int>(i);  // the last one wins, as when mounted in order
  }
  return found;
}

void set_tmpfs_size(json& mount, std::uint64_t bytes) {
  json options = json::array();
  if (mount.contains("options") && mount["options"].is_array()) {
    for (const auto& o : mount["options"])
      if (!(o.is_string() && o.get<std::string>().compare(0, 5, "size=") == 0)) options.push_back(o);
  }
  options.push_back("size=" + std::to_string(bytes));
  mount["options"] = options;
}

bool add_hook(json& spec, const std::string& stage, const std::string& path, const std::vector<std::string>& args) {
  if (!spec.contains("hooks") || !spec["hooks"].is_object()) spec["hooks"] = json::object();
  json& hooks = spec["hooks"];
  if (!hooks.contains(stage) || !hooks[stage].is_array()) hooks[stage] = json::array();
  for (const auto& stage_name : {"prestart", "createRuntime"}) {
    if (!hooks.contains(stage_name) || !hooks[stage_name].is_array()) continue;
    for (const auto& h : hooks[stage_name])
      if (h.is_object() && h.value("path", json("")) == path) return false;
  }
  hooks[stage].push_back({{"path", path}, {"args", args}});
  return true;
}

}  // namespace gpurun
