#include "profiles/profile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.hpp"
#include "base/json_error.hpp"
#include "base/units.hpp"

namespace gpurun {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::map<std::string, std::uint64_t>& dtype_sizes() {
  static const std::map<std::string, std::uint64_t> sizes = {
      {"float64", 8}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1}};
  return sizes;
}

// PyTorch's other names for the same dtypes (torch.float is torch.float32).
const std::map<std::string, std::string>& dtype_aliases() {
  static const std::map<std::string, std::string> aliases = {{"double", "float64"}, {"float", "float32"},
                                                             {"half", "float16"},   {"long", "int64"},
                                                             {"int", "int32"},      {"short", "int16"}};
  return aliases;
}

const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "$schema",     "schema",       "name",         "description",     "extends",
      "fields",      "sample_bytes", "batch_size",   "workers_per_gpu", "prefetch_factor",
      "pin_memory",  "headroom",     "nccl_reserve", "min_shm",         "max_shm",
      "calibration", "nccl",         "loaders",      "collate",         "engines"};
  return keys;
}

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "integer " + v.dump();
  if (v.is_number()) return "number " + v.dump();
  std::string dumped = v.dump();
  if (dumped.size() > 40) dumped = dumped.substr(0, 40) + "...";
  return std::string(v.type_name()) + " " + dumped;
}

Error key_error(const std::string& source, const std::string& key, const std::string& expected, const json& got) {
  return usage_error(source + ": key '" + key + "': expected " + expected + ", got " + type_name(got));
}

Collate collate_value(const std::string& source, const std::string& key, const json& v) {
  if (v == "stack") return Collate::stack;
  if (v == "list") return Collate::list;
  throw key_error(source, key,
                  "\"stack\" (default_collate or a padding collate: one tensor per field) or \"list\" (each "
                  "sample's tensors as they are, as tuple(zip(*batch)))",
                  v);
}

LoaderOrder order_value(const std::string& source, const std::string& key, const json& v) {
  for (LoaderOrder o : {LoaderOrder::any, LoaderOrder::first, LoaderOrder::last})
    if (v == loader_order_name(o)) return o;
  throw key_error(source, key,
                  "\"any\" (the default: it may run before, beside or after the others), \"first\" (its workers "
                  "start once, before any other loader's first batch) or \"last\" (one pass after every other "
                  "loader's last pass, as a test after training)",
                  v);
}

std::uint64_t positive_int(const std::string& source, const std::string& key, const json& v, std::uint64_t max,
                           bool allow_zero = false) {
  const std::string expected =
      std::string(allow_zero ? "a whole number >= 0" : "a whole number >= 1") + " and <= " + std::to_string(max);
  if (!v.is_number_integer()) throw key_error(source, key, expected, v);
  if (v.is_number_unsigned()) {
    auto n = v.get<std::uint64_t>();
    if (n > max || (n == 0 && !allow_zero)) throw key_error(source, key, expected, v);
    return n;
  }
  auto n = v.get<std::int64_t>();
  if (n < 0 || (n == 0 && !allow_zero) || static_cast<std::uint64_t>(n) > max)
    throw key_error(source, key, expected, v);
  return static_cast<std::uint64_t>(n);
}

// Sizes in profiles are strings ("1g") or byte counts.
std::uint64_t size_value(const std::string& source, const std::string& key, const json& v) {
  if (v.is_number_integer()) return positive_int(source, key, v, kTiB * 1024, true);
  if (!v.is_string()) throw key_error(source, key, "a size such as \"512m\" or a byte count", v);
  return parse_size(v.get<std::string>(), source + ": key '" + key + "'");  // a usage error
}

void validate_fields(const std::string& source, const json& v, const std::string& key = "fields") {
  if (!v.is_array() || v.empty()) throw key_error(source, key, "a non-empty array of {name, shape, dtype}", v);
  std::set<std::string> names;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& f = v[i];
    const std::string where = key + "[" + std::to_string(i) + "]";
    if (!f.is_object()) throw key_error(source, where, "an object {name, shape, dtype}", f);
    for (const auto& [k, val] : f.items()) {
      if (k != "name" && k != "shape" && k != "dtype")
        throw usage_error(source + ": key '" + where + "." + k + "': unknown key (expected name, shape, dtype)");
      (void)val;
    }
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      throw key_error(source, where + ".name", "a non-empty string", f.value("name", json()));
    if (!names.insert(f["name"].get<std::string>()).second)
      throw usage_error(source + ": key '" + where + ".name': duplicate field name '" + f["name"].get<std::string>() +
                        "'");
    if (!f.contains("shape") || !f["shape"].is_array() || f["shape"].size() > 8)
      throw key_error(source, where + ".shape", "an array of at most 8 dimensions, [] for a scalar",
                      f.value("shape", json()));
    long double elements = 1;
    for (std::size_t d = 0; d < f["shape"].size(); ++d) {
      elements *= static_cast<long double>(
          positive_int(source, where + ".shape[" + std::to_string(d) + "]", f["shape"][d], 1u << 30));
    }
    if (elements > static_cast<long double>(kTiB))
      throw usage_error(source + ": key '" + where + ".shape': a sample of more than 2^40 elements is not plausible");
    if (!f.contains("dtype") || !f["dtype"].is_string() || !canonical_dtype(f["dtype"].get<std::string>()))
      throw key_error(source, where + ".dtype", kDtypeNames, f.value("dtype", json()));
  }
}

