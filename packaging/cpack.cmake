# CPack settings for the gpu-run .deb and .rpm. One command builds both: scripts/package
# (cmake with -DCMAKE_INSTALL_PREFIX=/usr, then `cpack -G "DEB;RPM"` in the build tree).
# Both packages hold the same files; what differs is how each package manager treats
# /etc/gpu-run/config.json (a conffile / %config(noreplace)) and the maintainer scripts.

set(CPACK_PACKAGE_NAME gpu-run)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "gpu-run")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/gpu-run/gpu-run")
set(CPACK_PACKAGE_CONTACT "gpu-run maintainers <maintainers@users.noreply.a-seed-1f58e9f9.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "right-sized /dev/shm for PyTorch training in containers")
set(CPACK_PACKAGE_DESCRIPTION
"gpu-run sizes a container's /dev/shm from what its PyTorch DataLoader does
(sample shape, batch size, workers, prefetch, GPU ranks) and applies the size
however the container is started: a docker/podman run wrapper (gpu-run), a
runc wrapper registered with dockerd (gpu-run-runtime), an OCI hook for podman
and CRI-O (gpu-run-hook), and an admin tool (gpu-run-ctl) that plans sizes,
manages profiles and registers gpu-run with docker and podman.
.
Installing the package changes no engine configuration: run
`gpu-run-ctl configure docker` to register the runtime in daemon.json.")
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR "DEB;RPM")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
# Source packages are not made by CPack: the repository is the source.
set(CPACK_SOURCE_GENERATOR "")

# The default install component only: gpu-run-webhook (component "webhook") links cpp-httplib
# and OpenSSL, which the package would otherwise depend on; it is installed by cmake --install.
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};${PROJECT_NAME};Unspecified;/")

set(pkg_scripts ${CMAKE_CURRENT_LIST_DIR})

# --- .deb
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# gpu-run-runtime and gpu-run-hook run under an OCI runtime; which engine is the host's choice.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "runc | crun")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "docker.io | podman")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${pkg_scripts}/debian/conffiles
  ${pkg_scripts}/debian/postinst
  ${pkg_scripts}/debian/prerm
  ${pkg_scripts}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# --- .rpm
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
set(CPACK_PACKAGE_RELOCATABLE OFF)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_REQUIRES_PRE "")
set(CPACK_RPM_PACKAGE_SUGGESTS "runc")
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/gpu-run/config.json" "%config(noreplace) /etc/logrotate.d/gpu-run")
# Directories other packages own (the filesystem, man, bash-completion, containers-common, systemd).
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
  /usr/lib/systemd /usr/lib/systemd/system /usr/lib/tmpfiles.d
  /usr/share/man /usr/share/man/man1 /usr/share/man/man5
  /usr/share/bash-completion /usr/share/bash-completion/completions
  /usr/share/containers /usr/share/containers/oci)
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${pkg_scripts}/rpm/post.sh)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${pkg_scripts}/rpm/preun.sh)
# The binaries are stripped; an empty debuginfo package would only confuse.
set(CPACK_RPM_DEBUGINFO_PACKAGE OFF)
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")

include(CPack)
