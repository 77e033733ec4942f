#!/usr/bin/env bash
# Makes this machine ready for composebox: a Docker Engine that answers and a static busybox
# (the rootfs of every image composebox builds, since no registry is reachable).
# Idempotent: what already works is left alone.
set -euo pipefail
# apt-get that waits for the other tracks' apt-get (scripts/apt-get.sh).
apt_get=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/apt-get.sh

log() { printf 'setup-engine: %s\n' "$*" >&2; }

engine_ok() { timeout 10 docker info >/dev/null 2>&1; }
busybox_ok() { [ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1; }

if engine_ok && busybox_ok; then
  log "docker engine answers and /bin/busybox is present; nothing to do"
  exit 0
fi

is_debian_root() { [ -f /etc/debian_version ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

if ! is_debian_root; then
  log "this script installs only on Debian as root. Install by hand:"
  engine_ok || log "  - Docker Engine >= 20.10 (API 1.41), running, with your user allowed on its socket"
  busybox_ok || log "  - a static busybox at /bin/busybox (Debian/Ubuntu: busybox-static)"
  exit 1
fi

pkgs=()
command -v dockerd >/dev/null || pkgs+=(docker.io)
busybox_ok || pkgs+=(busybox-static)
if [ ${#pkgs[@]} -gt 0 ]; then
  log "installing ${pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "$apt_get" update -qq
  "$apt_get" install -y -qq "${pkgs[@]}" >/dev/null
fi

if ! engine_ok; then
  logfile=${DOCKERD_LOG:-/var/log/dockerd.log}
  # The host's own daemon keeps its pid in /var/run/docker.pid; a test's private dockerd (its
  # own --pidfile) does not count, or its presence would keep the host's from starting.
  if ! { [ -s /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; }; then
    log "starting dockerd in the background (log: $logfile)"
    # Its own session, so that it outlives the shell (or CI step) that started it.
    setsid nohup dockerd >"$logfile" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 60); do
    engine_ok && break
    sleep 1
  done
  if ! engine_ok; then
    log "dockerd did not answer within 60 s; last lines of $logfile:"
    tail -n 20 "$logfile" >&2 || true
    exit 1
  fi
fi
log "ready: $(docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}'), busybox $(/bin/busybox | head -1 | cut -d' ' -f2)"