void validate_calibration(const std::string& source, const json& v) {
  if (!v.is_object()) throw key_error(source, "calibration", "an object", v);
  static const std::set<std::string> keys = {"peak_shm", "burst_shm",       "workers",    "batch_size",
                                             "gpus",     "prefetch_factor", "pin_memory", "measured_at"};
  for (const auto& [k, val] : v.items()) {
    const std::string key = "calibration." + k;
    if (!keys.count(k)) throw usage_error(source + ": key '" + key + "': unknown key");
    if (k == "peak_shm" || k == "burst_shm")
      size_value(source, key, val);
    else if (k == "pin_memory") {
      if (!val.is_boolean()) throw key_error(source, key, "true or false", val);
    } else if (k == "measured_at") {
      if (!val.is_string()) throw key_error(source, key, "a string", val);
    } else if (k == "workers" || k == "gpus")
      positive_int(source, key, val, 4096, true);
    else
      positive_int(source, key, val, 1u << 20);
  }
  for (const char* k : {"peak_shm", "workers", "batch_size", "gpus", "prefetch_factor"})
    if (!v.contains(k)) throw usage_error(source + ": key 'calibration." + k + "': missing");
}

void validate_sample_bytes(const std::string& source, const std::string& key, const json& v) {
  if (v.is_string()) {
    if (size_value(source, key, v) == 0) throw key_error(source, key, "a size of at least 1 byte", v);
  } else {
    positive_int(source, key, v, kTiB);
  }
}

void validate_workers(const std::string& source, const std::string& key, const json& v) {
  if (v.is_string() && v.get<std::string>() == "auto") return;
  if (!v.is_number_integer()) throw key_error(source, key, "\"auto\" or a whole number 0..1024", v);
  positive_int(source, key, v, 1024, true);
}

// The nccl section: what the profile knows of NCCL between the ranks of one node.
void validate_nccl(const std::string& source, const json& v) {
  if (!v.is_object()) throw key_error(source, "nccl", "an object {transport, channels, buffsize, ...}", v);
  static const std::set<std::string> keys = {"transport",      "channels", "buffsize",       "ll_buffsize",
                                             "ll128_buffsize", "measured", "measured_ranks", "host_mem"};
  for (const auto& [k, val] : v.items()) {
    const std::string key = "nccl." + k;
    if (!keys.count(k))
      throw usage_error(source + ": key '" + key +
                        "': unknown key (expected transport, channels, buffsize, ll_buffsize, ll128_buffsize, "
                        "measured, measured_ranks, host_mem)");
    if (k == "transport") {
      if (!val.is_string() || (val != "shm" && val != "p2p" && val != "none"))
        throw key_error(source, key, "\"shm\", \"p2p\" or \"none\"", val);
    } else if (k == "host_mem") {
      if (!val.is_string() || (val != "shm" && val != "cumem"))
        throw key_error(source, key,
                        "\"shm\" (the SHM transport's buffers are files on /dev/shm) or \"cumem\" (cuMem host "
                        "memory: NCCL_CUMEM_HOST_ENABLE, NCCL 2.23+ with CUDA 12.2+)",
                        val);
    } else if (k == "channels") {
      positive_int(source, key, val, 64);
    } else if (k == "measured_ranks") {
      if (positive_int(source, key, val, 1024) < 2)
        throw key_error(source, key, "a whole number >= 2 (NCCL puts no segment on /dev/shm for one rank)", val);
    } else {
      size_value(source, key, val);
    }
  }
}

