#include "decision/contract.hpp"

#include <algorithm>

#include "base/units.hpp"

namespace gpurun {

const RequestKeySpec& request_key(RequestKey key) {
  for (const RequestKeySpec& k : kRequestKeys)
    if (k.key == key) return k;
  return kRequestKeys[0];  // unreachable: every enumerator has an entry
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
