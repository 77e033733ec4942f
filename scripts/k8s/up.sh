#!/usr/bin/env bash
# Brings up the local Kubernetes fixture: a real single-node cluster on this machine, for
# composebox's tests and for trying its Kubernetes backend. It installs what it needs with apt
# (on Debian, as root), builds the binaries once into K8S_CACHE (build.sh), then starts a local
# OCI registry, etcd, the control plane, its own containerd (Docker's is never touched), the
# kubelet, CoreDNS and kube-router (NetworkPolicy), and waits until the node is Ready and the
# default ServiceAccount exists. It writes bin/k8s/env in the checkout it runs from.
#
# Idempotent: while the cluster runs, a second run only rewrites bin/k8s/env. A cluster found
# half up (a crash, a reboot) is taken down first. A failed start is taken down too, after the
# failing component's log is shown; K8S_KEEP_ON_FAILURE=1 keeps it for a look.
set -euo pipefail
# apt-get that waits for the other tracks' apt-get (scripts/apt-get.sh).
apt_get=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../apt-get.sh
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/common.sh"
LOG_PREFIX=k8s-up
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin
t_start=$SECONDS

[ "$(id -u)" = 0 ] || die "the local cluster needs root (network, mounts, cgroups)"

mkdir -p "$(dirname "$K8S_LOCK")"
exec 8>"$K8S_LOCK"
flock 8
export K8S_LOCKED=1

ENV_FILE=$root/bin/k8s/env

write_env() {
  mkdir -p "$(dirname "$ENV_FILE")"
  cat >"$ENV_FILE.tmp" <<ENV
# Written by \`make k8s\`; removed by \`make k8s-down\`. Shell syntax, one KEY=value a line.
KUBECONFIG=$ADMIN_KUBECONFIG
COMPOSEBOX_REGISTRY=$K8S_REGISTRY
COMPOSEBOX_K8S_NODE=$K8S_NODE
COMPOSEBOX_K8S_DNS=$K8S_GATEWAY
COMPOSEBOX_K8S_CONTAINERD=$CTR_SOCK
COMPOSEBOX_K8S_VOLUMES=$K8S_VOLUMES
ENV
  mv "$ENV_FILE.tmp" "$ENV_FILE"
  # down.sh removes every env file it finds here, whichever checkout wrote it.
  mkdir -p "$K8S_RUN"
  grep -qxF "$ENV_FILE" "$K8S_RUN/envfiles" 2>/dev/null || echo "$ENV_FILE" >>"$K8S_RUN/envfiles"
}

# The volume root: a directory only root can traverse, bind-mounted onto itself with nosuid
# and nodev, so that a setuid binary or a device node an agent leaves in a shared volume gives
# nobody on the host anything. Idempotent.
volume_root() {
  mkdir -p "$K8S_VOLUMES"
  chown 0:0 "$K8S_VOLUMES"
  chmod 0700 "$K8S_VOLUMES"
  if ! mountpoint -q "$K8S_VOLUMES"; then
    mount --bind "$K8S_VOLUMES" "$K8S_VOLUMES"
  fi
  mount -o remount,bind,nosuid,nodev "$K8S_VOLUMES"
}

