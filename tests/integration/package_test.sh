#!/usr/bin/env bash
# The .deb and .rpm, installed and used as an admin would: builds them (scripts/package, or
# takes them from $PACKAGE_DIR), runs lintian, installs the .deb into a clean Debian 12
# minbase root, checks where every file went, registers the runtime with
# `gpu-run-ctl configure docker`, runs a container through the installed runtime under an
# isolated dockerd and checks its /dev/shm, installs a team profile package built by
# packaging/team-profile-package, then removes and purges and checks what is left.
#
# The Debian root is made once by scripts/minbase-root and cached as
# /var/cache/gpu-run/bookworm-minbase.tar (about a minute the first time). The host is
# Debian 12 too, so the host's dockerd executes the root's /usr/bin/gpu-run-runtime directly.
# Packages: $PACKAGE_DIR's gpu-run_*.deb / gpu-run-*.rpm if set; else the build under test
# ($GPU_RUN_BIN_DIR/..) packaged by cpack if it is a Release build with prefix /usr; else
# scripts/package into $GPU_RUN_PACKAGE_BUILD_DIR (default build/pkg, reused between runs).
source "$(dirname "$0")/lib.sh"
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
it_require_root
it_require_cmd dpkg-deb dpkg-shlibdeps debootstrap rpm rpmbuild lintian cmake jq chroot sha256sum

d=$(it_tmpdir)
it_on_exit rm -rf --one-file-system "$d"
it_on_exit it_dockerd_stop "$d/docker"
it_on_exit it_umount_below "$d/root"
root=$d/root

# ------------------------------------------------------------------------------- packages
# The build under test ($GPU_RUN_BIN_DIR/..) is packaged as it is when it is a Release build
# for /usr (the tested binaries, and no second build); otherwise scripts/package builds one.
tested_build=${GPU_RUN_BIN_DIR:+$(dirname "$GPU_RUN_BIN_DIR")}
if [[ -n ${PACKAGE_DIR:-} ]]; then
  deb=$(ls "$PACKAGE_DIR"/gpu-run_*.deb 2>/dev/null | head -n1)
  rpmf=$(ls "$PACKAGE_DIR"/gpu-run-*.rpm 2>/dev/null | head -n1)
elif [[ -n $tested_build && -f $tested_build/CPackConfig.cmake ]] &&
  grep -qx 'CMAKE_INSTALL_PREFIX:PATH=/usr' "$tested_build/CMakeCache.txt" &&
  grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' "$tested_build/CMakeCache.txt"; then
  it_log "packaging the build under test, $tested_build"
  (cd "$tested_build" && cpack -G "DEB;RPM" -B "$d/packages") >"$d/cpack.log" 2>&1 || {
    tail -n 30 "$d/cpack.log" >&2
    it_die "cpack failed in $tested_build"
  }
  deb=$(ls "$d"/packages/gpu-run_*.deb 2>/dev/null | head -n1)
  rpmf=$(ls "$d"/packages/gpu-run-*.rpm 2>/dev/null | head -n1)
else
  it_log "building the packages (scripts/package ${GPU_RUN_PACKAGE_BUILD_DIR:-build/pkg})"
  out=$("$src/scripts/package" "${GPU_RUN_PACKAGE_BUILD_DIR:-$src/build/pkg}") || it_die "scripts/package failed"
  deb=$(grep '\.deb$' <<<"$out" | head -n1)
  rpmf=$(grep '\.rpm$' <<<"$out" | head -n1)
fi
[[ -f $deb ]] || it_die "no .deb found (PACKAGE_DIR=${PACKAGE_DIR:-unset})"
[[ -f $rpmf ]] || it_die "no .rpm found (PACKAGE_DIR=${PACKAGE_DIR:-unset})"
it_log "deb: $deb"
it_log "rpm: $rpmf"

assert_exit 0 lintian --fail-on error "$deb"
assert_not_contains "$IT_OUT" "E: " "lintian reports no errors on the .deb"
assert_not_contains "$(dpkg-deb -f "$deb" Depends)" "yaml-cpp" \
  "the gpu-run package does not depend on yaml-cpp (gpu-run-ctl links its archive)"
