#pragma once

namespace gpurun {

// Keeps only the capabilities the hook needs (SYS_ADMIN and SYS_CHROOT for setns and
// mount, SYS_PTRACE to open another process's namespace, DAC_OVERRIDE to read bundles
// of other owners) in every set, clears the bounding and ambient sets and sets
// no_new_privs. Throws Error on failure.
void drop_capabilities();

// Installs a seccomp allow-list of the syscalls the hook makes; anything else fails
// with EPERM. Throws Error on failure.
void install_seccomp();

}  // namespace gpurun
