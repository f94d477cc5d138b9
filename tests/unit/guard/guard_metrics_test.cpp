#include "guard/guard_metrics.hpp"

#include <gtest/gtest.h>

#include "base/units.hpp"

namespace gpurun {
namespace {

GuardedShm job(std::string id, std::string name, std::uint64_t used) {
  GuardedShm c;
  c.id = std::move(id);
  c.name = std::move(name);
  c.profile = "imagenet";
  c.engine = "docker";
  c.size = 64 * kMiB;
  c.used = used;
  return c;
}

TEST(GuardMetricsTest, RendersEveryMetricOncePerContainerWithHelpAndType) {
  GuardedShm a = job("aaa", "train", 10 * kMiB);
  a.peak = 20 * kMiB;
  a.growths = 3;
  a.refusals = 1;
  a.blocked = 1;
  const std::string text = render_guard_metrics({a});
  const std::string labels = "{container_id=\"aaa\",container_name=\"train\",profile=\"imagenet\",engine=\"docker\"}";
  EXPECT_NE(text.find("# TYPE gpu_run_guard_containers gauge\ngpu_run_guard_containers 1\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP gpu_run_shm_size_bytes "), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_shm_size_bytes gauge\ngpu_run_shm_size_bytes" + labels + " 67108864\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpu_run_shm_used_bytes" + labels + " 10485760\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_shm_peak_bytes" + labels + " 20971520\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_shm_growths_total counter\ngpu_run_shm_growths_total" + labels + " 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_shm_growths_refused_total counter\n"
                      "gpu_run_shm_growths_refused_total" +
                      labels + " 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_shm_growth_blocked gauge\ngpu_run_shm_growth_blocked" + labels + " 1\n"),
            std::string::npos);
}

TEST(GuardMetricsTest, NoContainerStillHasTheFamilies) {
  const std::string text = render_guard_metrics({});
  EXPECT_NE(text.find("gpu_run_guard_containers 0\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE gpu_run_shm_used_bytes gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("gpu_run_shm_used_bytes{"), std::string::npos);
}

TEST(GuardMetricsTest, TheGuardsVersionAndItsLoopsLastPasses) {
  const std::string text = render_guard_metrics({}, GuardSelf{"1.2.3", 1700000060.25, 1700000060.5});
  EXPECT_NE(text.find("# TYPE gpu_run_guard_build_info gauge\ngpu_run_guard_build_info{version=\"1.2.3\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE gpu_run_guard_last_sample_timestamp_seconds gauge\n"
                      "gpu_run_guard_last_sample_timestamp_seconds 1.70000006025e+09\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpu_run_guard_last_discovery_timestamp_seconds 1.7000000605e+09\n"), std::string::npos)
      << "as Go's client writes floats";
  EXPECT_NE(
      render_guard_metrics({}).find(std::string("gpu_run_guard_build_info{version=\"") + GPU_RUN_VERSION + "\"} 1\n"),
      std::string::npos)
      << "this build's version by default";
  EXPECT_NE(render_guard_metrics({}).find("gpu_run_guard_last_sample_timestamp_seconds 0\n"), std::string::npos)
      << "0 before the first pass";
}

TEST(GuardMetricsTest, EscapesTheLabelValuesAContainerControls) {
  GuardedShm c = job("bbb", "x\"} 1\ninjected_total 9", 0);
  c.profile = "a\\b";
  const std::string text = render_guard_metrics({c});
  EXPECT_NE(text.find("container_name=\"x\\\"} 1\\ninjected_total 9\",profile=\"a\\\\b\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\ninjected_total"), std::string::npos);
}

TEST(GuardMetricsTest, KeepsThePeakAcrossUpdatesAndForgetsRemovedContainers) {
  GuardMetrics m;
  m.update(job("aaa", "train", 30 * kMiB));
  m.update(job("aaa", "train", 5 * kMiB));
  m.update(job("ccc", "other", kMiB));
  std::string text = m.render(GuardSelf{});
  EXPECT_NE(text.find("gpu_run_guard_containers 2\n"), std::string::npos);
  EXPECT_NE(text.find("gpu_run_shm_peak_bytes{container_id=\"aaa\",container_name=\"train\",profile=\"imagenet\","
                      "engine=\"docker\"} 31457280\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpu_run_shm_used_bytes{container_id=\"aaa\",container_name=\"train\",profile=\"imagenet\","
                      "engine=\"docker\"} 5242880\n"),
            std::string::npos);
  m.remove("aaa");
  text = m.render(GuardSelf{});
  EXPECT_NE(text.find("gpu_run_guard_containers 1\n"), std::string::npos);
  EXPECT_EQ(text.find("container_id=\"aaa\""), std::string::npos);
}

TEST(GuardMetricsTest, OrphanedBytesOnlyOnceCountedAndKeptAcrossUpdates) {
  GuardMetrics metrics;
  metrics.set_orphaned("aaa", 5);  // not guarded yet: nothing
  metrics.update(job("aaa", "train", 1));
  EXPECT_EQ(metrics.render(GuardSelf{}).find("gpu_run_shm_orphaned_bytes{"), std::string::npos)
      << "absent until counted";
  EXPECT_NE(metrics.render(GuardSelf{}).find("# TYPE gpu_run_shm_orphaned_bytes gauge\n"), std::string::npos);
  metrics.set_orphaned("aaa", 3 * kMiB);
  metrics.update(job("aaa", "train", 2));
  EXPECT_NE(metrics.render(GuardSelf{})
                .find("gpu_run_shm_orphaned_bytes{container_id=\"aaa\",container_name=\"train\","
                      "profile=\"imagenet\",engine=\"docker\"} 3145728\n"),
            std::string::npos)
      << metrics.render(GuardSelf{});
}

}  // namespace
}  // namespace gpurun