assert_not_contains "$(dpkg-deb -f "$deb" Depends)" "nghttp2" \
  "the gpu-run package does not depend on nghttp2 (gpu-run-ctl links its archive)"
assert_exit 0 dpkg-deb -c "$deb"
assert_contains "$IT_OUT" "./usr/share/doc/gpu-run/docs/kubernetes.md" "the guides README.md links to are installed beside it"

# The component packages from the same build: gpu-run-webhook and gpu-run-metrics (the module
# `gpu-run-ctl guard --metrics` loads; it links cpp-httplib, which gpu-run does not depend on).
pkg_build=$tested_build
[[ -n $pkg_build && -f $pkg_build/CPackMetricsConfig.cmake ]] || pkg_build=${GPU_RUN_PACKAGE_BUILD_DIR:-$src/build/pkg}
if [[ -f $pkg_build/CPackMetricsConfig.cmake ]]; then
  for part in Webhook Metrics; do
    (cd "$pkg_build" && cpack --config "CPack${part}Config.cmake" -B "$d/packages-$part") >"$d/cpack-$part.log" 2>&1 || {
      tail -n 30 "$d/cpack-$part.log" >&2
      it_die "cpack --config CPack${part}Config.cmake failed in $pkg_build"
    }
  done
  mdeb=$(ls "$d"/packages-Metrics/gpu-run-metrics_*.deb 2>/dev/null | head -n1)
  wdeb=$(ls "$d"/packages-Webhook/gpu-run-webhook_*.deb 2>/dev/null | head -n1)
  [[ -f $mdeb && -f $wdeb ]] || it_die "the gpu-run-metrics or gpu-run-webhook .deb was not built"
  for part in "$mdeb" "$wdeb"; do
    assert_exit 0 lintian --fail-on error "$part"
    assert_not_contains "$IT_OUT" "E: " "lintian reports no errors on $(basename "$part")"
  done
  mdeps=$(dpkg-deb -f "$mdeb" Depends)
  assert_contains "$mdeps" "libcpp-httplib0.11" "gpu-run-metrics depends on Debian's cpp-httplib"
  assert_contains "$mdeps" "gpu-run (= " "gpu-run-metrics depends on the gpu-run of its version"
  assert_contains "$(dpkg-deb -c "$mdeb")" "./usr/lib/gpu-run/gpu-run-metrics-http.so" \
    "gpu-run-metrics holds the module where gpu-run-ctl looks for it"
  assert_not_contains "$(dpkg-deb -c "$deb")" "gpu-run-metrics-http.so" "the gpu-run package leaves the module out"
  assert_not_contains "$(dpkg-deb -f "$deb" Depends)" "httplib" "the gpu-run package does not depend on cpp-httplib"
else
  it_fail "no CPackMetricsConfig.cmake in $pkg_build: the component packages were not checked"
fi

# The .rpm cannot be installed on Debian in a meaningful way: check its layout and scripts.
rpm_files=$(rpm -qlp "$rpmf" 2>/dev/null)
for f in /usr/bin/gpu-run /usr/bin/gpu-run-hook /usr/bin/gpu-run-runtime /usr/bin/gpu-run-ctl \
  /usr/share/gpu-run/profiles/imagenet.json /etc/gpu-run/config.json /etc/gpu-run/profiles.d \
  /usr/share/gpu-run/hooks.d/gpu-run.json /usr/share/doc/gpu-run/README.md \
  /usr/share/doc/gpu-run/daemon.json.example /usr/share/man/man1/gpu-run.1.gz \
  /usr/share/man/man5/gpu-run-profile.5.gz /usr/share/bash-completion/completions/gpu-run-ctl \
  /usr/lib/systemd/system/gpu-run-guard.service /usr/lib/tmpfiles.d/gpu-run.conf /usr/lib/systemd/system/gpu-run-guard-podman.service; do
  assert_contains "$rpm_files" "$f" "rpm holds $f"
done
assert_eq Apache-2.0 "$(rpm -qp --queryformat '%{LICENSE}' "$rpmf" 2>/dev/null)" "rpm: License is Apache-2.0"
assert_contains "$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/doc/gpu-run/copyright)" "License: Apache-2.0" "deb: copyright names Apache-2.0"
assert_eq "/etc/gpu-run/config.json
/etc/logrotate.d/gpu-run" "$(rpm -qp --configfiles "$rpmf" 2>/dev/null | sort)" \
  "rpm: config.json and the logrotate file are its only %config files"
