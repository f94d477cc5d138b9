// The container contract: one table from which every door's names are derived.
#include "decision/contract.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "base/units.hpp"
#include "decision/shm_decision.hpp"

namespace gpurun {
namespace {

TEST(Contract, HooksDPatternIsDerivedFromTheRequestKeys) {
  const std::regex ere(request_annotation_pattern(), std::regex::extended);
  for (const RequestKeySpec& k : kRequestKeys) EXPECT_TRUE(std::regex_match(k.annotation, ere)) << k.annotation;
  EXPECT_EQ(kRequestKeys.size(), 5u);
  for (const char* other :
       {"gpu-run.", "gpu-runXprofile", "gpu-run.profiles", kCrioShmSizeAnnotation, kLabelShmSize + 1})
    EXPECT_FALSE(std::regex_match(other, ere)) << other;
}

// Go's path.Match, as containerd matches pod_annotations, for the globs used here: '*'
// matches any run of characters but '/', everything else itself.
bool glob_match(const std::string& glob, const std::string& name) {
  if (glob.empty()) return name.empty();
  if (glob[0] == '*') {
    for (std::size_t i = 0; i <= name.size(); ++i) {
      if (glob_match(glob.substr(1), name.substr(i))) return true;
      if (i < name.size() && name[i] == '/') break;
    }
    return false;
  }
  return !name.empty() && glob[0] == name[0] && glob_match(glob.substr(1), name.substr(1));
}

TEST(Contract, PodAnnotationGlobsLetEveryRequestAnnotationThrough) {
  const std::vector<std::string> globs = request_annotation_globs();
  EXPECT_EQ(globs, (std::vector<std::string>{"gpu-run.*", kCrioShmSizeAnnotation}));
  auto passes = [&](const std::string& key) {
    for (const auto& g : globs)
      if (glob_match(g, key)) return true;
    return false;
  };
  for (const RequestKeySpec& k : kRequestKeys) EXPECT_TRUE(passes(k.annotation)) << k.annotation;
  EXPECT_TRUE(passes(kCrioShmSizeAnnotation));
  for (const char* other : {"gpu-runXprofile", "io.kubernetes.cri-o.Devices", "example.com/gpu-run.profile"})
    EXPECT_FALSE(passes(other)) << other;
}

TEST(Contract, EveryRequestKeyReachesTheRequestByAnnotationAndByEnv) {
  for (const RequestKeySpec& k : kRequestKeys) {
    SpecFacts by_env;
    by_env.env[k.env] = "7";
    SpecFacts by_annotation;
    by_annotation.annotations[k.annotation] = "7";
    // The key's other name, where it has one, read exactly as its own.
    SpecFacts by_alias = by_env;
    if (k.env_alias) by_alias.env = {{k.env_alias, "7"}};
    for (const SpecFacts& spec : {by_env, by_annotation, by_alias}) {
      const ContainerRequest r = container_request({}, spec);
      EXPECT_TRUE(r.named_anything()) << k.name;
      const std::optional<std::string>* fields[] = {&r.profile, &r.gpus, &r.workers, &r.batch_size, &r.shm_size};
      EXPECT_EQ(*fields[static_cast<int>(k.key)], "7") << k.name;
    }
    EXPECT_TRUE(has_request_annotation({{k.annotation, ""}})) << k.name;
  }
  EXPECT_FALSE(has_request_annotation({{kCrioShmSizeAnnotation, "1g"}, {"gpu-run.other", "x"}}));
}

TEST(Contract, EnvAndLabelsOfASizedContainer) {
  const NameValues env = container_env("imagenet", 0, 4, 64, 1536 * kMiB);
  ASSERT_EQ(env.size(), 5u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"GPU_RUN_PROFILE", "imagenet"}));
  // The request's own name, and its alias, still written for the jobs that read it.
  EXPECT_EQ(env[1], (std::pair<std::string, std::string>{"GPU_RUN_WORKERS", "4"}));
  EXPECT_EQ(env[2], (std::pair<std::string, std::string>{"GPU_RUN_NUM_WORKERS", "4"}));
  EXPECT_EQ(env[3], (std::pair<std::string, std::string>{"GPU_RUN_BATCH_SIZE", "64"}));
  EXPECT_EQ(env[4], (std::pair<std::string, std::string>{"GPU_RUN_SHM_SIZE", "1536m"}));
  const NameValues labels = container_labels("imagenet", 0, 1536 * kMiB);
  EXPECT_EQ(labels, (NameValues{{"gpu-run.profile", "imagenet"}, {"gpu-run.shm-size", "1536m"}}));
  // GPUs are recorded when there are any; a size only when one was applied.
  EXPECT_EQ(container_env("imagenet", 2, 4, 64, std::nullopt), (NameValues{{"GPU_RUN_PROFILE", "imagenet"},
                                                                           {"GPU_RUN_GPUS", "2"},
                                                                           {"GPU_RUN_WORKERS", "4"},
                                                                           {"GPU_RUN_NUM_WORKERS", "4"},
                                                                           {"GPU_RUN_BATCH_SIZE", "64"}}));
  EXPECT_EQ(container_labels("imagenet", 2, std::nullopt),
            (NameValues{{"gpu-run.profile", "imagenet"}, {"gpu-run.gpus", "2"}}));
  const auto names = contract_env_names();
  for (const char* n :
       {"GPU_RUN_PROFILE", "GPU_RUN_GPUS", "GPU_RUN_WORKERS", "GPU_RUN_NUM_WORKERS", "GPU_RUN_SHM_SIZE"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

// The trap: GPU_RUN_NUM_WORKERS=8 was ignored by the runtime, the hook and the pods.
TEST(Contract, TheWorkersAliasIsReadAsTheWorkersAndTwoValuesAreRefused) {
  EXPECT_EQ(std::string(request_key(RequestKey::kWorkers).env_alias), "GPU_RUN_NUM_WORKERS");
  EXPECT_EQ(request_key_of_env("GPU_RUN_NUM_WORKERS"), &request_key(RequestKey::kWorkers));
  EXPECT_EQ(request_key_of_env("GPU_RUN_WORKERS"), &request_key(RequestKey::kWorkers));
  EXPECT_EQ(request_key_of_env("GPU_RUN_SHM_LIMIT"), nullptr);
  SpecFacts spec;
  spec.env = {{"GPU_RUN_NUM_WORKERS", "8"}};
  EXPECT_EQ(container_request({}, spec).workers, "8");
  spec.env["GPU_RUN_WORKERS"] = "8";
  EXPECT_TRUE(container_request({}, spec).conflict.empty());
  spec.env["GPU_RUN_WORKERS"] = "4";
  const ContainerRequest r = container_request({}, spec);
  EXPECT_EQ(r.conflict, "GPU_RUN_WORKERS=4 and GPU_RUN_NUM_WORKERS=8 name one key (workers) with two values: give one");
  // decide_shm refuses it, naming both, as it refuses any bad key: the start fails.
  spec.has_ipc_namespace = true;
  const ShmDecision d = decide_shm(r, spec, Config{}, ProfileStore{{GPU_RUN_SOURCE_PROFILES}}, HostFacts{2, 0, kGiB});
  EXPECT_FALSE(d.act);
  EXPECT_TRUE(d.explicit_request);
  ASSERT_TRUE(d.error);
  EXPECT_EQ(std::string(d.error->what()), r.conflict);
  EXPECT_EQ(d.error->exit_code(), 2);
}

TEST(ContractTest, PodAppContainerByContainerdOrCrioKey) {
  EXPECT_TRUE(is_pod_app_container({{"io.kubernetes.cri.container-type", "container"}}));
  EXPECT_TRUE(is_pod_app_container({{"io.kubernetes.cri-o.ContainerType", "container"}}));
  EXPECT_FALSE(is_pod_app_container({{"io.kubernetes.cri.container-type", "sandbox"}}));
  EXPECT_FALSE(is_pod_app_container({{"gpu-run.profile", "container"}}));
  EXPECT_FALSE(is_pod_app_container({}));
}

}  // namespace
}  // namespace gpurun
