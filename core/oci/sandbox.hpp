#pragma once

#include <cstddef>

namespace gpurun {

// Keeps only the capabilities the hook needs (SYS_ADMIN and SYS_CHROOT for setns and
// mount, SYS_PTRACE to open another process's namespace, DAC_OVERRIDE to read bundles
// of other owners) in every set, clears the bounding and ambient sets and sets
// no_new_privs. Throws Error on failure.
void drop_capabilities();

// Installs a seccomp allow-list of the syscalls the hook makes (seccomp_policy.hpp);
// anything else fails with EPERM. The BPF program is generated at build time. Throws Error
// on failure.
void install_seccomp();

// The installed program, for tests: its instructions (struct sock_filter) and their count.
std::size_t hook_filter_length();
const void* hook_filter_data();

}  // namespace gpurun
