#include "ctl/configure/undo.hpp"

#include <cerrno>
#include <cstdio>
#include <iostream>

#include "base/error.hpp"
#include "ctl/configure/chain.hpp"
#include "ctl/ctl_common.hpp"

namespace gpurun {
namespace {

// Removes `path` (the symlink's target when it is one, as configure edits it). False when it
// was not there.
bool remove_file(const fs::path& path) {
  std::error_code ec;
  const fs::path target = fs::is_symlink(fs::symlink_status(path, ec)) ? fs::canonical(path, ec) : path;
  if (ec) throw Error(path.string() + ": cannot resolve the symlink: " + ec.message(), ec.value());
  if (::remove(target.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  const int err = errno;
  throw system_error("remove " + target.string() + (err == EACCES ? " (run as root)" : ""), err);
}

}  // namespace

UndoEdit restore_unless_changed(const std::string& source, const std::string& change, const std::string& by_hand,
                                const std::string& bak, const std::string& backup) {
  if (!change.empty())
    throw usage_error(source + " changed since gpu-run-ctl configure wrote it (" + change + "): " + by_hand +
                      ", or copy " + bak +
                      " over it to drop that change too (gpu-run-ctl leaves both files as they are)");
  UndoEdit undo;
  undo.kind = UndoEdit::kRestore;
  undo.text = backup;
  undo.said = "restored from " + bak + ", byte for byte as it was before gpu-run-ctl configure";
  return undo;
}

void apply_undo(const fs::path& path, const UndoEdit& undo, bool dry_run) {
  std::error_code ec;
  const bool has_backup = undo.kind != UndoEdit::kNothing && fs::exists(backup_path(path), ec);
  const std::optional<fs::path> chain_file = undo.entry_binary.empty() || !chain_of_binary(undo.entry_binary)
                                                 ? std::nullopt
                                                 : std::optional<fs::path>(undo.entry_binary);
  const std::string kept = chain_file ? chain_file->string() +
                                            " stays: containers started through gpu-run's entry run it for each exec, "
                                            "stop and delete; remove it once none of them runs"
                                      : "";
  if (dry_run) {
    if (undo.kind == UndoEdit::kNothing) {
      std::cerr << "gpu-run-ctl: --dry-run: " << undo.said << "\n";
      return;
    }
    if (undo.kind == UndoEdit::kRestore) {
      std::cout << undo.text;
      std::cout.flush();
    }
    std::cerr << "gpu-run-ctl: --dry-run: " << path.string() << " would be " << undo.said
              << (undo.kind == UndoEdit::kRestore ? ": the text above" : "") << " (nothing written)\n";
    if (has_backup) std::cerr << "gpu-run-ctl: would remove " << backup_path(path).string() << "\n";
    if (chain_file) std::cerr << "gpu-run-ctl: " << kept << "\n";
    return;
  }
  if (undo.kind == UndoEdit::kNothing) {
    std::cout << undo.said << "\n";
    return;
  }
  if (undo.kind == UndoEdit::kRestore)
    replace_file(path, undo.text, std::nullopt, std::nullopt);
  else
    remove_file(path);
  std::cout << path.string() << ": " << undo.said << "\n";
  if (has_backup && remove_file(backup_path(path))) std::cout << "removed " << backup_path(path).string() << "\n";
  if (chain_file) std::cout << "note: " << kept << "\n";
}

}  // namespace gpurun
