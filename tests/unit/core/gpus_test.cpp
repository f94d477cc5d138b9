#include "oci/gpus.hpp"

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

TEST(GpusTest, CountsHostDevicesWhenTheDriverIsThere) {
  test::TempDir dev;
  for (const char* name : {"nvidia0", "nvidia1", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps", "null"})
    dev.write(name, "");
  EXPECT_EQ(count_host_gpus(dev.path().string()), 0u);  // no nvidiactl: no driver
  dev.write("nvidiactl", "");
  EXPECT_EQ(count_host_gpus(dev.path().string()), 2u);
  dev.write("nvidia7", "");
  EXPECT_EQ(count_host_gpus(dev.path().string()), 3u);
  EXPECT_EQ(count_host_gpus((dev / "missing").string()), 0u);
}

TEST(GpusTest, CountsAndAll) {
  EXPECT_EQ(parse_gpu_request("2").count, 2u);
  EXPECT_EQ(parse_gpu_request("0").count, 0u);
  EXPECT_TRUE(parse_gpu_request("all").all);
  EXPECT_TRUE(parse_gpu_request("count=all").all);
  EXPECT_EQ(parse_gpu_request("count=3,capabilities=compute").count, 3u);
}

TEST(GpusTest, DeviceLists) {
  GpuRequest r = parse_gpu_request("device=0,1");
  EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(r.devices, (std::vector<std::string>{"0", "1"}));
  r = parse_gpu_request("\"device=0,2,3\",capabilities=utility");
  EXPECT_EQ(r.count, 3u);
  EXPECT_EQ(parse_gpu_request("device=GPU-3a1b").count, 1u);
  EXPECT_EQ(parse_gpu_request("2").original, "2");
}

TEST(GpusTest, RejectsJunk) {
  for (const char* bad : {"0x", "-1", "", "two", "device=", "count=x", "device=0,count=2", "color=red", "1025"}) {
    EXPECT_THROW(parse_gpu_request(bad), Error) << bad;
  }
}

TEST(GpusTest, VisibleDevices) {
  EXPECT_EQ(count_visible_devices("0,1,2"), 3u);
  EXPECT_EQ(count_visible_devices("GPU-aaaa"), 1u);
  EXPECT_EQ(count_visible_devices("none"), 0u);
  EXPECT_EQ(count_visible_devices("void"), 0u);
  EXPECT_EQ(count_visible_devices(""), 0u);
  EXPECT_EQ(count_visible_devices("all"), std::nullopt);
}

TEST(GpusTest, DevicePaths) {
  EXPECT_TRUE(is_gpu_device_path("/dev/nvidia0"));
  EXPECT_TRUE(is_gpu_device_path("/dev/nvidia12"));
  EXPECT_FALSE(is_gpu_device_path("/dev/nvidiactl"));
  EXPECT_FALSE(is_gpu_device_path("/dev/nvidia-uvm"));
  EXPECT_FALSE(is_gpu_device_path("/dev/nvidia"));
}

}  // namespace
}  // namespace gpurun
