#include "ctl/profiles/profiles_new.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "base/fd.hpp"
#include "base/temp_dir.hpp"
#include "base/units.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/profiles/profiles.hpp"
#include "ctl/run_options.hpp"
#include "decision/config.hpp"
#include "profiles/profile.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {
namespace {

constexpr std::size_t kMaxFields = 64;

std::string shown(const std::string& s) { return s.size() > 80 ? s.substr(0, 80) + "..." : s; }

bool parse_bool_flag(const std::string& value, const std::string& flag) {
  if (value == "true") return true;
  if (value == "false") return false;
  throw usage_error(flag + " '" + shown(value) + "': expected true or false");
}

nlohmann::ordered_json fields_json(const std::vector<Field>& fields) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Field& f : fields) out.push_back({{"name", f.name}, {"shape", f.shape}, {"dtype", f.dtype}});
  return out;
}

}  // namespace

nlohmann::ordered_json parse_loader_flag(const std::string& text) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (name.empty())
    throw usage_error("--loader '" + shown(text) +
                      "': expected NAME[:KEY=VALUE,...], e.g. val:batch_size=256,workers=2");
  const std::string flag = "--loader " + shown(name);
  nlohmann::ordered_json loader;
  loader["name"] = name;
  std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  while (!rest.empty()) {
    const auto eq = rest.find('=');
    if (eq == std::string::npos)
      throw usage_error(flag + ": '" + shown(rest) + "': expected KEY=VALUE, e.g. batch_size=256");
    const std::string key = rest.substr(0, eq);
    if (key == "fields") {  // its own commas: the rest of the flag
      loader["fields"] = fields_json(parse_fields_flag(rest.substr(eq + 1), flag + " fields"));
      break;
    }
    const auto comma = rest.find(',', eq);
    const std::string value = rest.substr(eq + 1, comma == std::string::npos ? std::string::npos : comma - eq - 1);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const std::string where = flag + " " + key;
    if (key == "batch_size")
      loader[key] = parse_count(value, where, 1u << 20);
    else if (key == "prefetch_factor")
      loader[key] = parse_count(value, where, 1024);
    else if (key == "workers")
      loader[key] =
          value == "auto" ? nlohmann::ordered_json("auto") : nlohmann::ordered_json(parse_count(value, where, 1024));
    else if (key == "pin_memory" || key == "persistent_workers")
      loader[key] = parse_bool_flag(value, where);
    else if (key == "collate" || key == "order")
      loader[key] = value;  // the profile loader's own check names a bad value
    else
      throw usage_error(flag + ": unknown key '" + shown(key) +
                        "' (expected batch_size, workers, prefetch_factor, pin_memory, persistent_workers, collate, "
                        "order, and fields last)");
  }
  return loader;
}

