# gpu-run %post: every file is in place now, so the hooks.d entry naming gpu-run-hook may
# appear (see packaging/debian/postinst). dockerd's daemon.json is never edited.
hooks_src=/usr/share/gpu-run/hooks.d/gpu-run.json
hooks_dir=/usr/share/containers/oci/hooks.d
if [ -f "$hooks_src" ]; then
  mkdir -p "$hooks_dir"
  cp "$hooks_src" "$hooks_dir/.gpu-run.json.rpm-tmp" &&
    mv -f "$hooks_dir/.gpu-run.json.rpm-tmp" "$hooks_dir/gpu-run.json"
fi
# /run/gpu-run now, not only at the next boot (tmpfiles.d/gpu-run.conf).
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  systemd-tmpfiles --create gpu-run.conf || :
fi
exit 0