// The engines section: one object per engine that shares /dev/shm, each with its own keys; null
// drops the engine a parent names.
const std::map<std::string, std::vector<std::string>>& engine_keys() {
  static const std::map<std::string, std::vector<std::string>> keys = {
      {"vllm",
       {"tensor_parallel_size", "mq_max_chunk_bytes", "response_chunk_bytes", "max_chunks", "kv_offloading_size"}},
      {"ray", {"object_store_memory", "object_store_fraction", "object_store_cap", "plasma_directory"}},
      {"triton_python", {"instances", "shm_default_byte_size", "shm_growth_byte_size", "inflight_bytes"}},
      {"deepspeed", {"ranks"}}};
  return keys;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// A size that must be at least `min` bytes, with what it stands for in the message.
void size_at_least(const std::string& source, const std::string& key, const json& v, std::uint64_t min,
                   const std::string& why) {
  if (size_value(source, key, v) < min) throw key_error(source, key, "a size of at least " + why, v);
}

void validate_engine(const std::string& source, const std::string& engine, const json& v) {
  const std::string where = "engines." + engine;
  const std::vector<std::string>& known = engine_keys().at(engine);
  if (!v.is_object()) throw key_error(source, where, "an object {" + joined(known) + "} or null", v);
  for (const auto& [k, val] : v.items()) {
    const std::string key = where + "." + k;
    if (std::find(known.begin(), known.end(), k) == known.end())
      throw usage_error(source + ": key '" + key + "': unknown key (expected " + joined(known) + ")");
    if (k == "tensor_parallel_size" || k == "ranks") {
      positive_int(source, key, val, 1024);
    } else if (k == "max_chunks") {
      positive_int(source, key, val, 1024);
    } else if (k == "instances") {
      positive_int(source, key, val, 4096);
    } else if (k == "mq_max_chunk_bytes" || k == "response_chunk_bytes" || k == "shm_growth_byte_size" ||
               k == "object_store_cap") {
      size_at_least(source, key, val, 1, "1 byte");
    } else if (k == "shm_default_byte_size") {
      // Triton refuses less: "shm-default-byte-size can't be smaller than 4 MiBs" (its check is 1 MiB).
      size_at_least(source, key, val, 1024 * 1024, "1 MiB (Triton's python backend refuses less)");
    } else if (k == "object_store_memory") {
      // ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES: Ray refuses a smaller store.
      size_at_least(source, key, val, 75 * 1024 * 1024, "75 MiB (Ray refuses a smaller object store)");
    } else if (k == "object_store_fraction") {
      if (!val.is_number() || !std::isfinite(val.get<double>()) || val.get<double>() <= 0 || val.get<double>() > 1)
        throw key_error(source, key, "a number above 0 and at most 1 (Ray's default is 0.3)", val);
    } else if (k == "plasma_directory") {
      if (!val.is_string() || val.get<std::string>().empty() || val.get<std::string>()[0] != '/')
        throw key_error(source, key, "an absolute path (Ray's --plasma-directory)", val);
    } else {
      size_value(source, key, val);
    }
  }
  if (v.contains("object_store_memory") && v.contains("object_store_fraction"))
    throw usage_error(source + ": keys '" + where + ".object_store_memory' and '" + where +
                      ".object_store_fraction' exclude each other: give one (Ray uses the size when both are set)");
}

void validate_engines(const std::string& source, const json& v) {
  std::vector<std::string> names;
  for (const auto& [name, keys] : engine_keys()) names.push_back(name);
  if (!v.is_object()) throw key_error(source, "engines", "an object {" + joined(names) + "}", v);
  for (const auto& [name, val] : v.items()) {
    if (!engine_keys().count(name))
      throw usage_error(source + ": key 'engines." + name + "': unknown engine (expected " + joined(names) + ")");
    if (!val.is_null()) validate_engine(source, name, val);
  }
}

void validate_loaders(const std::string& source, const json& v) {
  if (!v.is_array() || v.empty() || v.size() > 16)
    throw key_error(source, "loaders", "an array of 1 to 16 loaders {name, batch_size, workers, ...}", v);
  static const std::set<std::string> keys = {"name",         "fields",
                                             "sample_bytes", "batch_size",
                                             "workers",      "prefetch_factor",
                                             "pin_memory",   "persistent_workers",
                                             "collate",      "order"};
  std::set<std::string> names;
  std::string first_order;  // the loader ordered "first", if one is
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& l = v[i];
    const std::string where = "loaders[" + std::to_string(i) + "]";
    if (!l.is_object()) throw key_error(source, where, "an object {name, batch_size, workers, ...}", l);
    for (const auto& [k, val] : l.items()) {
      const std::string key = where + "." + k;
      if (!keys.count(k))
        throw usage_error(source + ": key '" + key +
                          "': unknown key (expected name, fields, sample_bytes, batch_size, workers, "
                          "prefetch_factor, pin_memory, persistent_workers, collate, order)");
      if (k == "name") {
        if (!val.is_string() || val.get<std::string>().empty() || val.get<std::string>().size() > 63)
          throw key_error(source, key, "a non-empty string of at most 63 characters", val);
        if (!names.insert(val.get<std::string>()).second)
          throw usage_error(source + ": key '" + key + "': duplicate loader name '" + val.get<std::string>() + "'");
      } else if (k == "fields") {
        validate_fields(source, val, key);
      } else if (k == "sample_bytes") {
        validate_sample_bytes(source, key, val);
      } else if (k == "batch_size" || k == "prefetch_factor") {
        positive_int(source, key, val, 1u << 20);
      } else if (k == "workers") {
        validate_workers(source, key, val);
      } else if (k == "collate") {
        collate_value(source, key, val);
      } else if (k == "order") {
        const LoaderOrder order = order_value(source, key, val);
        if (order == LoaderOrder::last && i == 0)
          throw usage_error(source + ": key '" + key +
                            "': the first loader is the training loader, which the others run beside; give "
                            "\"last\" to a later loader (a test pass after training)");
        if (order == LoaderOrder::first && !first_order.empty())
          throw usage_error(source + ": key '" + key + "': " + first_order +
                            " is already \"first\"; only one loader's workers can start before every other's");
        if (order == LoaderOrder::first) first_order = where;
      } else if (!val.is_boolean()) {
        throw key_error(source, key, "true or false", val);
      }
    }
    if (!l.contains("name")) throw usage_error(source + ": key '" + where + ".name': missing (name every loader)");
    if (l.contains("fields") && l.contains("sample_bytes"))
      throw usage_error(source + ": key '" + where + "': 'fields' and 'sample_bytes' exclude each other: give one");
  }
}

