package tracking

import "github.com/composebox/composebox/orchestrator/backend"

// OwnerStatus is backend.OwnerStatusOf: whether the process named by an owner label is alive.
func OwnerStatus(owner string) backend.OwnerStatus {
	return backend.OwnerStatusOf(owner)
}
