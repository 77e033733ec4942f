// Package labels names every label composebox puts on what it creates, and their values. The
// engine's labels are the source of truth: every container, network and volume carries the keys
// below, so a fresh process can find a crashed run's leftovers without any state file.
//
// It imports only the standard library, so that any package can name a label without linking
// the engine client.
package labels

// composebox's label keys. They are part of composebox's public surface: changing one orphans
// every resource created under the old key.
const (
	// LabelManaged is "true" on everything composebox creates.
	LabelManaged = "dev.composebox.managed"
	// LabelTask names the task a resource (or a task's image) belongs to.
	LabelTask = "dev.composebox.task"
	// LabelTaskIdentity is, on a task's built image, the identity of the task it was built for:
	// a hash of its name and its resolved task directory. A name is the file's to choose (a
	// Harbor task.toml's [task] name); the directory is not, so the identity says whose image
	// it is.
	LabelTaskIdentity = "dev.composebox.task-identity"
	// LabelSample names the sample a resource belongs to.
	LabelSample = "dev.composebox.sample"
	// LabelOwner is the owner value of the process that created a resource (see SelfOwner), or
	// OwnerDetached.
	LabelOwner = "dev.composebox.owner"
	// LabelCreated is the creation time, RFC 3339 in UTC.
	LabelCreated = "dev.composebox.created"
	// LabelImage marks an image composebox builds for itself (the base image), as opposed to a
	// task's image, so that image hygiene never removes it along with a finished task's images.
	LabelImage = "dev.composebox.image"
	// LabelDefaultService is "true" on the container of a sample's default service, so that a
	// fresh process finds it from labels alone.
	LabelDefaultService = "dev.composebox.default"
	// LabelBench marks the images and override files of the scale benchmark (bench/scale), so
	// that its sweep finds the baseline's resources too.
	LabelBench = "dev.composebox.bench"
	// LabelPool marks a sample started for a task's warm pool: PoolPooled on its containers and
	// networks, PoolWarm on the marker volume of a ready sample nobody took yet, PoolClaimed on
	// the marker volume that records who took it (see tracking.MarkWarm and tracking.Claim).
	LabelPool = "dev.composebox.pool"
	// LabelBuildNetwork is "true" on the network builds run on (lifecycle.BuildNetwork), which
	// outlives every task and so carries neither LabelManaged nor a project.
	LabelBuildNetwork = "dev.composebox.build-network"
)

// Labels of the warm marker: the fingerprint of the task configuration, and whether other
// processes may take the sample.
const (
	LabelPoolConfig = "dev.composebox.pool.config"
	LabelPoolShared = "dev.composebox.pool.shared"
)

// Markers record a project's hand-over (detached) or its place in a warm pool (warm, claimed):
// on Docker, empty volumes carrying the project's labels. They are composebox's bookkeeping, not
// the project's volumes, and are not counted as such. Their names, cbx.<kind>.<project>, are no
// compose resource's (a project's volumes are <project>_<key>, and project names hold no dot),
// so no compose file can create or pre-empt one.
const (
	MarkerDetached = "detached"
	MarkerWarm     = "warm"
	MarkerClaim    = "claim"
)

// MarkerName is the name of project's marker of kind.
func MarkerName(kind, project string) string { return "cbx." + kind + "." + project }

// IsMarker reports one of project's markers.
func IsMarker(project, name string) bool {
	for _, kind := range [...]string{MarkerDetached, MarkerWarm, MarkerClaim} {
		if name == MarkerName(kind, project) {
			return true
		}
	}
	return false
}

// Values of LabelPool.
const (
	PoolPooled  = "pooled"
	PoolWarm    = "warm"
	PoolClaimed = "claimed"
)

// ManagedFilter is the label selector that selects everything composebox created.
const ManagedFilter = LabelManaged + "=true"

// ProjectSelector selects the composebox resources of one project: every label it lists.
func ProjectSelector(project string) []string {
	return []string{ManagedFilter, ComposeProjectLabel + "=" + project}
}

// OwnerDetached is the owner of a sample handed over by `composebox up`: never stale.
const OwnerDetached = "detached"

// Labels the compose CLI stamps on each service and the compose library does not, so composebox
// stamps them itself. They are written out rather than imported from the compose library so
// that naming them does not link it.
const (
	ComposeProjectLabel     = "com.docker.compose.project"
	ComposeServiceLabel     = "com.docker.compose.service"
	ComposeVersionLabel     = "com.docker.compose.version"
	ComposeOneoffLabel      = "com.docker.compose.oneoff"
	ComposeWorkingDirLabel  = "com.docker.compose.project.working_dir"
	ComposeConfigFilesLabel = "com.docker.compose.project.config_files"
)

// ComposeVersion is the value of ComposeVersionLabel: the embedded library's release. The
// library's own api.ComposeVersion is empty unless its binary is built with ldflags.
const ComposeVersion = "2.40.3"
