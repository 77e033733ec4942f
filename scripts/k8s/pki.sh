#!/usr/bin/env bash
# Writes the local Kubernetes fixture's PKI and kubeconfigs into $PKI and $K8S_STATE: one CA,
# serving certificates for etcd, the apiserver and the kubelet, a client certificate for each
# component and for the admin, and the service-account signing key. ECDSA P-256 throughout:
# every component accepts it and it takes milliseconds to make.
set -euo pipefail
. "$(dirname "$0")/common.sh"
LOG_PREFIX=k8s-pki

mkdir -p "$PKI"
chmod 700 "$PKI"
cd "$PKI"

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

newkey ca.key
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=composebox-k8s-ca" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# cert NAME SUBJECT USAGES [SANS]: a key and a certificate signed by the CA.
cert() {
  local name=$1 subject=$2 usages=$3 sans=${4:-}
  newkey "$name.key"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usages"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$name.ext"
  openssl req -new -key "$name.key" -subj "$subject" 2>/dev/null |
    openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
      -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.ext"
}

cert etcd-server "/CN=etcd" serverAuth,clientAuth "DNS:localhost,IP:127.0.0.1"
cert apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$K8S_DOMAIN,DNS:localhost,IP:127.0.0.1,IP:$K8S_SERVICE_IP,IP:$K8S_GATEWAY"
# The apiserver calls the kubelet (exec, logs, port-forward) with this identity.
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=composebox-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet-client "/O=system:nodes/CN=system:node:$K8S_NODE" clientAuth
cert kubelet-server "/CN=system:node:$K8S_NODE" serverAuth "DNS:$K8S_NODE,IP:$K8S_GATEWAY"
newkey sa.key
openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null

# kubeconfig FILE USER: the API server with USER's certificate, by path.
kubeconfig() {
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: composebox
  cluster:
    server: https://127.0.0.1:$K8S_APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: composebox
  context:
    cluster: composebox
    user: $2
current-context: composebox
KC
  chmod 600 "$1"
}
kubeconfig "$ADMIN_KUBECONFIG" admin
kubeconfig "$K8S_STATE/controller-manager.kubeconfig" controller-manager
kubeconfig "$K8S_STATE/scheduler.kubeconfig" scheduler
kubeconfig "$K8S_STATE/kubelet.kubeconfig" kubelet-client
