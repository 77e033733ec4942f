# Sourced by up.sh and down.sh: where the local Kubernetes fixture keeps its state, the
# addresses it listens on, and small helpers. There is one cluster per machine, like the Docker
# engine: any checkout can bring it up, see it running, or take it down.
. "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

# Everything the cluster writes, apart from the binary cache, lives under these two directories
# and is removed by down.sh.
K8S_STATE=${K8S_STATE:-/var/lib/composebox-k8s}
K8S_RUN=${K8S_RUN:-/run/composebox-k8s}
# up.sh and down.sh hold it while they work, so that they never run at once.
K8S_LOCK=${K8S_LOCK:-/run/lock/composebox-k8s.lock}

K8S_NODE=${K8S_NODE:-composebox-node}
# Pods live on a bridge of their own, on a range outside Docker's default pools (172.17-31/16,
# 192.168/16) and composebox's (10.213/16). Its gateway is also the node's address and where
# CoreDNS listens, so nothing of the cluster binds the machine's real interfaces.
K8S_BRIDGE=${K8S_BRIDGE:-cbx-k8s0}
K8S_POD_CIDR=${K8S_POD_CIDR:-10.244.0.0/24}
K8S_GATEWAY=${K8S_GATEWAY:-10.244.0.1}
K8S_SERVICE_CIDR=${K8S_SERVICE_CIDR:-10.96.0.0/16}
K8S_SERVICE_IP=${K8S_SERVICE_IP:-10.96.0.1}
K8S_DOMAIN=cluster.local

K8S_APISERVER_PORT=${K8S_APISERVER_PORT:-16443}
K8S_ETCD_PORT=${K8S_ETCD_PORT:-12379}
K8S_ETCD_PEER_PORT=${K8S_ETCD_PEER_PORT:-12380}
K8S_REGISTRY_PORT=${K8S_REGISTRY_PORT:-15000}
K8S_COREDNS_READY_PORT=${K8S_COREDNS_READY_PORT:-18181}
K8S_ROUTER_HEALTH_PORT=${K8S_ROUTER_HEALTH_PORT:-20244}
K8S_REGISTRY=127.0.0.1:$K8S_REGISTRY_PORT

# On a cluster without a StorageClass, the volumes several services of a sample share are
# directories on the node: under this one, which only root can traverse and which is mounted
# nosuid and nodev (up.sh), so that what an agent leaves there is inert on the host.
K8S_VOLUMES=$K8S_STATE/volumes
# The pods' pids limit, as Docker's default for a sample's containers (the kubelet's
# podPidsLimit: one value for every pod of the node).
K8S_POD_PIDS=${K8S_POD_PIDS:-4096}

PKI=$K8S_STATE/pki
CTR_SOCK=$K8S_RUN/containerd/containerd.sock
ADMIN_KUBECONFIG=$K8S_STATE/admin.kubeconfig

# Start order; down.sh stops them in reverse.
COMPONENTS=(registry etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet coredns kube-router)

log() { printf '%s: %s\n' "${LOG_PREFIX:-k8s}" "$*" >&2; }
die() { log "$*"; exit 1; }

# api PATH [CURL ARGS...]: PATH on the API server, as the admin. The scripts need a few calls
# only, so kubectl is not built for them. The API server indents its JSON for curl's user
# agent; under another it answers compact JSON, which names and up.sh's patterns expect.
api() {
  local path=$1; shift
  curl -fsS -A composebox-k8s-scripts --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@" \
    "https://127.0.0.1:$K8S_APISERVER_PORT$path"
}
# names: the metadata.name of each object in the API list on stdin. Go encodes ObjectMeta's
# name first, so this holds without a JSON parser.
names() { grep -o '"metadata":{"name":"[^"]*"' | sed 's/.*"name":"//; s/"$//'; }

pidfile() { echo "$K8S_RUN/pids/$1.pid"; }

# starting NAME: NAME's process has not exited, though it may not have become its binary yet
# (between start's fork and setsid's exec, which a loaded machine can stretch: checking the
# binary there failed a cold run with "kubelet exited during start" and an empty log).
starting() {
  local f pid state
  f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# running NAME: the recorded process is alive and is still the binary that was started.
running() {
  local f pid
  f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(cat "$f.exe" 2>/dev/null)" ]
}

