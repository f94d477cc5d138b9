# shellcheck shell=bash
# What packaging/*/build-image share: their flags, the project's .debs (made by cpack from a
# Release build for /usr, or taken from a directory), staging files out of them, the shared
# libraries a binary needs, and the offline docker build of a FROM scratch context.
# A build-image sets IMAGE_NAME (its default tag's name), sources this file and calls
# image_args "$@", then image_debs, image_stage_libs and image_build.

IMAGE_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE_BUILD=$IMAGE_SRC/build/release
IMAGE_DEBS=
IMAGE_TAG=

image_die() {
  printf 'build-image: %s\n' "$*" >&2
  exit 1
}

# image_args "$@": --tag TAG, --build-dir BUILD, --debs DIR; makes IMAGE_WORK, removed at exit.
image_args() {
  while (($#)); do
    case $1 in
      --tag) IMAGE_TAG=${2:?--tag needs a value}; shift 2 ;;
      --build-dir) IMAGE_BUILD=${2:?--build-dir needs a value}; shift 2 ;;
      --debs) IMAGE_DEBS=${2:?--debs needs a value}; shift 2 ;;
      *) image_die "unknown argument '$1' (usage: build-image [--tag TAG] [--build-dir BUILD] [--debs DIR])" ;;
    esac
  done
  local c
  for c in docker dpkg-deb ldd readelf; do command -v "$c" >/dev/null || image_die "$c not found"; done
  IMAGE_WORK=$(mktemp -d /tmp/gpu-run-image.XXXXXX)
  trap 'rm -rf "$IMAGE_WORK"' EXIT
  IMAGE_ROOT=$IMAGE_WORK/context/rootfs
  mkdir -p "$IMAGE_ROOT"
}

# image_debs CONFIG...: unless --debs named a directory, the .debs of each CPack config of the build
# (CPackWebhookConfig.cmake, ...) and the gpu-run one, made into IMAGE_DEBS.
image_debs() {
  [[ -n $IMAGE_DEBS ]] && return 0
  local config args=()
  for config in "$@"; do
    [[ -f $IMAGE_BUILD/$config ]] || image_die "$IMAGE_BUILD has no $config (configure and build it first)"
  done
  grep -qx 'CMAKE_INSTALL_PREFIX:PATH=/usr' "$IMAGE_BUILD/CMakeCache.txt" || image_die "$IMAGE_BUILD is not a build for /usr"
  IMAGE_DEBS=$IMAGE_WORK/debs
  (
    cd "$IMAGE_BUILD" || exit 1
    for config in "$@"; do cpack --config "$config" -B "$IMAGE_DEBS" || exit 1; done
    cpack -G DEB -B "$IMAGE_DEBS"
  ) >"$IMAGE_WORK/cpack.log" 2>&1 || {
    tail -n 30 "$IMAGE_WORK/cpack.log" >&2
    image_die "cpack failed in $IMAGE_BUILD"
  }
}

# image_deb PACKAGE: the path of PACKAGE's .deb in IMAGE_DEBS.
image_deb() {
  local deb
  deb=$(ls "$IMAGE_DEBS/$1"_*.deb 2>/dev/null | head -n1)
  [[ -f $deb ]] || image_die "no $1_*.deb in $IMAGE_DEBS"
  printf '%s\n' "$deb"
}

# image_default_tag DEB: IMAGE_TAG, or IMAGE_NAME:VERSION of DEB.
image_default_tag() {
  local version
  version=$(dpkg-deb -f "$1" Version)
  IMAGE_TAG=${IMAGE_TAG:-$IMAGE_NAME:${version%-*}}
}

# image_stage DEB PATH...: the files or directories PATH (./usr/...) of DEB into IMAGE_ROOT, and the
# package's copyright.
image_stage() {
  local deb=$1 name path
  shift
  name=$(dpkg-deb -f "$deb" Package)
  mkdir -p "$IMAGE_WORK/x/$name"
  dpkg-deb -x "$deb" "$IMAGE_WORK/x/$name"
  for path in "$@" "usr/share/doc/$name/copyright"; do
    [[ -e $IMAGE_WORK/x/$name/$path ]] || image_die "$deb has no $path"
    mkdir -p "$IMAGE_ROOT/$(dirname "$path")"
    cp -a "$IMAGE_WORK/x/$name/$path" "$IMAGE_ROOT/$path"
  done
}

# image_stage_libs FILE...: the shared libraries each FILE (in IMAGE_ROOT) needs and the dynamic
# loader, at the paths ldd resolves them to on this machine (Debian's, as the .debs' Depends
# name them).
image_stage_libs() {
  local file libs lib interp
  for file in "$@"; do
    libs=$(ldd "$IMAGE_ROOT/$file" | awk '/=> \//{print $3} /^\s*\/[^ ]*ld-linux/{print $1}')
    [[ -n $libs ]] || image_die "ldd found no libraries for $file"
    for lib in $libs; do
      [[ $lib == /* ]] || image_die "unexpected ldd line for $lib"
      mkdir -p "$IMAGE_ROOT$(dirname "$lib")"
      cp -L "$lib" "$IMAGE_ROOT$lib"
    done
    # Debian's loader path is /lib64/ld-linux-x86-64.so.2 through the /lib64 link (usrmerge):
    # keep whatever path the binary's PT_INTERP names.
    interp=$(readelf -l "$IMAGE_ROOT/$file" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
    if [[ -n $interp && ! -e $IMAGE_ROOT$interp ]]; then
      mkdir -p "$IMAGE_ROOT$(dirname "$interp")"
      cp -L "$interp" "$IMAGE_ROOT$interp"
    fi
  done
}

# image_build DOCKERFILE: builds IMAGE_WORK/context with DOCKERFILE as IMAGE_TAG, offline, and
# prints the tag.
image_build() {
  cp "$1" "$IMAGE_WORK/context/Dockerfile"
  docker build -q -t "$IMAGE_TAG" "$IMAGE_WORK/context" >"$IMAGE_WORK/build.log" 2>&1 ||
    { cat "$IMAGE_WORK/build.log" >&2; image_die "docker build failed"; }
  printf '%s\n' "$IMAGE_TAG"
}