# The pods' traffic to the host and to Docker, whatever the NetworkPolicies say (composebox's
# own deny the same, and kube-router enforces them; this holds for any pod, and in the moments
# before a policy applies). The CNI firewall plugin accepts everything a pod sends
# (CNI-FORWARD -s <pod> -j ACCEPT) in the filter table Docker's rules are in, ahead of Docker's
# isolation, so, in chains jumped to first:
# - FORWARD: nothing between the pods' bridge and Docker's bridges (docker0, br-*) or
#   composebox's subnet pool (10.213.0.0/16), either way;
# - INPUT: from the pods' bridge, only DNS to CoreDNS on the gateway (IPv6: neighbour
#   discovery), and replies to what the host opened: no pod reaches a service of the host on
#   any of its addresses.
# The chains are named CNI-* so that down.sh removes them with the plugin's. Idempotent: they
# are flushed and filled again.
guard_pods() {
  local ipt="$1 -w" chain rule
  for chain in CNI-COMPOSEBOX-FORWARD CNI-COMPOSEBOX-INPUT; do
    $ipt -N "$chain" 2>/dev/null || $ipt -F "$chain"
  done
  for rule in "-i $K8S_BRIDGE -o docker0" "-i $K8S_BRIDGE -o br-+" "-i docker0 -o $K8S_BRIDGE" "-i br-+ -o $K8S_BRIDGE" "${@:2}"; do
    $ipt -A CNI-COMPOSEBOX-FORWARD $rule -j DROP
  done
  $ipt -A CNI-COMPOSEBOX-INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  while read -r rule; do
    [ -z "$rule" ] || $ipt -A CNI-COMPOSEBOX-INPUT $rule -j RETURN
  done <<<"$INPUT_ALLOWED"
  $ipt -A CNI-COMPOSEBOX-INPUT -j DROP
  $ipt -C FORWARD -j CNI-COMPOSEBOX-FORWARD 2>/dev/null || $ipt -I FORWARD 1 -j CNI-COMPOSEBOX-FORWARD
  $ipt -C INPUT -i "$K8S_BRIDGE" -j CNI-COMPOSEBOX-INPUT 2>/dev/null || $ipt -I INPUT 1 -i "$K8S_BRIDGE" -j CNI-COMPOSEBOX-INPUT
}
guard_pod_traffic() {
  INPUT_ALLOWED="-d $K8S_GATEWAY -p udp --dport 53
-d $K8S_GATEWAY -p tcp --dport 53" \
    guard_pods iptables "-i $K8S_BRIDGE -d 10.213.0.0/16" "-s 10.213.0.0/16 -o $K8S_BRIDGE"
  INPUT_ALLOWED="-p ipv6-icmp --icmpv6-type neighbour-solicitation
-p ipv6-icmp --icmpv6-type neighbour-advertisement" \
    guard_pods ip6tables
}

# CoreDNS's configuration: names of the cluster domain only. No reverse zone: a PTR query for
# a pod's address would name its namespace (a sample's project) and its Services, so another
# sample could list them; with no server for in-addr.arpa and ip6.arpa, CoreDNS refuses it.
corefile() {
  cat <<COREFILE
$K8S_DOMAIN:53 {
    bind $K8S_GATEWAY
    errors
    ready 127.0.0.1:$K8S_COREDNS_READY_PORT
    kubernetes $K8S_DOMAIN {
        kubeconfig $ADMIN_KUBECONFIG composebox
        pods insecure
    }
}
COREFILE
}

all_running() {
  local c
  for c in "${COMPONENTS[@]}"; do running "$c" || return 1; done
  api /readyz >/dev/null 2>&1
}

if all_running; then
  # What a newer checkout of these scripts sets up and a running cluster can take without a
  # restart: the volume root, the pods' traffic guard, CoreDNS's configuration (reloaded on
  # SIGUSR1, without dropping a query).
  volume_root
  guard_pod_traffic
  if ! corefile | cmp -s - "$K8S_STATE/Corefile"; then
    corefile >"$K8S_STATE/Corefile"
    kill -USR1 "$(cat "$(pidfile coredns)")"
    log "reloaded CoreDNS's configuration"
  fi
  if ! grep -q "^podPidsLimit: $K8S_POD_PIDS\$" "$K8S_STATE/kubelet-config.yaml"; then
    log "NOTICE: the running kubelet has no pids limit of $K8S_POD_PIDS per pod (an older make k8s started it); make k8s-down, then make k8s, to apply it"
  fi
  write_env
  log "already running; wrote $ENV_FILE"
  exit 0
fi
if [ -d "$K8S_RUN" ] || [ -d "$K8S_STATE" ] || ip link show "$K8S_BRIDGE" >/dev/null 2>&1; then
  log "found a cluster that is not fully up; taking it down first"
  "$here/down.sh"
fi

