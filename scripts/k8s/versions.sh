# Sourced by the scripts beside it: the versions of the local Kubernetes fixture and where
# their binaries are cached. Each binary lives in a directory named by its version, so a version
# bump builds anew and never mixes with an old binary.
#
# Kubernetes stays on 1.34: 1.35 refuses cgroup v1, the only hierarchy some machines of this
# kind have.
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
# Firewall-only: it enforces NetworkPolicy with iptables and ipset, which this kernel has
# (the nftables-queue based enforcers need CONFIG_NFT_QUEUE, which it lacks).
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v2.1.0}
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}

K8S_CACHE=${K8S_CACHE:-/var/cache/composebox-k8s}
# The control plane and etcd are built together (build.sh), so they share a directory.
K8S_BIN_DIR=$K8S_CACHE/control-plane-$K8S_VERSION-etcd-$ETCD_VERSION
ETCD_BIN_DIR=$K8S_BIN_DIR
COREDNS_BIN_DIR=$K8S_CACHE/coredns-$COREDNS_VERSION
KUBE_ROUTER_BIN_DIR=$K8S_CACHE/kube-router-$KUBE_ROUTER_VERSION
REGISTRY_BIN_DIR=$K8S_CACHE/registry-$REGISTRY_VERSION
