package labels

// LabelState names the snapshot a volume holds a copy for (a sample's recorded state); the
// volume carries its owner project's labels, whose teardown removes it.
const LabelState = "dev.composebox.state"

// LabelStateVolume is, on a snapshot's volume, the key of the project's volume it copies.
const LabelStateVolume = "dev.composebox.state.volume"

// Labels of an image a snapshot committed. The image is shared, through a tag of each project's
// own (see cleanup.StateRepo), by the project it was committed for and every project started
// from it; a tag goes with its project, and the image with its last tag. These labels say who
// committed it, for which task and when, so that a cleanup finds the tags of a project that has
// nothing else left (its process died between the commit and the project's first container)
// and can tell whether that project is stale. They have keys of their own, not LabelOwner's and
// the others', because a container inherits its image's labels: a fork run from the image must
// not pass for the sample it was committed from.
const (
	// LabelStateImage is "true" on every image a snapshot committed.
	LabelStateImage = "dev.composebox.state.image"
	// LabelStateOwner, LabelStateTask and LabelStateCreated are the owner value of the process
	// that committed it, the task, and the commit's time (RFC 3339, UTC).
	LabelStateOwner   = "dev.composebox.state.owner"
	LabelStateTask    = "dev.composebox.state.task"
	LabelStateCreated = "dev.composebox.state.created"
)

// ComposeVolumeLabel is the key of a named volume in its compose project.
const ComposeVolumeLabel = "com.docker.compose.volume"

// ProjectSelectorMap is ProjectSelector as labels to put on a resource.
func ProjectSelectorMap(project string) map[string]string {
	return map[string]string{LabelManaged: "true", ComposeProjectLabel: project}
}
