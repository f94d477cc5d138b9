#pragma once

#include <string>
#include <vector>

#include "ctl/doctor/doctor_facts.hpp"

namespace gpurun {

// Exit codes of doctor: the worst finding. 1 (doctor could not check) and 2 (a wrong request)
// keep their meaning from the rest of gpu-run-ctl.
constexpr int kDoctorExitWarn = 3;
constexpr int kDoctorExitFail = 4;

enum class Level { kOk, kWarn, kFail };

// "OK", "WARN", "FAIL".
const char* level_name(Level level);

struct Finding {
  Level level = Level::kOk;
  std::string check;     // a stable id: shm-mount, shm-size, shm-use, ipc, memory, sizing, workers, ...
  std::string message;   // what was found, with the numbers
  std::string fix;       // what to do; empty when nothing
  std::string engine{};  // the engine whose terms the finding speaks in ("vLLM", "NCCL"); empty when none
};

// The findings for `facts`, in a fixed order. Pure: no I/O.
std::vector<Finding> diagnose(const DoctorFacts& facts);

struct CrashFacts;  // doctor_log.hpp

// A crash of a job whose command line started more DataLoader workers than the recorded plan
// holds: that cause, first, before what the log shows (a full /dev/shm is its consequence).
void put_workers_mismatch_first(const CrashFacts& facts, std::vector<Finding>& findings);

// The worst level among `findings` (kOk when empty).
Level worst_level(const std::vector<Finding>& findings);

// 0 when the worst finding is OK, kDoctorExitWarn for WARN, kDoctorExitFail for FAIL.
int doctor_exit_code(const std::vector<Finding>& findings);

// Classifies /dev/shm names: PyTorch's `torch_*` segments and NCCL's `nccl-*` ones.
bool is_torch_segment(const std::string& name);
bool is_nccl_segment(const std::string& name);

}  // namespace gpurun
