#!/usr/bin/env bash
# Packaging checks, run by ctest: the three Debian packages build with the files, units,
# dependencies and maintainer scripts they should have; bash completion completes; every
# hetpoolctl command answers --help with an example.
#   tests/packaging/check_packages.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build" && cpack -B "$out" >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; fail "cpack"; }
for pkg in hetpool-daemon hetpool-agent hetpoolctl; do
  deb=$(ls "$out"/${pkg}_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || fail "no $pkg package in $(ls "$out")"
  dpkg-deb -c "$deb" >"$out/$pkg.files"
  dpkg-deb -f "$deb" Depends >"$out/$pkg.depends"
done
expect_file() { grep -q " \./$2\$" "$out/$1.files" || fail "$1 lacks /$2"; }
expect_file hetpool-daemon usr/bin/hetpoold
expect_file hetpool-daemon usr/lib/systemd/system/hetpoold.service
expect_file hetpool-daemon usr/share/hetpool/examples/hetpoold.json
expect_file hetpool-daemon usr/share/hetpool/monitoring/grafana-dashboard.json
expect_file hetpool-agent usr/bin/hetpool-agent
expect_file hetpool-agent usr/bin/hetpool-inventory
expect_file hetpool-agent usr/lib/systemd/system/hetpool-agent.service
expect_file hetpool-agent usr/share/hetpool/examples/agent.json
expect_file hetpoolctl usr/bin/hetpoolctl
expect_file hetpoolctl usr/share/bash-completion/completions/hetpoolctl
expect_file hetpoolctl usr/share/hetpool/pki.sh
grep -q "usr/bin/hetpoold" "$out/hetpool-agent.files" && fail "hetpoold packaged with the agent"
# Depends comes from the binaries' shared libraries (dpkg-shlibdeps); gRPC, Protobuf and Abseil
# are linked from their archives where installed (cmake/StaticDeps.cmake), so SQLite stands for it.
grep -q "libsqlite3" "$out/hetpool-daemon.depends" ||
  fail "hetpool-daemon Depends lacks SQLite (shlibdeps did not run?): $(cat "$out/hetpool-daemon.depends")"
grep -q "prometheus" "$out/hetpoolctl.depends" &&
  fail "hetpoolctl depends on the metrics library: $(cat "$out/hetpoolctl.depends")"
# With gRPC from its archive, hetpoolctl carries its C++ runtime too (src/CMakeLists.txt): a
# shared C++ library beside it would put two runtimes in one process.
needed=$(readelf -d "$build/src/hetpoolctl" | grep NEEDED || true)
if ! echo "$needed" | grep -q "libgrpc"; then
  echo "$needed" | grep -qE "libstdc\+\+|libre2|libspdlog|libfmt|libprotobuf" &&
    fail "hetpoolctl needs a shared C++ library beside its static C++ runtime: $needed"
fi
grep -q "adduser" "$out/hetpool-daemon.depends" || fail "hetpool-daemon Depends lacks adduser"
dpkg-deb -e "$(ls "$out"/hetpool-daemon_*.deb)" "$out/daemon-control"
grep -q "adduser --system" "$out/daemon-control/postinst" || fail "daemon postinst does not create its account"
# The shipped configs are ones the programs accept (their keys are the programs' flags).
for cfg in hetpoold agent; do
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$src/deploy/etc/$cfg.json" || fail "$cfg.json is not JSON"
done
# Every key is accepted: each program gets as far as reading the TLS files the config names.
msg=$("$build/src/hetpoold" --config "$src/deploy/etc/hetpoold.json" --data-dir "$out/d" --listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 2>&1) && fail "hetpoold started without its certificates"
grep -q "/etc/hetpool/pki/ca.pem" <<<"$msg" || fail "hetpoold and its example config: $msg"
msg=$("$build/src/hetpool-agent" --config "$src/deploy/etc/agent.json" --work-dir "$out/w" --backend sim \
  --inventory "$src/deploy/examples/node-a.json" 2>&1) && fail "hetpool-agent started without its certificates"
grep -q "/etc/hetpool/pki/ca.pem" <<<"$msg" || fail "hetpool-agent and its example config: $msg"

# Completion: commands, flag values, per-command flags.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _hetpoolctl; echo "${COMPREPLY[*]}"' _ \
    "$src/deploy/completion/hetpoolctl.bash" "$@"
}
[ "$(complete_words hetpoolctl su)" = "submit" ] || fail "completion of 'su': $(complete_words hetpoolctl su)"
[ "$(complete_words hetpoolctl -o j)" = "json" ] || fail "completion of '-o j'"
[ "$(complete_words hetpoolctl --insecure usage --by gr)" = "group" ] || fail "completion of 'usage --by gr'"
[[ " $(complete_words hetpoolctl logs --r) " == *" --rank "* ]] || fail "completion of 'logs --r'"

# --help with an example for every command the registry has (its names, from the completion it makes).
commands=$("$build/src/hetpoolctl" completion bash | sed -n 's/^    "\([a-z][a-z ]*\)")$/\1/p')
[ "$(wc -l <<<"$commands")" -ge 15 ] || fail "hetpoolctl completion bash names too few commands: $commands"
while read -r cmd; do
  # shellcheck disable=SC2086 # "admin token" is two words
  help=$("$build/src/hetpoolctl" $cmd --help 2>&1) || fail "hetpoolctl $cmd --help failed"
  grep -q "Example" <<<"$help" || fail "hetpoolctl $cmd --help has no example"
done <<<"$commands"
echo "packaging: OK"
