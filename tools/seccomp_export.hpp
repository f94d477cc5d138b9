#pragma once

// The hook's seccomp policy (core/oci/seccomp_policy.hpp) compiled to BPF by libseccomp: what
// tools/seccomp_bpf_gen writes into the build, and what the tests compare the built
// program with.
#include <linux/filter.h>
#include <seccomp.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "oci/seccomp_policy.hpp"

namespace gpurun {

// Returns the program; names of the policy this architecture lacks go to `skipped`.
// Throws std::runtime_error naming the libseccomp step that failed.
inline std::vector<sock_filter> export_hook_filter(std::vector<std::string>* skipped = nullptr) {
  auto fail = [](const std::string& what, int err) { return std::runtime_error(what + ": " + std::to_string(err)); };
  std::unique_ptr<void, void (*)(void*)> ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)), seccomp_release);
  if (!ctx) throw fail("seccomp_init", ENOMEM);
  for (const char* name : kHookSyscalls) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {  // not on this architecture
      if (skipped) skipped->emplace_back(name);
      continue;
    }
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0); rc != 0)
      throw fail(std::string("seccomp_rule_add ") + name, -rc);
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> tmp(std::tmpfile(), std::fclose);
  if (!tmp) throw fail("tmpfile", errno);
  if (int rc = seccomp_export_bpf(ctx.get(), fileno(tmp.get())); rc != 0) throw fail("seccomp_export_bpf", -rc);
  std::rewind(tmp.get());
  std::vector<sock_filter> prog;
  sock_filter insn;
  while (std::fread(&insn, sizeof insn, 1, tmp.get()) == 1) prog.push_back(insn);
  if (prog.empty()) throw fail("seccomp_export_bpf wrote no program", EINVAL);
  return prog;
}

}  // namespace gpurun