std::vector<Field> fields_from(const json& v) {
  std::vector<Field> out;
  for (const auto& f : v)
    out.push_back(
        {f["name"].get<std::string>(), f["shape"].get<std::vector<std::uint64_t>>(), f["dtype"].get<std::string>()});
  return out;
}

std::uint64_t sample_bytes_from(const json& sb) {
  return sb.is_string() ? parse_size(sb.get<std::string>()) : sb.get<std::uint64_t>();
}

ordered_json fields_to_json(const std::vector<Field>& fields) {
  ordered_json out = ordered_json::array();
  for (const Field& f : fields) out.push_back({{"name", f.name}, {"shape", f.shape}, {"dtype", f.dtype}});
  return out;
}

// A validated engines section (null engines already dropped or skipped here).
Engines engines_from(const json& e, const std::string& source) {
  Engines out;
  auto size_or = [&source](const json& v, const char* engine, const char* key, std::uint64_t fallback) {
    return v.contains(key) ? size_value(source, std::string("engines.") + engine + "." + key, v[key]) : fallback;
  };
  if (e.contains("vllm") && !e["vllm"].is_null()) {
    const json& v = e["vllm"];
    VllmSpec s;
    if (v.contains("tensor_parallel_size")) s.tensor_parallel_size = v["tensor_parallel_size"].get<std::uint64_t>();
    s.mq_max_chunk_bytes = size_or(v, "vllm", "mq_max_chunk_bytes", s.mq_max_chunk_bytes);
    s.response_chunk_bytes = size_or(v, "vllm", "response_chunk_bytes", s.response_chunk_bytes);
    s.max_chunks = v.value("max_chunks", s.max_chunks);
    s.kv_offloading_size = size_or(v, "vllm", "kv_offloading_size", s.kv_offloading_size);
    out.vllm = s;
  }
  if (e.contains("ray") && !e["ray"].is_null()) {
    const json& v = e["ray"];
    RaySpec s;
    if (v.contains("object_store_memory"))
      s.object_store_memory = size_value(source, "engines.ray.object_store_memory", v["object_store_memory"]);
    s.object_store_fraction = v.value("object_store_fraction", s.object_store_fraction);
    s.object_store_cap = size_or(v, "ray", "object_store_cap", s.object_store_cap);
    s.plasma_directory = v.value("plasma_directory", s.plasma_directory);
    out.ray = s;
  }
  if (e.contains("triton_python") && !e["triton_python"].is_null()) {
    const json& v = e["triton_python"];
    TritonPythonSpec s;
    s.instances = v.value("instances", s.instances);
    s.shm_default_byte_size = size_or(v, "triton_python", "shm_default_byte_size", s.shm_default_byte_size);
    s.shm_growth_byte_size = size_or(v, "triton_python", "shm_growth_byte_size", s.shm_growth_byte_size);
    s.inflight_bytes = size_or(v, "triton_python", "inflight_bytes", s.inflight_bytes);
    out.triton_python = s;
  }
  if (e.contains("deepspeed") && !e["deepspeed"].is_null()) {
    DeepSpeedSpec s;
    if (e["deepspeed"].contains("ranks")) s.ranks = e["deepspeed"]["ranks"].get<std::uint64_t>();
    out.deepspeed = s;
  }
  return out;
}

