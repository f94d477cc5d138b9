#include "pod/webhook_config.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/k8s_quantity.hpp"
#include "profiles/profile.hpp"

namespace gpurun {

WebhookConfig parse_webhook_config(const std::string& text, const std::string& source) {
  using nlohmann::json;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw usage_error(source + ": expected a JSON object");
  WebhookConfig c;
  for (const auto& [key, value] : j.items()) {
    const std::string where = source + ": " + key;
    if (key == "policy") {
      const std::string p = value.is_string() ? value.get<std::string>() : "";
      if (p == "raise")
        c.policy = WebhookPolicy::kRaise;
      else if (p == "deny")
        c.policy = WebhookPolicy::kDeny;
      else if (p == "warn")
        c.policy = WebhookPolicy::kWarn;
      else
        throw usage_error(where + ": expected \"raise\", \"deny\" or \"warn\"");
    } else if (key == "memory_fraction_max") {
      if (!value.is_number() || value.get<double>() <= 0 || value.get<double>() > 1)
        throw usage_error(where + ": expected a number in (0, 1]");
      c.memory_fraction_max = value.get<double>();
    } else if (key == "profile_dirs") {
      if (!value.is_array()) throw usage_error(where + ": expected an array of directories");
      for (const json& d : value) {
        if (!d.is_string()) throw usage_error(where + ": expected an array of directories");
        c.profile_dirs.emplace_back(d.get<std::string>());
      }
    } else if (key == "default_cpus") {
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() == 0 || value.get<std::uint64_t>() > 65536)
        throw usage_error(where + ": expected a whole number of CPUs, at least 1");
      c.default_cpus = value.get<unsigned>();
    } else if (key == "namespace_profiles") {
      if (!value.is_object()) throw usage_error(where + ": expected an object of namespace: profile name");
      for (const auto& [ns, profile] : value.items()) {
        if (!is_k8s_dns_label(ns))
          throw usage_error(where + ": '" + k8s_shown(ns) +
                            "' is not a namespace name (lowercase letters, digits and '-', at most 63)");
        if (!profile.is_string() || !is_valid_profile_name(profile.get<std::string>()))
          throw usage_error(where + "." + ns + ": expected a profile name ([team/]name, lowercase), not a path");
        c.namespace_profiles[ns] = profile.get<std::string>();
      }
    } else {
      throw usage_error(where +
                        ": unknown key (known: policy, memory_fraction_max, profile_dirs, default_cpus, "
                        "namespace_profiles)");
    }
  }
  return c;
}

}  // namespace gpurun
