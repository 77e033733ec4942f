#!/usr/bin/env bash
# Takes the local Kubernetes fixture down and leaves nothing of it behind: no process, mount,
# network namespace, interface, iptables or ip6tables chain, ipset or cgroup, and no state but
# the binary cache. Docker's own rules and composebox's nftables table are never touched. A
# no-op when nothing is up; safe to run after a crash or a half-finished start.
#
# Exits non-zero, naming it, if something is still there at the end.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/common.sh"
LOG_PREFIX=k8s-down
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
t_start=$SECONDS

[ "$(id -u)" = 0 ] || die "taking the local cluster down needs root"
if [ -z "${K8S_LOCKED:-}" ]; then
  mkdir -p "$(dirname "$K8S_LOCK")"
  exec 8>"$K8S_LOCK"
  flock 8
fi

# stop NAME: SIGTERM to the recorded process, SIGKILL after 10 s.
stop() {
  local name=$1 pid
  running "$name" || return 0
  pid=$(cat "$(pidfile "$name")")
  kill -TERM "$pid" 2>/dev/null
  local deadline=$((SECONDS + 10))
  while alive "$pid"; do
    if [ $SECONDS -ge $deadline ]; then
      log "$name (pid $pid) ignored SIGTERM for 10 s; killing it"
      kill -KILL "$pid" 2>/dev/null
      deadline=$((SECONDS + 5))
    fi
    sleep 0.1
  done
}
# alive PID: the process exists and is not a zombie.
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# Pods first, while the API server and the kubelet still run: deleting them has the kubelet
# stop each sandbox and so run the CNI plugins' DEL. What is left after that is cleaned below
# by hand.
pods_gone() { api '/api/v1/pods?limit=1' 2>/dev/null | grep -q '"items":\[\]'; }
if running kube-apiserver && running kubelet; then
  for ns in $(api /api/v1/namespaces 2>/dev/null | names); do
    api "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=1" -X DELETE >/dev/null 2>&1 || true
  done
  deadline=$((SECONDS + 30))
  until pods_gone; do
    if [ $SECONDS -ge $deadline ]; then
      log "not every pod was deleted through the API; removing the rest directly"
      break
    fi
    sleep 0.2
  done
fi

for c in kube-router coredns kubelet kube-scheduler kube-controller-manager; do stop "$c"; done

# Containers the kubelet did not remove go through containerd while it still runs.
if running containerd; then
  for id in $(ctr --address "$CTR_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$CTR_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1
  done
fi
stop containerd

# Shims outlive containerd by design; find those bound to this cluster's socket (and only
# those) by their command line.
# with_arg STRING: the PIDs of processes with STRING in their command line. The pattern's
# first character in brackets keeps grep from finding its own command line.
with_arg() {
  grep -l -a -E -- "[${1:0:1}]${1:1}" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3
}
for pid in $(with_arg "$CTR_SOCK"); do
  case " $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) " in
    *" -address $CTR_SOCK "*) log "killing leftover shim $pid"; kill -KILL "$pid" 2>/dev/null ;;
  esac
done
# Anything still in the kubelet's cgroups is a container process of this cluster.
for procs in $(find /sys/fs/cgroup/*/kubepods -name cgroup.procs 2>/dev/null); do
  while read -r pid; do
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && log "killed leftover pod process $pid"
  done <"$procs"
done

for c in kube-apiserver etcd registry; do stop "$c"; done

# Mounts: the kubelet bind-mounts its root onto itself and mounts volumes under it;
# containerd mounts rootfs and shm under its state; each sandbox's network namespace is a
# mount under /run/netns. Deepest first.
mounts() {
  findmnt -rn -o TARGET | sed 's/\\x20/ /g' |
    grep -E "^($K8S_STATE|$K8S_RUN)(/|$)|^/run/netns/cni-|^/var/run/netns/cni-" | sort -r
}
for _ in 1 2 3; do
  m=$(mounts)
  [ -n "$m" ] || break
  while IFS= read -r target; do
    umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null
  done <<<"$m"
done
rm -f /run/netns/cni-* 2>/dev/null

# The bridge, and any veth still attached to it.
if ip link show "$K8S_BRIDGE" >/dev/null 2>&1; then
  for v in $(ip -o link show master "$K8S_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$v" 2>/dev/null
  done
  ip link del "$K8S_BRIDGE"
fi

# iptables and ip6tables: the CNI plugins' chains (CNI-*) and the kubelet's and kube-router's
# (KUBE-*). Every rule elsewhere that jumps into one is deleted as iptables-save wrote it,
# which keeps its quoting intact, then the chains are flushed and removed. Nothing else, so
# Docker's chains stay as they are.
ours='(CNI-|KUBE-)'
clean_tables() {
  local save=$1 restore=$2 t dump chains
  for t in filter nat mangle raw; do
    dump=$("$save" -t "$t" 2>/dev/null) || continue
    chains=$(sed -n -E "s/^:($ours[^ ]*) .*/\1/p" <<<"$dump")
    [ -n "$chains" ] || continue
    {
      echo "*$t"
      grep -E -- "^-A .* -[jg] $ours[^ ]*( |$)" <<<"$dump" | grep -v -E "^-A $ours" | sed 's/^-A /-D /'
      sed 's/^/-F /' <<<"$chains"
      sed 's/^/-X /' <<<"$chains"
      echo COMMIT
    } | "$restore" -n || log "$restore could not remove every chain in table $t"
  done
}
clean_tables iptables-save iptables-restore
clean_tables ip6tables-save ip6tables-restore
# Where the legacy backend is in use too (its tables exist beside nftables' here), the same.
if command -v iptables-legacy-save >/dev/null; then
  clean_tables iptables-legacy-save iptables-legacy-restore
  clean_tables ip6tables-legacy-save ip6tables-legacy-restore