ordered_json engines_to_json(const Engines& e) {
  ordered_json out = ordered_json::object();
  if (e.vllm) {
    const VllmSpec& s = *e.vllm;
    ordered_json v;
    if (s.tensor_parallel_size) v["tensor_parallel_size"] = *s.tensor_parallel_size;
    v["mq_max_chunk_bytes"] = exact_size(s.mq_max_chunk_bytes);
    v["response_chunk_bytes"] = exact_size(s.response_chunk_bytes);
    v["max_chunks"] = s.max_chunks;
    if (s.kv_offloading_size) v["kv_offloading_size"] = exact_size(s.kv_offloading_size);
    out["vllm"] = v;
  }
  if (e.ray) {
    const RaySpec& s = *e.ray;
    ordered_json v;
    if (s.object_store_memory)
      v["object_store_memory"] = exact_size(*s.object_store_memory);
    else
      v["object_store_fraction"] = s.object_store_fraction;
    v["object_store_cap"] = s.object_store_cap;  // a decimal figure (200 * 10**9): as bytes
    v["plasma_directory"] = s.plasma_directory;
    out["ray"] = v;
  }
  if (e.triton_python) {
    const TritonPythonSpec& s = *e.triton_python;
    out["triton_python"] = {{"instances", s.instances},
                            {"shm_default_byte_size", exact_size(s.shm_default_byte_size)},
                            {"shm_growth_byte_size", exact_size(s.shm_growth_byte_size)},
                            {"inflight_bytes", exact_size(s.inflight_bytes)}};
  }
  if (e.deepspeed) {
    ordered_json v = ordered_json::object();
    if (e.deepspeed->ranks) v["ranks"] = *e.deepspeed->ranks;
    out["deepspeed"] = v;
  }
  return out;
}

}  // namespace

std::optional<std::string> canonical_dtype(const std::string& dtype) {
  const std::string name = dtype.compare(0, 6, "torch.") == 0 ? dtype.substr(6) : dtype;
  if (dtype_sizes().count(name)) return name;
  if (auto it = dtype_aliases().find(name); it != dtype_aliases().end()) return it->second;
  return std::nullopt;
}

std::uint64_t dtype_size(const std::string& dtype) {
  const auto name = canonical_dtype(dtype);
  if (!name) throw usage_error("unknown dtype '" + dtype + "'");
  return dtype_sizes().at(*name);
}

std::uint64_t sample_bytes(const Profile& profile) {
  if (profile.sample_bytes) return *profile.sample_bytes;
  std::uint64_t total = 0;
  for (const Field& f : profile.fields) {
    std::uint64_t n = dtype_size(f.dtype);
    for (auto d : f.shape) n *= d;
    total += n;
  }
  return total;
}

namespace {

// One part of a name: [a-z0-9][a-z0-9._-]{0,62}. It starts with [a-z0-9], so "." and
// ".." can never be a path component. (A loop, not std::regex: this runs in the hook.)
bool is_valid_name_part(const std::string& part) {
  if (part.empty() || part.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(part[0])) return false;
  for (char c : part)
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

}  // namespace

bool is_valid_profile_name(const std::string& name) {
  auto slash = name.find('/');
  if (slash == std::string::npos) return is_valid_name_part(name);
  return is_valid_name_part(name.substr(0, slash)) && is_valid_name_part(name.substr(slash + 1));
}

json parse_profile_document(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw usage_error(json_parse_error(text, e, source));
  }
  if (!doc.is_object()) throw usage_error(source + ": expected a JSON object at the top level");
  for (const auto& [key, v] : doc.items()) {
    if (!known_keys().count(key)) {
      throw usage_error(
          source + ": key '" + key +
          "': unknown key (a typo would size wrong); known keys: "
          "name, description, extends, fields, sample_bytes, batch_size, workers_per_gpu, "
          "prefetch_factor, pin_memory, collate, headroom, nccl_reserve, nccl, engines, min_shm, max_shm, "
          "calibration, loaders");
    }
    if (key == "schema") {
      if (!v.is_number_integer() || v.get<std::int64_t>() != 1)
        throw key_error(source, key, "1 (the only schema version)", v);
    } else if (key == "$schema" || key == "description") {
      if (!v.is_string()) throw key_error(source, key, "a string", v);
    } else if (key == "name" || key == "extends") {
      if (key == "extends" && v.is_null()) continue;  // a standalone profile
      if (!v.is_string() || !is_valid_profile_name(v.get<std::string>()))
        throw key_error(source, key, "a profile name like 'imagenet' or 'team/name'", v);
    } else if (key == "fields") {
      validate_fields(source, v);
    } else if (key == "sample_bytes") {
      validate_sample_bytes(source, key, v);
    } else if (key == "batch_size") {
      positive_int(source, key, v, 1u << 20);
    } else if (key == "workers_per_gpu") {
      validate_workers(source, key, v);
    } else if (key == "prefetch_factor") {
      positive_int(source, key, v, 1024);
    } else if (key == "pin_memory") {
      if (!v.is_boolean()) throw key_error(source, key, "true or false", v);
    } else if (key == "collate") {
      collate_value(source, key, v);
    } else if (key == "headroom") {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 1.0 || v.get<double>() > 16.0)
        throw key_error(source, key, "a number between 1.0 and 16.0", v);
    } else if (key == "nccl_reserve" || key == "min_shm" || key == "max_shm") {
      size_value(source, key, v);
    } else if (key == "calibration") {
      validate_calibration(source, v);
    } else if (key == "nccl") {
      validate_nccl(source, v);
    } else if (key == "loaders") {
      validate_loaders(source, v);
    } else if (key == "engines") {
      validate_engines(source, v);
    }
  }
  if (doc.contains("fields") && doc.contains("sample_bytes"))
    throw usage_error(source + ": keys 'fields' and 'sample_bytes' exclude each other: give one");
  return doc;
}