# --- packages and binaries ---------------------------------------------------------------
need_pkgs=()
for p in containerd runc containernetworking-plugins iptables ipset conntrack socat openssl curl; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "install these packages first: ${need_pkgs[*]}"
  log "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "$apt_get" update -qq
  # --no-install-recommends: the containerd package must not pull in a second engine.
  "$apt_get" install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# Debian's containerd package enables a service on machines with systemd; this cluster runs
# its own instance and leaves that one as it is.

"$here/build.sh"

# The pause image's program, cached by its source's hash.
pause_src=$here/pause/pause.go
pause_hash=$(cat "$pause_src" <(go version) | sha256sum | cut -c1-16)
pause_dir=$K8S_CACHE/pause-$pause_hash
if [ ! -x "$pause_dir/pause" ]; then
  mkdir -p "$pause_dir.tmp"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$pause_dir.tmp/pause" "$pause_src"
  rm -rf "$pause_dir"; mv "$pause_dir.tmp" "$pause_dir"
fi
PAUSE_IMAGE=$K8S_REGISTRY/composebox/pause:$pause_hash

# --- from here on, a failure takes down what was started --------------------------------
failed_component=""
on_exit() {
  local rc=$?
  [ $rc -ne 0 ] || return 0
  if [ -n "$failed_component" ] && [ -f "$K8S_STATE/logs/$failed_component.log" ]; then
    log "last lines of $failed_component's log:"
    tail -n 30 "$K8S_STATE/logs/$failed_component.log" >&2 || true
  fi
  if [ "${K8S_KEEP_ON_FAILURE:-}" = 1 ]; then
    log "failed; left as it is (K8S_KEEP_ON_FAILURE=1); logs in $K8S_STATE/logs"
  else
    log "failed; taking down what was started"
    "$here/down.sh" || true
  fi
}
trap on_exit EXIT

mkdir -p "$K8S_STATE"/{logs,etcd,registry,kubelet,pod-logs,cni/net.d,cni/ipam,containerd/root} \
  "$K8S_RUN"/{pids,containerd}
# The kubelet makes iptables chains through iptables-nft, which creates the tables it needs;
# down.sh removes those that were not here before and are empty again.
nft list tables >"$K8S_RUN/nft-tables.before" 2>/dev/null || true
start_iso=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# start NAME BINARY ARGS...: runs BINARY in a session of its own, so that it outlives make,
# logging to logs/NAME.log, and records its PID (and binary, against PID reuse).
start() {
  local name=$1 bin; shift
  bin=$(readlink -f "$1")
  # 8>&-: the daemons must not inherit the lock, or they would hold it for their lifetime.
  setsid "$@" >"$K8S_STATE/logs/$name.log" 2>&1 </dev/null 8>&- &
  echo $! >"$(pidfile "$name")"
  echo "$bin" >"$(pidfile "$name").exe"
}

# ready NAME SECONDS CMD...: waits for CMD, failing with NAME's log if NAME dies or time is up.
ready() {
  local name=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  failed_component=$name
  until "$@" >/dev/null 2>&1; do
    starting "$name" || die "$name exited during start"
    [ $SECONDS -lt $deadline ] || die "$name not ready within $secs s"
    sleep 0.2
  done
  failed_component=""
}

"$here/pki.sh"

# The pods' bridge exists before anything starts, so that the node's address and CoreDNS can
# bind to its gateway; the CNI bridge plugin adopts it.
ip link add "$K8S_BRIDGE" type bridge
ip addr add "$K8S_GATEWAY/${K8S_POD_CIDR#*/}" dev "$K8S_BRIDGE"
ip link set "$K8S_BRIDGE" up
guard_pod_traffic
volume_root

# --- registry -------------------------------------------------------------------------------
cat >"$K8S_STATE/registry.yml" <<YML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $K8S_STATE/registry
  delete:
    enabled: true
http:
  addr: $K8S_REGISTRY
YML
# The registry would otherwise try to export traces to a collector that is not there.
OTEL_TRACES_EXPORTER=none start registry "$REGISTRY_BIN_DIR/registry" serve "$K8S_STATE/registry.yml"
ready registry 20 curl -fsS "http://$K8S_REGISTRY/v2/"

