# Shared by deploy/quickstart.sh and tests/run.sh: install what the build needs on Debian 12, and
# build. Source it; it defines functions only.

# Debian packages hetpool builds and runs its tests with.
HETPOOL_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev nlohmann-json3-dev libgtest-dev libsqlite3-dev libze-dev libssl-dev openssl prometheus-cpp-dev libcpp-httplib-dev pciutils
  python3-torch etcd-server golang-etcd-server-dev chromium
  python3-grpcio python3-protobuf python3-pip python3-setuptools python3-wheel
  podman runc
  libfaketime  # tests step the wall clock of hetpoold and its agents (issue 60, item 2)
  clang-format  # the tree follows .clang-format (tests/check_format.sh)
)

# Installs the packages that are missing (apt-get update only when something is).
hetpool_install_deps() {
  local missing=()
  for pkg in "${HETPOOL_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# hetpool_build BUILD_DIR [extra cmake args...]: configures and builds with two jobs (CI has 2
# cores), or HETPOOL_BUILD_JOBS.
# Line tables only (-g1): backtraces keep file and line, and CI's 90 minutes hold two builds
# (CMakeLists.txt, HETPOOL_DEBUG_INFO); configure by hand for full debug information. A unity
# build (HETPOOL_UNITY_BUILD: sources eight to a translation unit) halves a build from scratch.
hetpool_build() {
  local build_dir=$1
  shift
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHETPOOL_DEBUG_INFO=lines \
    -DHETPOOL_UNITY_BUILD=ON "$@"
  cmake --build "$build_dir" -j"${HETPOOL_BUILD_JOBS:-2}"
}