rpm_flags=$(rpm -qp --queryformat '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpmf" 2>/dev/null)
assert_contains "$rpm_flags" "cn /etc/gpu-run/config.json" "rpm: config.json is %config(noreplace)"
assert_contains "$rpm_flags" "cn /etc/logrotate.d/gpu-run" "rpm: the logrotate file is %config(noreplace)"
rpm_scripts=$(rpm -qp --scripts "$rpmf" 2>/dev/null)
assert_contains "$rpm_scripts" "postinstall scriptlet" "rpm: %post installs the hooks.d entry"
assert_contains "$rpm_scripts" "/usr/share/containers/oci/hooks.d" "rpm: scripts name the hooks.d directory"
assert_not_contains "$rpm_scripts" "systemctl" "rpm: no script enables or starts gpu-run-guard.service"

# ------------------------------------------------------------------------------ clean root
# A clean minbase root, made once by scripts/minbase-root (debootstrap from the machine's own
# mirror) and cached; scripts/test starts it beside the release tests.
mkdir -p "$root"
cache=$("$src/scripts/minbase-root") || it_die "scripts/minbase-root failed (above)"
tar --numeric-owner -C "$root" -xf "$cache" || it_die "cannot unpack $cache"
mount -t proc proc "$root/proc" || it_die "cannot mount /proc in $root"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 "$@"; }
assert_eq "" "$(in_root dpkg-query -W -f '${Status}' gpu-run 2>/dev/null)" "the root starts without gpu-run"

# An admin's daemon.json that installing must not touch.
mkdir -p "$root/etc/docker"
printf '{\n  "log-level": "warn"\n}\n' >"$root/etc/docker/daemon.json"
admin_sum=$(sha256sum <"$root/etc/docker/daemon.json")

# --------------------------------------------------------------------------------- install
cp "$deb" "$root/tmp/gpu-run.deb"
assert_exit 0 in_root dpkg -i /tmp/gpu-run.deb
assert_contains "$IT_OUT" "gpu-run-ctl configure docker" "first install says how to register with docker"
assert_eq "install ok installed" "$(in_root dpkg-query -W -f '${Status}' gpu-run)" "dpkg -i installs gpu-run (dependencies met by minbase)"
assert_eq "$admin_sum" "$(sha256sum <"$root/etc/docker/daemon.json")" "installing leaves daemon.json as it was"

for f in /usr/bin/gpu-run /usr/bin/gpu-run-hook /usr/bin/gpu-run-runtime /usr/bin/gpu-run-ctl; do
  [[ -x $root$f ]] && it_pass "$f installed, executable" || it_fail "$f missing or not executable"
done
for f in /usr/share/gpu-run/profiles/{default,imagenet,multi-gpu}.json /etc/gpu-run/config.json \
  /usr/share/doc/gpu-run/{README.md,daemon.json.example,copyright,changelog.Debian.gz} \
  /usr/share/man/man1/{gpu-run,gpu-run-ctl,gpu-run-hook,gpu-run-runtime}.1.gz \
  /usr/share/man/man5/gpu-run-{profile,config}.5.gz \
  /usr/share/bash-completion/completions/{gpu-run,gpu-run-ctl} \
  /usr/share/zsh/vendor-completions/{_gpu-run,_gpu-run-ctl} \
  /usr/share/fish/vendor_completions.d/{gpu-run,gpu-run-ctl}.fish /usr/share/doc/gpu-run/copyright \
  /etc/logrotate.d/gpu-run; do
  [[ -f $root$f ]] && it_pass "$f installed" || it_fail "$f missing"
