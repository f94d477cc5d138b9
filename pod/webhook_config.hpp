#pragma once

// gpu-run-webhook's config file (--config, JSON) and its policy for a plan it cannot apply.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpurun {

// What the webhook does with a plan it cannot apply as it is.
enum class WebhookPolicy {
  kRaise,  // raise the memory limit and request by the shm size (so the budget holds); a
           // request that cannot be planned at all is denied
  kDeny,   // deny the pod with a message saying what to change
  kWarn,   // admit it unchanged with a warning
};

// The webhook's config file (--config, JSON): {"policy": "raise"|"deny"|"warn",
// "memory_fraction_max": 0.5, "profile_dirs": [...], "default_cpus": 1,
// "namespace_profiles": {"NAMESPACE": "PROFILE", ...}}.
struct WebhookConfig {
  WebhookPolicy policy = WebhookPolicy::kRaise;
  double memory_fraction_max = 0.5;
  std::vector<std::filesystem::path> profile_dirs;
  unsigned default_cpus = 1;  // CPUs of a container without a CPU limit or request
  // The profile of a pod without gpu-run.profile in that namespace (the host config's
  // default_profile, per namespace). Such a pod is sized only in its containers that request
  // GPUs (or gpu-run.containers); a plan that cannot be met admits it unchanged with a warning.
  std::map<std::string, std::string> namespace_profiles;
};

// Parses the config text; an unknown key or a bad value is an Error (exit 2) naming it.
WebhookConfig parse_webhook_config(const std::string& text, const std::string& source);

}  // namespace gpurun