# --- etcd and the control plane ---------------------------------------------------------
start etcd "$ETCD_BIN_DIR/etcd" \
  --name composebox --data-dir "$K8S_STATE/etcd" \
  --listen-client-urls "https://127.0.0.1:$K8S_ETCD_PORT" \
  --advertise-client-urls "https://127.0.0.1:$K8S_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --initial-cluster "composebox=http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --cert-file "$PKI/etcd-server.crt" --key-file "$PKI/etcd-server.key" \
  --client-cert-auth --trusted-ca-file "$PKI/ca.crt" \
  --log-level warn
ready etcd 30 curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
  --key "$PKI/apiserver-etcd-client.key" "https://127.0.0.1:$K8S_ETCD_PORT/health"

start kube-apiserver "$K8S_BIN_DIR/kube-apiserver" \
  --bind-address 127.0.0.1 --secure-port "$K8S_APISERVER_PORT" --advertise-address "$K8S_GATEWAY" \
  --etcd-servers "https://127.0.0.1:$K8S_ETCD_PORT" --etcd-cafile "$PKI/ca.crt" \
  --etcd-certfile "$PKI/apiserver-etcd-client.crt" --etcd-keyfile "$PKI/apiserver-etcd-client.key" \
  --client-ca-file "$PKI/ca.crt" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer "https://kubernetes.default.svc.$K8S_DOMAIN" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-cluster-ip-range "$K8S_SERVICE_CIDR" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --profiling=false
# While the API server starts: the sandbox image, built FROM scratch and pushed the way tests
# push theirs. Docker treats a loopback registry as insecure, so plain HTTP is allowed.
pause_ctx=$K8S_STATE/pause-build
mkdir -p "$pause_ctx"
cp "$pause_dir/pause" "$pause_ctx/pause"
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$pause_ctx/Dockerfile"
out=$(DOCKER_BUILDKIT=0 docker build -q -t "$PAUSE_IMAGE" "$pause_ctx" 2>&1) || die "build the pause image: $out"
out=$(docker push "$PAUSE_IMAGE" 2>&1) || die "push the pause image: $out"
docker rmi "$PAUSE_IMAGE" >/dev/null
rm -rf "$pause_ctx"

ready kube-apiserver 60 api /readyz

start kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" \
  --kubeconfig "$K8S_STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$K8S_STATE/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$K8S_STATE/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --use-service-account-credentials \
  --allocate-node-cidrs --cluster-cidr "$K8S_POD_CIDR" --node-cidr-mask-size "${K8S_POD_CIDR#*/}" \
  --service-cluster-ip-range "$K8S_SERVICE_CIDR"
start kube-scheduler "$K8S_BIN_DIR/kube-scheduler" \
  --kubeconfig "$K8S_STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$K8S_STATE/scheduler.kubeconfig" \
  --authorization-kubeconfig "$K8S_STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false

# --- containerd, CNI and the kubelet ----------------------------------------------------
mkdir -p "$K8S_STATE/containerd/certs.d/$K8S_REGISTRY"
cat >"$K8S_STATE/containerd/certs.d/$K8S_REGISTRY/hosts.toml" <<TOML
server = "http://$K8S_REGISTRY"

[host."http://$K8S_REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
cat >"$K8S_STATE/containerd/config.toml" <<TOML
version = 2
root = "$K8S_STATE/containerd/root"
state = "$K8S_RUN/containerd/state"

[grpc]
  address = "$CTR_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_STATE/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # No process here may lower its oom_score_adj (not even PID 1 has CAP_SYS_RESOURCE), and
  # runc fails every sandbox that asks to ("can't get final child's PID from pipe: EOF").
  # Restricted, a Guaranteed pod runs at the runtime's own score; its limits still apply.
  restrict_oom_score_adj = true
  enable_cdi = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$K8S_RUN/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K8S_STATE/cni/net.d"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$K8S_STATE/containerd/certs.d"
TOML
# Docker sets the FORWARD policy to DROP and bridged traffic passes iptables here, so the
# firewall plugin's accept rules are what lets pod traffic through.
cat >"$K8S_STATE/cni/net.d/10-composebox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "composebox-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$K8S_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$K8S_POD_CIDR", "gateway": "$K8S_GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$K8S_STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall"}
  ]
}
JSON
start containerd /usr/bin/containerd --config "$K8S_STATE/containerd/config.toml"
ready containerd 30 ctr --address "$CTR_SOCK" version
# Pulled now, through the same registry configuration the CRI uses, so that a registry or
# mirror problem fails here rather than at the first pod.
failed_component=containerd
ctr --address "$CTR_SOCK" -n k8s.io images pull --hosts-dir "$K8S_STATE/containerd/certs.d" \
  "$PAUSE_IMAGE" >/dev/null