done
# The node guard's unit: installed, naming the installed gpu-run-ctl, and not enabled.
unit=$root/usr/lib/systemd/system/gpu-run-guard.service
[[ -f $unit ]] && it_pass "gpu-run-guard.service installed" || it_fail "$unit missing"
unit_text=$(cat "$unit" 2>/dev/null)
assert_contains "$unit_text" "ExecStart=/usr/bin/gpu-run-ctl guard" "the unit runs the installed gpu-run-ctl guard"
assert_contains "$unit_text" "Type=simple" "the unit is Type=simple"
assert_contains "$unit_text" "Restart=on-failure" "the unit restarts on failure"
enabled=$(find "$root/etc/systemd/system" "$root/usr/lib/systemd/system" -path '*.wants/*' -name 'gpu-run-guard*' \
  2>/dev/null)
assert_eq "" "$enabled" "installing does not enable gpu-run-guard.service (no .wants symlink)"
assert_not_contains "$(dpkg-deb -I "$deb" postinst 2>/dev/null)" "systemctl" "the postinst does not enable the unit"
# /run is emptied at boot: tmpfiles.d makes /run/gpu-run again (root, 0755).
tmpfiles=$root/usr/lib/tmpfiles.d/gpu-run.conf
assert_contains "$(cat "$tmpfiles" 2>/dev/null)" "d /run/gpu-run 0755 root root" "the .deb's tmpfiles.d entry makes /run/gpu-run"
[[ -d $root/etc/gpu-run/profiles.d ]] && it_pass "/etc/gpu-run/profiles.d exists" || it_fail "/etc/gpu-run/profiles.d missing"
assert_contains "$(in_root dpkg-query -W -f '${Conffiles}' gpu-run)" "/etc/gpu-run/config.json" \
  "config.json is a dpkg conffile"
assert_contains "$(in_root dpkg-query -W -f '${Conffiles}' gpu-run)" "/etc/logrotate.d/gpu-run" \
  "the logrotate file is a dpkg conffile"
# logrotate's own parser reads it (debug mode: parses and plans, rotates nothing).
if command -v logrotate >/dev/null; then
  lr_out=$(logrotate -d "$root/etc/logrotate.d/gpu-run" 2>&1)
  assert_contains "$lr_out" "/var/log/gpu-run.log" "logrotate -d reads the package's file for /var/log/gpu-run.log"
  assert_not_contains "$lr_out" "error" "logrotate -d finds no error in the package's file"
else
  it_log "logrotate is not installed here: its own parse of /etc/logrotate.d/gpu-run is not checked"
fi
hooks=$root/usr/share/containers/oci/hooks.d/gpu-run.json
if cmp -s "$root/usr/share/gpu-run/hooks.d/gpu-run.json" "$hooks"; then
  it_pass "postinst put the hooks.d entry in /usr/share/containers/oci/hooks.d"
else
  it_fail "hooks.d entry missing or not the shipped one: $hooks"
fi
assert_eq /usr/bin/gpu-run-hook "$(jq -r .hook.path "$hooks" 2>/dev/null)" "the hooks.d entry names the installed hook"
assert_eq "" "$(ls -A "$root/usr/share/containers/oci/hooks.d" | grep -v '^gpu-run.json$')" "no temporary file left in hooks.d"
for page in gpu-run.1 gpu-run-ctl.1 gpu-run-hook.1 gpu-run-runtime.1; do
  assert_exit 0 env MANWIDTH=80 man -l "$root/usr/share/man/man1/$page.gz"
done
assert_contains "$(MANWIDTH=80 man -l "$root/usr/share/man/man5/gpu-run-profile.5.gz" 2>/dev/null)" \
  "/etc/gpu-run/profiles.d" "gpu-run-profile(5) renders and names the search path"

# The installed binaries find the installed profiles.
assert_exit 0 in_root gpu-run-ctl profiles list --names
assert_contains "$IT_OUT" "imagenet" "installed gpu-run-ctl lists the built-in profiles"

