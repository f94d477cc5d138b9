#include "decision/contract.hpp"

#include <algorithm>

#include "base/units.hpp"

namespace gpurun {

const RequestKeySpec& request_key(RequestKey key) {
  for (const RequestKeySpec& k : kRequestKeys)
    if (k.key == key) return k;
  return kRequestKeys[0];  // unreachable: every enumerator has an entry
}

const RequestKeySpec* request_key_of_env(const std::string& name) {
  for (const RequestKeySpec& k : kRequestKeys)
    if (name == k.env || (k.env_alias && name == k.env_alias)) return &k;
  return nullptr;
}

EnvValue env_value(const std::map<std::string, std::string>& env, const RequestKeySpec& key) {
  EnvValue out;
  const auto main = env.find(key.env);
  const auto alias = key.env_alias ? env.find(key.env_alias) : env.end();
  if (main != env.end()) {
    out.value = &main->second;
    out.name = key.env;
  }
  if (alias == env.end()) return out;
  if (!out.value) {
    out.value = &alias->second;
    out.name = key.env_alias;
  } else if (alias->second != main->second) {
    out.conflict = std::string(key.env) + "=" + main->second.substr(0, 40) + " and " + key.env_alias + "=" +
                   alias->second.substr(0, 40) + " name one key (" + key.name + ") with two values: give one";
  }
  return out;
}

bool is_pod_app_container(const std::map<std::string, std::string>& annotations) {
  for (const char* key : {kCriContainerTypeAnnotation, kCrioContainerTypeAnnotation}) {
    auto it = annotations.find(key);
    if (it != annotations.end() && it->second == kPodAppContainerType) return true;
  }
  return false;
}

bool is_pod_container(const std::map<std::string, std::string>& annotations) {
  return annotations.count(kCriContainerTypeAnnotation) > 0 || annotations.count(kCrioContainerTypeAnnotation) > 0;
}

bool has_request_annotation(const std::map<std::string, std::string>& annotations) {
  return std::any_of(kRequestKeys.begin(), kRequestKeys.end(),
                     [&](const RequestKeySpec& k) { return annotations.count(k.annotation) > 0; });
}

std::string request_annotation_pattern() {
  std::string alternatives;
  for (const RequestKeySpec& k : kRequestKeys) alternatives += (alternatives.empty() ? "" : "|") + std::string(k.name);
  // The prefix's '.' escaped for the ERE.
  return "^gpu-run\\.(" + alternatives + ")$";
}

std::vector<std::string> request_annotation_globs() {
  return {std::string(kAnnotationPrefix) + "*", kCrioShmSizeAnnotation};
}

NameValues container_env(const std::string& profile, unsigned gpus, std::uint64_t workers, std::uint64_t batch_size,
                         std::optional<std::uint64_t> shm_bytes) {
  NameValues env = {{kEnvProfile, profile}};
  if (gpus > 0) env.emplace_back(kEnvGpus, std::to_string(gpus));
  env.emplace_back(kEnvWorkers, std::to_string(workers));
  env.emplace_back(kEnvNumWorkers, std::to_string(workers));
  env.emplace_back(kEnvBatchSize, std::to_string(batch_size));
  if (shm_bytes) env.emplace_back(kEnvShmSize, engine_size(*shm_bytes));
  return env;
}

NameValues container_labels(const std::string& profile, unsigned gpus, std::optional<std::uint64_t> shm_bytes) {
  NameValues labels = {{kLabelProfile, profile}};
  if (gpus > 0) labels.emplace_back(kLabelGpus, std::to_string(gpus));
  if (shm_bytes) labels.emplace_back(kLabelShmSize, engine_size(*shm_bytes));
  return labels;
}

std::vector<std::string> contract_env_names() {
  std::vector<std::string> names;
  for (const RequestKeySpec& k : kRequestKeys) names.emplace_back(k.env);
  for (const char* n : {kEnvNumWorkers, kEnvBatchSize, kEnvShmSize, kEnvShmLimit, kEnvProfile})
    if (std::find(names.begin(), names.end(), n) == names.end()) names.emplace_back(n);
  return names;
}

}  // namespace gpurun
