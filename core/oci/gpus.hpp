#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpurun {

// What a door knows about whether a GPU reaches the container: PyTorch pins batches only when
// CUDA is available inside it.
enum class GpuReach {
  unknown,  // the door cannot tell (GPUs requested: assumed to reach it)
  none,     // none does (--gpu-request none, a host without GPUs)
  some,     // one does (a GPU device in the container's spec)
};

// A GPU request in Docker's --gpus syntax: "2", "all", "device=0,1", "count=2",
// "\"device=0,1\",capabilities=compute".
struct GpuRequest {
  bool all = false;
  unsigned count = 0;                // when !all: how many GPUs (ranks)
  std::vector<std::string> devices;  // explicit device ids/UUIDs, when given
  std::string original;              // the flag's text, to pass on to docker
};

// Parses --gpus. Throws Error (exit 2) naming the flag on anything else ("0x", "-1").
GpuRequest parse_gpu_request(const std::string& text);

// Counts GPUs named by NVIDIA_VISIBLE_DEVICES: "0,1" -> 2, "GPU-uuid" -> 1,
// "none"/"void"/"" -> 0, "all" -> nullopt (caller counts the devices).
std::optional<unsigned> count_visible_devices(const std::string& value);

// Counts /dev/nvidiaN devices under `dev_dir`; 0 without `dev_dir`/nvidiactl (no driver).
unsigned count_host_gpus(const std::string& dev_dir = "/dev");

// True for a path "/dev/nvidiaN" (N digits), the per-GPU device node.
bool is_gpu_device_path(const std::string& path);

}  // namespace gpurun