failed_component=""

cat >"$K8S_STATE/kubelet-config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $K8S_GATEWAY
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$CTR_SOCK
cgroupDriver: cgroupfs
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
clusterDomain: $K8S_DOMAIN
clusterDNS: [$K8S_GATEWAY]
podLogsDir: $K8S_STATE/pod-logs
# Images arrive through the local registry or an import; none is ever collected.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
serializeImagePulls: false
# Docker's default for a sample's containers; Kubernetes has no per-pod form of its own.
podPidsLimit: $K8S_POD_PIDS
YAML
start kubelet "$K8S_BIN_DIR/kubelet" \
  --config "$K8S_STATE/kubelet-config.yaml" --kubeconfig "$K8S_STATE/kubelet.kubeconfig" \
  --root-dir "$K8S_STATE/kubelet" --hostname-override "$K8S_NODE" --node-ip "$K8S_GATEWAY"
ready kubelet 60 curl -fsS http://127.0.0.1:10248/healthz

# --- DNS and NetworkPolicy --------------------------------------------------------------
# Without kube-proxy no ClusterIP is served, so CoreDNS runs on the host, on the bridge's
# gateway, which is the nameserver the kubelet gives every pod.
corefile >"$K8S_STATE/Corefile"
start coredns "$COREDNS_BIN_DIR/coredns" -conf "$K8S_STATE/Corefile"
ready coredns 30 curl -fsS "http://127.0.0.1:$K8S_COREDNS_READY_PORT/ready"

# kube-router writes its rules by saving the whole filter table and restoring it, which would
# drop any rule Docker added in between (a new network's, so that its containers could no
# longer reach one another) and bring back any it removed. It gets the legacy backend's
# iptables commands instead, so that its rules live in the legacy tables, apart from Docker's
# (iptables-nft) and composebox's own nftables table. The kernel applies both: pod traffic
# passes kube-router's policy there and the CNI plugin's rules here.
legacy_bin=$K8S_RUN/legacy-iptables
mkdir -p "$legacy_bin"
for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "$(command -v xtables-legacy-multi)" "$legacy_bin/$c"
done
PATH=$legacy_bin:$PATH start kube-router "$KUBE_ROUTER_BIN_DIR/kube-router" \
  --kubeconfig "$ADMIN_KUBECONFIG" --hostname-override "$K8S_NODE" \
  --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
  --service-cluster-ip-range "$K8S_SERVICE_CIDR" --health-port "$K8S_ROUTER_HEALTH_PORT"
ready kube-router 60 curl -fsS "http://127.0.0.1:$K8S_ROUTER_HEALTH_PORT/healthz"

# --- the node and the default ServiceAccount --------------------------------------------
# Ready counts only once the kubelet has posted it since this start.
# Go encodes a NodeCondition's fields in this order, so a pattern finds them.
node_ready() {
  local s t
  s=$(api "/api/v1/nodes/$K8S_NODE" |
    grep -o '"type":"Ready","status":"True","lastHeartbeatTime":"[^"]*"') || return 1
  t=${s%\"}; t=${t##*\"}
  [[ ! "$t" < "$start_iso" ]]
}
ready kubelet 60 node_ready
ready kube-controller-manager 30 api /api/v1/namespaces/default/serviceaccounts/default

trap - EXIT
write_env
log "ready in $((SECONDS - t_start)) s: node $K8S_NODE, registry $K8S_REGISTRY; wrote $ENV_FILE"
