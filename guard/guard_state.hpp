#pragma once

// The node guard's state file (/run/gpu-run/guard.state): what it guards, kept so that a
// restarted guard resumes every container at once, before its first look at the engine (a
// docker ps and an inspect took 70-105 ms on CI's machine). A codec over nlohmann_json, and the
// process start time that tells the same process from a reused pid.

#include <cstdint>
#include <string>
#include <vector>

#include "decision/growth_limits.hpp"
#include "oci/container.hpp"

namespace gpurun {

// One guarded container as the state keeps it: its id, name, engine, pid, labels, annotations,
// IPC mode and whether its /dev/shm is an emptyDir; its process's start time; its metrics'
// profile, the note of its guarding line and its limits.
struct GuardStateEntry {
  ContainerInfo info;
  std::uint64_t start_time = 0;
  std::string profile;
  std::string note;
  GuardLimits limits;
};

// The state's text: a JSON array, one object an entry.
std::string guard_state_text(const std::vector<GuardStateEntry>& entries);

// The entries of a state's text. A text that is not JSON, or not an array, has none; an entry
// with a field missing or of the wrong type, an empty id, a pid or start time of 0 is skipped
// (the first look at the engine finds that container). Fields a later version added are ignored,
// and those an older one lacked (annotations, size_limit, recorded_ceiling) read as empty; a
// missing ipc reads as private, as that guard read the empty mode it restored.
std::vector<GuardStateEntry> parse_guard_state(const std::string& text);

// Field 22 of /proc/<pid>/stat, the process's start time in clock ticks after boot; 0 when unread.
std::uint64_t process_start_time(int pid);

}  // namespace gpurun