# Bash completion of the installed files, with the installed gpu-run-ctl on PATH.
if [[ -f /usr/share/bash-completion/bash_completion ]]; then
  completed=$(PATH=$root/usr/bin:$PATH bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$1/usr/share/bash-completion/completions/gpu-run"
    source "$1/usr/share/bash-completion/completions/gpu-run-ctl"
    COMP_WORDS=(gpu-run --profile ima); COMP_CWORD=2; COMP_LINE="gpu-run --profile ima"; COMP_POINT=${#COMP_LINE}
    _gpu_run gpu-run ima --profile; echo "${COMPREPLY[*]}"
    COMP_WORDS=(gpu-run-ctl configure ""); COMP_CWORD=2; COMP_LINE="gpu-run-ctl configure "; COMP_POINT=${#COMP_LINE}
    _gpu_run_ctl gpu-run-ctl "" configure; echo "${COMPREPLY[*]}"' _ "$root" 2>&1)
  assert_eq $'imagenet\ndocker podman containerd' "$completed" "bash completion: profile names and subcommands"
else
  it_fail "bash-completion is not installed on this host (scripts/install-deps installs it)"
fi

# A team package, built by one command from a directory of profiles.
mkdir -p "$d/team"
cat >"$d/team/bigimg.json" <<'EOF'
{
  "name": "vision/bigimg",
  "description": "package test: 512x512 RGB crops",
  "extends": "imagenet",
  "fields": [
    {"name": "image", "shape": [3, 512, 512], "dtype": "float32"},
    {"name": "label", "shape": [], "dtype": "int64"}
  ],
  "batch_size": 32
}
EOF
mkdir -p "$d/team-bad" && cp "$d/team/bigimg.json" "$d/team-bad/"
printf '{"name": "vision/typo", "batch_szie": 3}\n' >"$d/team-bad/typo.json"
assert_exit 1 env GPU_RUN_CTL="$root/usr/bin/gpu-run-ctl" "$src/packaging/team-profile-package" -o "$d/out" "$d/team-bad" vision 1.0
assert_contains "$IT_ERR" "$d/team-bad/typo.json: key 'batch_szie'" "team-profile-package refuses an invalid profile, naming the source file"
[[ ! -e $d/out/gpu-run-profiles-vision_1.0_all.deb ]] && it_pass "no package from invalid profiles" || it_fail "a package was built from invalid profiles"
assert_exit 0 env GPU_RUN_CTL="$root/usr/bin/gpu-run-ctl" GPU_RUN_PROFILES_MAINTAINER="Vision team <vision@example.org>" \
  "$src/packaging/team-profile-package" -o "$d/out" "$d/team" vision 1.0
team_deb=$IT_OUT
assert_eq "$d/out/gpu-run-profiles-vision_1.0_all.deb" "$team_deb" "team-profile-package prints the package path"
assert_exit 0 lintian --fail-on error "$team_deb"
cp "$team_deb" "$root/tmp/team.deb"
assert_exit 0 in_root dpkg -i /tmp/team.deb
assert_contains "$(in_root dpkg-query -W -f '${Conffiles}' gpu-run-profiles-vision)" \
  "/etc/gpu-run/profiles.d/vision/bigimg.json" "team profiles are conffiles"
assert_contains "$(in_root gpu-run-ctl profiles list --names)" "vision/bigimg" "the team's profile is on the search path"

# A local change to the config survives reinstalling the package.
jq '.log_level = "debug"' "$root/etc/gpu-run/config.json" >"$d/cfg" && cat "$d/cfg" >"$root/etc/gpu-run/config.json"
local_sum=$(sha256sum <"$root/etc/gpu-run/config.json")
assert_exit 0 in_root dpkg -i --force-confold /tmp/gpu-run.deb
assert_eq "$local_sum" "$(sha256sum <"$root/etc/gpu-run/config.json")" "reinstalling keeps the admin's config.json"

# -------------------------------------------------------------------- register and run
assert_exit 0 in_root gpu-run-ctl configure docker --no-guard
assert_eq /usr/bin/gpu-run-runtime "$(jq -r '.runtimes["gpu-run"].path' "$root/etc/docker/daemon.json")" \
  "configure docker registers /usr/bin/gpu-run-runtime"
assert_eq warn "$(jq -r '."log-level"' "$root/etc/docker/daemon.json")" "configure docker keeps the admin's keys"
configured_sum=$(sha256sum <"$root/etc/docker/daemon.json")

# The isolated dockerd gets the root's entry, with the path seen from the host; the runtime
# reads the root's config with host-side paths for the hook, the log and /etc/gpu-run/profiles.d.
jq --arg p "$root/usr/bin/gpu-run-runtime" 'del(."log-level") | .runtimes["gpu-run"].path = $p' \
  "$root/etc/docker/daemon.json" >"$d/daemon.json"
jq --arg r "$root" --arg log "$d/gpu-run.log" \
  '.hook_path = ($r + .hook_path) | .log_file = $log | .profile_dirs = [$r + "/etc/gpu-run/profiles.d"] | .gpu_request = "none"' \
  "$root/etc/gpu-run/config.json" >"$d/config.json"
export GPU_RUN_CONFIG=$d/config.json
it_dockerd_start "$d/docker" "$d/daemon.json"
it_docker_image gpu-run-pkg-test

shm_kib() { docker run --rm --runtime gpu-run "$@" gpu-run-pkg-test df -k /dev/shm | awk 'NR == 2 { print $2 }'; }
plan_kib() { in_root gpu-run --gpu-request none --json "$@" x | jq '.plan.shm_bytes / 1024 | floor'; }

want=$(plan_kib --profile imagenet --gpus 2 --workers 1)
[[ $want =~ ^[0-9]+$ && $want -gt 65536 ]] || it_fail "installed gpu-run plans imagenet x2 above 64 MiB: got [$want]"
assert_eq "$want" "$(shm_kib -e GPU_RUN_PROFILE=imagenet -e GPU_RUN_GPUS=2 -e GPU_RUN_WORKERS=1)" \
  "docker run --runtime gpu-run: /dev/shm is the installed gpu-run's plan for imagenet x2"
want=$(plan_kib --profile vision/bigimg --gpus 1 --workers 2)
assert_eq "$want" "$(shm_kib -e GPU_RUN_PROFILE=vision/bigimg -e GPU_RUN_GPUS=1 -e GPU_RUN_WORKERS=2)" \
  "the team package's profile sizes a container"
assert_eq 65536 "$(shm_kib)" "a container that asks for nothing keeps Docker's 64 MiB"
assert_contains "$(cat "$d/gpu-run.log" 2>/dev/null)" "profile=imagenet" "the runtime logged its decision"
it_dockerd_stop "$d/docker"
unset GPU_RUN_CONFIG

# ------------------------------------------------------------------------ remove and purge
: >"$root/var/log/gpu-run.log"   # what the hook and the runtime write by default
assert_exit 0 in_root dpkg -r gpu-run-profiles-vision gpu-run
assert_contains "$IT_ERR" "/etc/docker/daemon.json still runs gpu-run-runtime" \
  "removing warns that daemon.json still names the runtime"
assert_eq "$configured_sum" "$(sha256sum <"$root/etc/docker/daemon.json")" "removing leaves daemon.json as it was"
assert_eq "$local_sum" "$(sha256sum <"$root/etc/gpu-run/config.json" 2>/dev/null)" "removing keeps the admin's config.json"
assert_eq "deinstall ok config-files" "$(in_root dpkg-query -W -f '${Status}' gpu-run)" "gpu-run is removed, its config kept"
[[ ! -e $root/usr/bin/gpu-run-hook ]] && it_pass "the binaries are gone" || it_fail "/usr/bin/gpu-run-hook still there"
[[ ! -e $hooks ]] && it_pass "the hooks.d entry is gone" || it_fail "$hooks still there after removal"
[[ ! -e $root/usr/share/gpu-run ]] && it_pass "/usr/share/gpu-run is gone" || it_fail "/usr/share/gpu-run still there"

assert_exit 0 in_root dpkg -P gpu-run-profiles-vision gpu-run
assert_eq "" "$(in_root dpkg-query -W -f '${Status}' gpu-run 2>/dev/null)" "gpu-run is purged"
[[ ! -e $root/etc/gpu-run ]] && it_pass "purging removes /etc/gpu-run" || it_fail "left after purge: $(find "$root/etc/gpu-run")"
[[ ! -e $root/var/log/gpu-run.log ]] && it_pass "purging removes /var/log/gpu-run.log" || it_fail "/var/log/gpu-run.log left after purge"
assert_eq "$configured_sum" "$(sha256sum <"$root/etc/docker/daemon.json")" "purging leaves daemon.json as it was"
assert_eq "" "$(find "$root/usr" -name '*gpu-run*' 2>/dev/null)" "nothing named gpu-run is left under /usr"

umount "$root/proc" 2>/dev/null || true
it_done
