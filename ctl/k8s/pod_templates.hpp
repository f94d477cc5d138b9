#pragma once

// The pod templates of a Kubernetes object, and each reviewed as gpu-run-webhook reviews a Pod:
// what `gpu-run-ctl k8s -f` does to a manifest (as `istioctl kube-inject -f` runs its injector
// over one).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pod/pod_review.hpp"
#include "pod/webhook_config.hpp"
#include "profiles/profile_store.hpp"

namespace gpurun {

// Where `object` keeps its pod templates, as JSON pointers ("" for a Pod: the object itself),
// by its kind and API group: Pod; PodTemplate (/template); ReplicationController, Deployment,
// ReplicaSet, StatefulSet, DaemonSet, Job (/spec/template); CronJob
// (/spec/jobTemplate/spec/template); kubeflow.org's training jobs, each role of each
// spec.<x>ReplicaSpecs (/spec/pytorchReplicaSpecs/Worker/template: PyTorchJob, TFJob, MPIJob,
// XGBoostJob, PaddleJob, JAXJob). Only templates that are objects. Other objects have none. Pure.
std::vector<std::string> pod_template_pointers(const nlohmann::ordered_json& object);

// One pod template's review.
struct TemplateReview {
  std::string object;  // "Deployment ml/trainer" (a List's item: "items[2] Deployment ml/trainer")
  std::string where;   // the template in the object: "spec.template" ("" for a Pod)
  PodReview review;
};

// Reviews every pod template of `object` (every item's, for a List) with review_pod, as the
// webhook reviews a Pod of that metadata and spec, and changes each patched one by its patch.
// `default_profile` (or null) is the profile of a template that names none. Pure.
std::vector<TemplateReview> review_pod_templates(nlohmann::ordered_json& object, const WebhookConfig& config,
                                                 const ProfileStore& store, const std::string* default_profile);

}  // namespace gpurun
