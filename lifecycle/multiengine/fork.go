package multiengine

// UnsupportedReason says why a backend of several engines does not fork, snapshot or reset
// (see backend.Unsupported): the state would have to stay on the source's engine or move with
// its images, and that routing is not written yet.
func (b *Backend) UnsupportedReason(op string) string {
	return "forks over several engines are not implemented yet; run the task on one engine (no --engine) to fork it"
}
