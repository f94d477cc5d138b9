# gpu-run %preun: on erase ($1 = 0) the hooks.d entry goes while gpu-run-hook still exists;
# an upgrade ($1 = 1) keeps it. %config(noreplace) keeps a changed config as .rpmsave.
if [ "$1" = 0 ]; then
  hooks_file=/usr/share/containers/oci/hooks.d/gpu-run.json
  if [ -f "$hooks_file" ] && grep -q '"/usr/bin/gpu-run-hook"' "$hooks_file"; then
    rm -f "$hooks_file"
  fi
fi
exit 0
