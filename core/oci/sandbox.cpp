#include "oci/sandbox.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <cerrno>
#include <memory>

#include "base/error.hpp"

namespace gpurun {
namespace {

constexpr cap_value_t kKeep[] = {CAP_SYS_ADMIN, CAP_SYS_CHROOT, CAP_SYS_PTRACE, CAP_DAC_OVERRIDE};

struct CapFree {
  void operator()(cap_t c) const { cap_free(c); }
};
using CapGuard = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

// The allow-list of seccomp_policy.hpp, compiled to BPF at build time by tools/seccomp_bpf_gen.
const sock_filter kHookFilter[] = {
#include "seccomp_filter.inc"
};

bool kept(cap_value_t cap) {
  for (cap_value_t k : kKeep)
    if (k == cap) return true;
  return false;
}

}  // namespace

void drop_capabilities() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw system_error("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  // The bounding set can only shrink while CAP_SETPCAP is still effective. One prctl per
  // capability, up to the first the kernel does not know (EINVAL); no separate probing
  // (each of these calls commits new credentials, which is what a hook's start pays for).
  for (int cap = 0; cap < 64; ++cap) {
    if (kept(static_cast<cap_value_t>(cap))) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
    if (errno == EINVAL) break;
    if (errno != EPERM) throw system_error("drop capability from the bounding set", errno);
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    throw system_error("clear ambient capabilities", errno);
  CapGuard caps(cap_init());
  if (!caps) throw system_error("cap_init", errno);
  const int n = static_cast<int>(sizeof kKeep / sizeof kKeep[0]);
  if (cap_set_flag(caps.get(), CAP_PERMITTED, n, kKeep, CAP_SET) != 0 ||
      cap_set_flag(caps.get(), CAP_EFFECTIVE, n, kKeep, CAP_SET) != 0)
    throw system_error("cap_set_flag", errno);
  if (cap_set_proc(caps.get()) != 0) throw system_error("drop capabilities (cap_set_proc)", errno);
}

void install_seccomp() {
  sock_fprog prog{static_cast<unsigned short>(sizeof kHookFilter / sizeof kHookFilter[0]),
                  const_cast<sock_filter*>(kHookFilter)};
  // Needs no_new_privs (drop_capabilities sets it) or CAP_SYS_ADMIN.
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
    throw system_error("install the seccomp filter (prctl)", errno);
}

std::size_t hook_filter_length() { return sizeof kHookFilter / sizeof kHookFilter[0]; }
const void* hook_filter_data() { return kHookFilter; }

}  // namespace gpurun
