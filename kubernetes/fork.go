package kubernetes

// UnsupportedReason says why this backend cannot fork, snapshot or reset a sample (see
// backend.Unsupported): a pod's filesystem changes cannot be committed to an image through
// the Kubernetes API, and a PersistentVolumeClaim has no copy there without a CSI snapshot
// class, which a cluster need not have.
func (b *Backend) UnsupportedReason(op string) string {
	return "the Kubernetes API cannot commit a pod's filesystem changes to an image, nor copy a volume without a CSI snapshot class; fork, snapshot and reset need the Docker backend"
}