json merge_profile_documents(const json& parent, const json& child) {
  json merged = parent;
  // A child that describes its samples replaces the parent's description of them entirely.
  if (child.contains("fields")) merged.erase("sample_bytes");
  if (child.contains("sample_bytes")) merged.erase("fields");
  // A flat nccl_reserve and an nccl section exclude each other: the child's word wins. The
  // section merges key by key (a child may change only the channels).
  if (child.contains("nccl_reserve")) merged.erase("nccl");
  if (child.contains("nccl")) {
    merged.erase("nccl_reserve");
    json section = parent.contains("nccl") ? parent["nccl"] : json::object();
    for (const auto& [key, v] : child["nccl"].items()) section[key] = v;
    merged["nccl"] = section;
  }
  // Engines merge engine by engine and key by key; null drops one the parent names. Ray's size
  // and fraction exclude each other: the child's word wins.
  if (child.contains("engines")) {
    json engines = parent.contains("engines") ? parent["engines"] : json::object();
    for (const auto& [name, v] : child["engines"].items()) {
      if (v.is_null()) {
        engines.erase(name);
        continue;
      }
      json engine = engines.contains(name) && engines[name].is_object() ? engines[name] : json::object();
      if (v.contains("object_store_memory")) engine.erase("object_store_fraction");
      if (v.contains("object_store_fraction")) engine.erase("object_store_memory");
      for (const auto& [key, value] : v.items()) engine[key] = value;
      engines[name] = engine;
    }
    merged["engines"] = engines;
  }
  // A measurement belongs to the profile that was measured, never to its children; so do the
  // words that describe a profile.
  merged.erase("calibration");
  merged.erase("description");
  for (const auto& [key, v] : child.items())
    if (key != "nccl" && key != "engines") merged[key] = v;
  return merged;
}

