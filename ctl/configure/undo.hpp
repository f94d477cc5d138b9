#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace gpurun {

namespace fs = std::filesystem;

// What `configure ... --undo` does to the file configure edited: put back what was there
// before gpu-run's entry (docs/ARCHITECTURE.md, "Undo").
struct UndoEdit {
  enum Kind { kNothing, kRestore, kRemove } kind = kNothing;
  std::string text;          // kRestore: the file's text, the backup's bytes
  std::string entry_binary;  // what gpu-run's entry ran: a chain file goes with it
  std::string said;          // kRestore, kRemove: what is done to the file ("restored from ...", "removed");
                             // kNothing: the sentence saying why there is nothing to do
};

// The edit that restores `backup` (the file's bytes before gpu-run's entry, read from `bak`) when
// `change` (what else differs between the file without gpu-run's entry and the backup, in words)
// is empty; else throws Error (exit 2) naming `source`, the change, `by_hand` (what a person would
// do instead) and the backup.
UndoEdit restore_unless_changed(const std::string& source, const std::string& change, const std::string& by_hand,
                                const std::string& bak, const std::string& backup);

// --undo's act on `path`: writes `undo.text` (kRestore) or removes the file (kRemove), then
// removes its backup; prints what it did, and that a chain file the entry ran stays (containers
// started through it run it for each exec, stop and delete). With `dry_run`, prints the file as
// it would be on stdout and the rest on stderr, and changes nothing. Throws Error naming the
// path that could not be written or removed.
void apply_undo(const fs::path& path, const UndoEdit& undo, bool dry_run);

}  // namespace gpurun