fi

# Tables iptables-nft created for the kubelet, now empty: those that were not there before.
if command -v nft >/dev/null && [ -f "$K8S_RUN/nft-tables.before" ]; then
  nft list tables 2>/dev/null | while read -r _ fam name; do
    case "$fam $name" in ip\ filter|ip\ nat|ip\ mangle|ip\ raw|ip6\ filter|ip6\ nat|ip6\ mangle|ip6\ raw) ;; *) continue ;; esac
    grep -qxF "table $fam $name" "$K8S_RUN/nft-tables.before" && continue
    rules=$(nft -a list table "$fam" "$name" 2>/dev/null | grep '# handle' | grep -v -E '^[[:space:]]*(table|chain) ')
    [ -n "$rules" ] || nft delete table "$fam" "$name"
  done
fi

# kube-router's ipsets, now that no rule refers to them.
if command -v ipset >/dev/null; then
  for s in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-|kube-router)'); do
    ipset destroy "$s" 2>/dev/null || log "could not destroy ipset $s"
  done
fi

# Connection tracking entries of the pods' range, so a next cluster starts clean.
if command -v conntrack >/dev/null; then
  conntrack -D -s "$K8S_POD_CIDR" >/dev/null 2>&1
  conntrack -D -d "$K8S_POD_CIDR" >/dev/null 2>&1
fi

# The kubelet's cgroups (cgroupfs driver: kubepods in every hierarchy), deepest first.
for h in /sys/fs/cgroup/*/; do
  [ -d "$h/kubepods" ] && find "$h/kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
done

# The kubelet always links container logs from /var/log/containers.
if [ -d /var/log/containers ]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$K8S_STATE/*" -delete
  rmdir /var/log/containers 2>/dev/null
fi

# What the kubelet and containerd's CNI library keep at fixed paths: the device plugins'
# socket and the plugins' cached results for this cluster's sandboxes. Each directory goes only
# if that leaves it empty.
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null
rm -f /var/lib/cni/results/composebox-k8s-* /var/lib/cni/results/cni-loopback-*
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null

# Env files written by up.sh, in whichever checkout; only files that up.sh wrote.
for f in $(cat "$K8S_RUN/envfiles" 2>/dev/null) "$root/bin/k8s/env"; do
  if [ -f "$f" ] && head -1 "$f" | grep -q '^# Written by `make k8s`'; then
    rm -f "$f"
    rmdir "$(dirname "$f")" 2>/dev/null
  fi
done

# State, only once nothing is mounted under it, and never across a mount.
if [ -z "$(mounts)" ]; then
  rm -rf --one-file-system "$K8S_STATE" "$K8S_RUN"
fi

# --- what is left ------------------------------------------------------------------------
left=()
for c in "${COMPONENTS[@]}"; do running "$c" && left+=("process $c"); done
[ -z "$(mounts)" ] || left+=("mounts: $(mounts | tr '\n' ' ')")
ip link show "$K8S_BRIDGE" >/dev/null 2>&1 && left+=("interface $K8S_BRIDGE")
for save in iptables-save ip6tables-save; do
  ch=$("$save" 2>/dev/null | sed -n -E "s/^:($ours[^ ]*) .*/\1/p" | tr '\n' ' ')
  [ -z "$ch" ] || left+=("$save chains: $ch")
done
ls /sys/fs/cgroup/*/kubepods >/dev/null 2>&1 && left+=("cgroups kubepods")
ls /run/netns/cni-* >/dev/null 2>&1 && left+=("network namespaces /run/netns/cni-*")
sets=$(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-|kube-router)' | tr '\n' ' ')
[ -z "$sets" ] || left+=("ipsets: $sets")
for pid in $(with_arg "$K8S_STATE/") $(with_arg "$CTR_SOCK"); do
  left+=("process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-100)")
done
[ -e "$K8S_STATE" ] && left+=("$K8S_STATE")
if [ ${#left[@]} -gt 0 ]; then
  log "left behind: ${left[*]}"
  exit 1
fi
log "down in $((SECONDS - t_start)) s; nothing left behind"