Profile profile_from_document(const json& doc, const std::string& source) {
  static const char* const required[] = {"batch_size", "prefetch_factor", "workers_per_gpu", "pin_memory",
                                         "headroom",   "min_shm",         "max_shm"};
  for (const char* key : required) {
    if (!doc.contains(key))
      throw usage_error(
          source + ": key '" + key +
          "': missing (a profile that stands alone, with \"extends\": null or named default, must set every "
          "key; set it, or extend a profile that does)");
  }
  if (!doc.contains("fields") && !doc.contains("sample_bytes"))
    throw usage_error(source + ": key 'fields': missing (give 'fields' or 'sample_bytes' to describe a sample)");
  if (!doc.contains("nccl") && !doc.contains("nccl_reserve"))
    throw usage_error(source + ": key 'nccl': missing (give an 'nccl' section or a flat 'nccl_reserve' size)");
  Profile p;
  p.name = doc.value("name", std::string());
  p.description = doc.value("description", std::string());
  if (doc.contains("fields"))
    p.fields = fields_from(doc["fields"]);
  else
    p.sample_bytes = sample_bytes_from(doc["sample_bytes"]);
  p.batch_size = doc["batch_size"].get<std::uint64_t>();
  if (doc["workers_per_gpu"].is_number()) p.workers_per_gpu = doc["workers_per_gpu"].get<std::uint64_t>();
  p.prefetch_factor = doc["prefetch_factor"].get<std::uint64_t>();
  p.pin_memory = doc["pin_memory"].get<bool>();
  if (doc.contains("collate")) p.collate = collate_value(source, "collate", doc["collate"]);
  p.headroom = doc["headroom"].get<double>();
  if (doc.contains("nccl_reserve")) p.nccl_reserve = size_value(source, "nccl_reserve", doc["nccl_reserve"]);
  if (doc.contains("nccl")) {
    const json& n = doc["nccl"];
    NcclSpec spec;
    spec.transport = n.value("transport", spec.transport);
    spec.channels = n.value("channels", spec.channels);
    if (n.contains("buffsize")) spec.buffsize = size_value(source, "nccl.buffsize", n["buffsize"]);
    if (n.contains("ll_buffsize")) spec.ll_buffsize = size_value(source, "nccl.ll_buffsize", n["ll_buffsize"]);
    if (n.contains("ll128_buffsize"))
      spec.ll128_buffsize = size_value(source, "nccl.ll128_buffsize", n["ll128_buffsize"]);
    if (n.contains("measured")) spec.measured = size_value(source, "nccl.measured", n["measured"]);
    if (n.contains("measured_ranks")) spec.measured_ranks = n["measured_ranks"].get<std::uint64_t>();
    spec.host_mem = n.value("host_mem", spec.host_mem);
    p.nccl = spec;
  }
  if (doc.contains("engines")) p.engines = engines_from(doc["engines"], source);
  if (doc.contains("loaders")) {
    for (const json& l : doc["loaders"]) {
      Loader loader;
      loader.name = l["name"].get<std::string>();
      if (l.contains("fields")) loader.fields = fields_from(l["fields"]);
      if (l.contains("sample_bytes")) loader.sample_bytes = sample_bytes_from(l["sample_bytes"]);
      if (l.contains("batch_size")) loader.batch_size = l["batch_size"].get<std::uint64_t>();
      if (l.contains("workers")) {
        if (l["workers"].is_number())
          loader.workers = l["workers"].get<std::uint64_t>();
        else
          loader.workers_auto = true;
      }
      if (l.contains("prefetch_factor")) loader.prefetch_factor = l["prefetch_factor"].get<std::uint64_t>();
      if (l.contains("pin_memory")) loader.pin_memory = l["pin_memory"].get<bool>();
      loader.persistent_workers = l.value("persistent_workers", false);
      if (l.contains("collate")) loader.collate = collate_value(source, "loaders.collate", l["collate"]);
      if (l.contains("order")) loader.order = order_value(source, "loaders.order", l["order"]);
      p.loaders.push_back(loader);
    }
  }
  p.min_shm = size_value(source, "min_shm", doc["min_shm"]);
  p.max_shm = size_value(source, "max_shm", doc["max_shm"]);
  if (p.min_shm > p.max_shm)
    throw usage_error(source + ": key 'min_shm': " + format_size(p.min_shm) + " is above max_shm " +
                      format_size(p.max_shm));
  if (doc.contains("calibration")) {
    const json& c = doc["calibration"];
    Calibration cal;
    cal.peak_shm = size_value(source, "calibration.peak_shm", c["peak_shm"]);
    if (c.contains("burst_shm")) cal.burst_shm = size_value(source, "calibration.burst_shm", c["burst_shm"]);
    cal.workers = c["workers"].get<std::uint64_t>();
    cal.batch_size = c["batch_size"].get<std::uint64_t>();
    cal.gpus = c["gpus"].get<std::uint64_t>();
    cal.prefetch_factor = c["prefetch_factor"].get<std::uint64_t>();
    cal.pin_memory = c.value("pin_memory", p.pin_memory);
    cal.measured_at = c.value("measured_at", std::string());
    p.calibration = cal;
  }
  return p;
}

