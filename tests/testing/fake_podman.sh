#!/bin/sh
# A stand-in for podman that only answers what the agent asks for its inventory: `version` and
# `images`. The images it "holds" are the lines of "$CONTAINERS_CONF.images" (the agent passes
# the runtime nothing of its own environment but CONTAINERS_CONF). Anything else fails as podman
# fails itself (exit 125).
for arg in "$@"; do
  case "$arg" in
    version) echo "4.3.1-fake"; exit 0 ;;
    images) [ -n "${CONTAINERS_CONF:-}" ] && [ -f "$CONTAINERS_CONF.images" ] && cat "$CONTAINERS_CONF.images"; exit 0 ;;
    run) echo "Error: fake_podman.sh runs nothing" >&2; exit 125 ;;
    rm) exit 0 ;;
  esac
done
echo "Error: fake_podman.sh: unexpected $*" >&2
exit 125
