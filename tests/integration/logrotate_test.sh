#!/usr/bin/env bash
# The packages' /etc/logrotate.d/gpu-run, run by the real logrotate: it parses, and it rotates
# /var/log/gpu-run.log while a writer keeps the log open with O_APPEND, as the node guard does
# (copytruncate): the writer's next line lands at the start of the truncated log, not past a hole
# or in the rotated copy. Only the log's path is changed, to a file under a temporary directory.
set -u
source "$(dirname "$0")/lib.sh"
it_require_root
it_require_cmd logrotate

src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(it_tmpdir)
it_on_exit rm -rf "$work"
log=$work/gpu-run.log
conf=$work/gpu-run.logrotate
sed "s#^/var/log/gpu-run.log {#$log {#" "$src/packaging/logrotate/gpu-run" >"$conf"
assert_contains "$(cat "$conf")" "$log {" "the packaged file names one log, rewritten to the test's"

assert_exit 0 logrotate --debug --state "$work/state" "$conf"
assert_not_contains "$IT_OUT" "error" "logrotate reads the packaged file without an error"

# A writer that holds the log open (O_APPEND) across the rotation, as the guard does.
exec {fd}>>"$log"
printf 'before the rotation\n' >&"$fd"
assert_exit 0 logrotate --force --state "$work/state" "$conf"
printf 'after the rotation\n' >&"$fd"
exec {fd}>&-

assert_eq "before the rotation" "$(cat "$log.1")" "the rotated copy holds what was written before"
assert_eq "after the rotation" "$(cat "$log")" "the writer's next line starts the truncated log (no hole)"
assert_eq 19 "$(stat -c %s "$log")" "the log is as long as that one line"
it_done