ordered_json profile_to_json(const Profile& p) {
  ordered_json doc;
  doc["name"] = p.name;
  doc["description"] = p.description;
  if (p.sample_bytes) {
    doc["sample_bytes"] = *p.sample_bytes;
  } else {
    doc["fields"] = fields_to_json(p.fields);
  }
  doc["batch_size"] = p.batch_size;
  doc["workers_per_gpu"] = p.workers_per_gpu ? ordered_json(*p.workers_per_gpu) : ordered_json("auto");
  doc["prefetch_factor"] = p.prefetch_factor;
  doc["pin_memory"] = p.pin_memory;
  if (p.collate == Collate::list) doc["collate"] = "list";
  doc["headroom"] = p.headroom;
  if (p.nccl) {
    const NcclSpec& n = *p.nccl;
    doc["nccl"] = {{"transport", n.transport},
                   {"channels", n.channels},
                   {"buffsize", n.buffsize},
                   {"ll_buffsize", n.ll_buffsize},
                   {"ll128_buffsize", n.ll128_buffsize}};
    if (n.measured) doc["nccl"]["measured"] = *n.measured;
    if (n.measured_ranks) doc["nccl"]["measured_ranks"] = *n.measured_ranks;
    if (n.host_mem != "shm") doc["nccl"]["host_mem"] = n.host_mem;
  } else {
    doc["nccl_reserve"] = exact_size(p.nccl_reserve);
  }
  if (!p.engines.empty()) doc["engines"] = engines_to_json(p.engines);
  if (!p.loaders.empty()) {
    ordered_json loaders = ordered_json::array();
    for (const Loader& l : p.loaders) {
      ordered_json j = {{"name", l.name}};
      if (!l.fields.empty()) j["fields"] = fields_to_json(l.fields);
      if (l.sample_bytes) j["sample_bytes"] = *l.sample_bytes;
      if (l.batch_size) j["batch_size"] = *l.batch_size;
      if (l.workers) j["workers"] = *l.workers;
      if (l.workers_auto) j["workers"] = "auto";
      if (l.prefetch_factor) j["prefetch_factor"] = *l.prefetch_factor;
      if (l.pin_memory) j["pin_memory"] = *l.pin_memory;
      j["persistent_workers"] = l.persistent_workers;
      if (l.collate) j["collate"] = *l.collate == Collate::list ? "list" : "stack";
      if (l.order != LoaderOrder::any) j["order"] = loader_order_name(l.order);
      loaders.push_back(j);
    }
    doc["loaders"] = loaders;
  }
  doc["min_shm"] = exact_size(p.min_shm);
  doc["max_shm"] = exact_size(p.max_shm);
  if (p.calibration) {
    const Calibration& c = *p.calibration;
    doc["calibration"] = {{"peak_shm", c.peak_shm}};
    if (c.burst_shm) doc["calibration"]["burst_shm"] = *c.burst_shm;
    doc["calibration"]["workers"] = c.workers;
    doc["calibration"]["batch_size"] = c.batch_size;
    doc["calibration"]["gpus"] = c.gpus;
    doc["calibration"]["prefetch_factor"] = c.prefetch_factor;
    doc["calibration"]["pin_memory"] = c.pin_memory;
    doc["calibration"]["measured_at"] = c.measured_at;
  }
  return doc;
}

const std::vector<std::string>& profile_document_keys() {
  static const std::vector<std::string> keys = {
      "description", "fields",  "sample_bytes", "batch_size", "workers_per_gpu", "prefetch_factor",
      "pin_memory",  "collate", "headroom",     "nccl",       "nccl_reserve",    "engines",
      "loaders",     "min_shm", "max_shm",      "calibration"};
  return keys;
}

ordered_json profile_file_document(const ProfileFile& file) {
  const ordered_json full = profile_to_json(file.profile);
  auto wanted = [&file](const std::string& key) {
    return std::find(file.keys.begin(), file.keys.end(), key) != file.keys.end();
  };
  ordered_json doc;
  doc["name"] = file.profile.name;
  if (wanted("description")) doc["description"] = file.profile.description;
  if (file.standalone)
    doc["extends"] = nullptr;
  else if (file.extends)
    doc["extends"] = *file.extends;
  for (const std::string& key : profile_document_keys()) {
    if (key == "description" || !full.contains(key)) continue;
    if (wanted(key)) {
      doc[key] = full[key];
    } else if (full[key].is_object()) {
      for (const auto& [sub, value] : full[key].items())
        if (wanted(key + "." + sub)) doc[key][sub] = value;
    }
  }
  return doc;
}

namespace {

// A value on one line, spaced as a person writes JSON: {"name": "image", "shape": [3, 224, 224]}.
std::string one_line(const ordered_json& v) {
  std::string out;
  if (v.is_object()) {
    for (const auto& [key, value] : v.items())
      out += (out.empty() ? "" : ", ") + ordered_json(key).dump() + ": " + one_line(value);
    return "{" + out + "}";
  }
  if (v.is_array()) {
    for (const auto& value : v) out += (out.empty() ? "" : ", ") + one_line(value);
    return "[" + out + "]";
  }
  return v.dump();
}

}  // namespace

std::string profile_text(const ordered_json& doc) {
  std::string out = "{\n";
  std::size_t i = 0;
  for (const auto& [key, value] : doc.items()) {
    out += "  " + ordered_json(key).dump() + ": ";
    if (value.is_array() && !value.empty() && value[0].is_object()) {  // fields, loaders
      out += "[\n";
      for (std::size_t n = 0; n < value.size(); ++n)
        out += "    " + one_line(value[n]) + (n + 1 < value.size() ? ",\n" : "\n");
      out += "  ]";
    } else if (key == "calibration" || key == "engines") {
      out += "{\n";
      std::size_t n = 0;
      for (const auto& [k, v] : value.items())
        out += "    " + ordered_json(k).dump() + ": " + one_line(v) + (++n < value.size() ? ",\n" : "\n");
      out += "  }";
    } else {
      out += one_line(value);
    }
    out += ++i < doc.size() ? ",\n" : "\n";
  }
  return out + "}\n";
}

const char* loader_order_name(LoaderOrder order) {
  switch (order) {
    case LoaderOrder::first:
      return "first";
    case LoaderOrder::last:
      return "last";
    case LoaderOrder::any:
      break;
  }
  return "any";
}

}  // namespace gpurun