std::vector<Field> parse_fields_flag(const std::string& text, const std::string& flag) {
  std::vector<Field> fields;
  if (text.empty()) throw usage_error(flag + ": empty: give SHAPE:DTYPE entries, e.g. 3x224x224:float32,:int64");
  std::size_t start = 0;
  for (std::size_t n = 1;; ++n) {
    const std::size_t comma = text.find(',', start);
    const std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (n > kMaxFields) throw usage_error(flag + ": more than " + std::to_string(kMaxFields) + " fields");
    std::string name = "field" + std::to_string(n), spec = entry;
    if (const auto eq = entry.find('='); eq != std::string::npos) {
      name = entry.substr(0, eq);
      spec = entry.substr(eq + 1);
    }
    const auto colon = spec.rfind(':');
    if (name.empty() || colon == std::string::npos)
      throw usage_error(flag + ": entry " + std::to_string(n) + " '" + shown(entry) +
                        "': expected [NAME=]SHAPE:DTYPE, e.g. image=3x224x224:float32 or :int64 for a scalar");
    std::vector<std::uint64_t> shape;
    const std::string dims = spec.substr(0, colon);
    std::size_t d = 0;
    while (!dims.empty() && d <= dims.size()) {
      const std::size_t x = dims.find('x', d);
      const std::string dim = dims.substr(d, x == std::string::npos ? std::string::npos : x - d);
      shape.push_back(parse_count(dim, flag + ": entry " + std::to_string(n) + " dimension", 1ull << 32));
      if (x == std::string::npos) break;
      d = x + 1;
    }
    const std::string dtype = spec.substr(colon + 1);
    // Written as the built-ins write it: torch.float and float are float32.
    const auto canonical = canonical_dtype(dtype);
    if (!canonical)
      throw usage_error(flag + ": entry " + std::to_string(n) + " '" + shown(entry) + "': unknown dtype '" +
                        shown(dtype) + "' (expected " + kDtypeNames + ")");
    fields.push_back({name, shape, *canonical});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

nlohmann::ordered_json new_profile_document(const NewProfileOptions& o) {
  if (!is_valid_profile_name(o.name))
    throw usage_error("profiles new: '" + shown(o.name) +
                      "' is not a profile name: [team/]name of a-z 0-9 . _ - (e.g. vision/resnet50)");
  ProfileFile file;
  file.profile.name = o.name;
  file.profile.fields = parse_fields_flag(o.fields);
  file.keys = {"fields"};
  if (o.description) {
    file.profile.description = *o.description;
    file.keys.push_back("description");
  }
  if (o.extends) {
    file.standalone = *o.extends == "none";
    if (!file.standalone) file.extends = *o.extends;
  }
  if (o.batch_size) {
    file.profile.batch_size = parse_count(*o.batch_size, "--batch-size", 1u << 20);
    file.keys.push_back("batch_size");
  }
  if (o.workers) {
    if (*o.workers != "auto") file.profile.workers_per_gpu = parse_count(*o.workers, "--workers", 1024);
    file.keys.push_back("workers_per_gpu");
  }
  if (o.prefetch_factor) {
    file.profile.prefetch_factor = parse_count(*o.prefetch_factor, "--prefetch-factor", 1024);
    file.keys.push_back("prefetch_factor");
  }
  nlohmann::ordered_json doc = profile_file_document(file);
  if (o.pin_memory) doc["pin_memory"] = parse_bool_flag(*o.pin_memory, "--pin-memory");
  if (o.nccl_transport) doc["nccl"] = {{"transport", *o.nccl_transport}};  // the loader's check names a bad one
  if (!o.loaders.empty()) {
    doc["loaders"] = nlohmann::ordered_json::array();
    for (const auto& text : o.loaders) doc["loaders"].push_back(parse_loader_flag(text));
  }
  // The loader's own checks, with the flags' names where they came from.
  parse_profile_document(doc.dump(), "profiles new " + o.name);
  return doc;
}

fs::path new_profile_dir(bool root, const EnvLookup& env) {
  return root ? fs::path(kSystemProfileDir) : user_profile_dir(env);
}

void run_profiles_new(const NewProfileOptions& o) {
  const nlohmann::ordered_json doc = new_profile_document(o);
  const std::string text = profile_text(doc);
  if (o.print) {
    std::cout << text;
    return;
  }
  const fs::path dir = o.out_dir ? fs::path(*o.out_dir) : new_profile_dir(::geteuid() == 0);
  if (dir.empty()) throw usage_error("--out-dir: empty path");
  const fs::path path = dir / (o.name + ".json");
  std::error_code ec;
  if (fs::exists(path, ec) && !o.force)
    throw usage_error("profiles new: " + path.string() + " exists: pass --force to replace it");
  // Load it through the search path (the new file first) before writing: a parent that does
  // not exist, or a profile the merge leaves incomplete, is refused and nothing is written.
  const Config config = load_ctl_config();
  const TempDir staging("gpu-run-profile");
  fs::create_directories((staging.path() / o.name).parent_path(), ec);
  write_file_atomic((staging.path() / (o.name + ".json")).string(), text);
  const Profile loaded = [&] {
    try {
      return ctl_store({staging.path().string(), dir.string()}, config).load(o.name, false);
    } catch (const Error& e) {
      // Name the profile being made, not the staging file it was checked in.
      std::string message = e.what();
      const std::string staged = (staging.path() / (o.name + ".json")).string();
      if (const auto at = message.find(staged); at != std::string::npos)
        message.replace(at, staged.size(), "profiles new " + o.name);
      throw Error(message, e.errno_value(), e.exit_code());
    }
  }();
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    throw Error("--out-dir: create " + path.parent_path().string() + ": " + ec.message(), ec.value(), kExitFailure);
  write_file_atomic(path.string(), text);
  std::cout << "wrote " << path.string() << " (" << loaded.name << ", extends "
            << doc.value("extends", std::string("default")) << ")\n"
            << "check it: gpu-run-ctl plan" << (o.out_dir ? " --profile-dir " + dir.string() : "") << " --profile "
            << o.name << " --gpus 1\n";
  const std::string note =
      profile_reach_note(o.name, path, ProfileStore(container_profile_search_path(config.profile_dirs)));
  if (!note.empty()) std::cerr << "gpu-run-ctl: profiles new: " << note << "\n";
}

void add_profiles_new_command(CLI::App& profiles) {
  auto o = std::make_shared<NewProfileOptions>();
  CLI::App* cmd =
      profiles.add_subcommand("new", "Write a new profile: the fields of a sample and what differs from default");
  cmd->add_option("NAME", o->name, "[team/]name of the profile")->required();
  cmd->add_option("--fields", o->fields,
                  "A sample's tensors: [NAME=]SHAPE:DTYPE,... e.g. 3x224x224:float32,:int64 (PyTorch's float, long, "
                  "half... too)")
      ->required()
      ->type_name("FIELDS");
  cmd->add_option("--batch-size", o->batch_size, "Batch size per GPU rank")->type_name("N");
  cmd->add_option("--workers", o->workers, "DataLoader workers per GPU rank, or auto")->type_name("N|auto");
  cmd->add_option("--prefetch-factor", o->prefetch_factor, "DataLoader prefetch_factor")->type_name("N");
  cmd->add_option("--pin-memory", o->pin_memory, "DataLoader pin_memory (default: the parent's)")
      ->type_name("true|false");
  cmd->add_option("--nccl-transport", o->nccl_transport,
                  "NCCL's transport between the ranks of a node: shm (segments on /dev/shm), p2p or none")
      ->type_name("shm|p2p|none");
  cmd->add_option("--loader", o->loaders,
                  "A DataLoader the job keeps alive at once, first the training one; repeatable. "
                  "NAME[:KEY=VALUE,...] with batch_size, workers, prefetch_factor, pin_memory, persistent_workers, "
                  "collate, order (any|first|last), and fields=[NAME=]SHAPE:DTYPE,... last")
      ->type_name("LOADER");
  cmd->add_option("--extends", o->extends, "Parent profile (default: default; none: a standalone profile)")
      ->type_name("NAME|none");
  cmd->add_option("--description", o->description, "One line about the workload")->type_name("TEXT");
  cmd->add_option("--out-dir", o->out_dir,
                  std::string("Directory to write it in (default: root's ") + kSystemProfileDir +
                      ", which every door searches; anyone else's $XDG_CONFIG_HOME/gpu-run/profiles)")
      ->type_name("DIR");
  cmd->add_flag("--force", o->force, "Replace an existing profile");
  cmd->add_flag("--print", o->print, "Print the profile and write nothing");
  cmd->footer(
      "Writes DIR/NAME.json (team/name goes to DIR/team/name.json) after loading it through the search path,\n"
      "so a missing parent or an incomplete standalone profile is refused and nothing is written.");
  cmd->callback([o] { run_profiles_new(*o); });
}

}  // namespace gpurun
