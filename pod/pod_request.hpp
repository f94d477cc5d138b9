#pragma once

// A Pod's request for /dev/shm: which of its containers get gpu-run's volume and core's
// decision for each, from the pod's gpu-run.* annotations, its containers' env and resources and
// the webhook's config. Pure over its inputs (the profile store reads profile files by name).

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "decision/shm_decision.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

// A pod gpu-run leaves as it is (allowed, no patch): nothing asked, or a pod whose /dev/shm
// gpu-run does not change. Not a refusal: what cannot be met is an Error (docs/ARCHITECTURE.md,
// "Errors and refusals").
struct PodLeftAlone {
  std::string reason;  // one line
  bool warn = false;   // the person who created the pod is warned
};

// One container the webhook gives /dev/shm, with its decision.
struct PodShmTarget {
  std::string list;  // "containers" | "initContainers"
  std::size_t index = 0;
  const nlohmann::json* container = nullptr;  // in the pod
  ShmDecision decision;
};

class PodRequest {
 public:
  // `pod`, `config`, `store` and `namespace_profile` (the config's default profile for the
  // pod's namespace, or null) must outlive this.
  PodRequest(const nlohmann::json& pod, const WebhookConfig& config, const ProfileStore& store,
             const std::string* namespace_profile);

  // Reads the request and decides each target; why, when the pod is left alone. Throws Error
  // when the request cannot be met: a bad annotation or quantity, an unreadable profile, core's
  // refusal in the pod's words (ShmDecision::error), each named by its container.
  std::optional<PodLeftAlone> decide();

  // After decide(): the pod's spec, the containers that get /dev/shm, the sum of their sizes.
  const nlohmann::json& spec() const { return *spec_; }
  const std::vector<PodShmTarget>& targets() const { return targets_; }
  std::uint64_t total() const { return total_; }

  // The pod asked nothing itself: only its namespace's default profile applies (known once
  // decide() has read the annotations, also when it threw).
  bool by_namespace_default() const { return by_default_; }
  // The namespace's default profile when the pod names no profile (for the log), else "".
  std::string default_profile_used() const;
  // The targets' names, comma-separated (for the log).
  std::string target_names() const;

 private:
  void read_annotations();
  std::optional<PodLeftAlone> check_existing_mounts() const;
  std::optional<PodLeftAlone> choose_targets();
  void decide_target(PodShmTarget& t);

  const nlohmann::json& pod_;
  const WebhookConfig& config_;
  const ProfileStore& store_;
  const std::string* namespace_profile_;
  bool by_default_ = false;
  const nlohmann::json* spec_ = nullptr;
  std::map<std::string, std::string> annotations_;
  std::vector<PodShmTarget> targets_;
  std::uint64_t total_ = 0;
};

}  // namespace gpurun
