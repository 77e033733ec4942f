package labels

// LabelState names the snapshot a volume holds a copy for (a sample's recorded state); the
// volume carries its owner project's labels, whose teardown removes it.
const LabelState = "dev.composebox.state"

// LabelStateVolume is, on a snapshot's volume, the key of the project's volume it copies.
const LabelStateVolume = "dev.composebox.state.volume"

// ComposeVolumeLabel is the key of a named volume in its compose project.
const ComposeVolumeLabel = "com.docker.compose.volume"

// ProjectSelectorMap is ProjectSelector as labels to put on a resource.
func ProjectSelectorMap(project string) map[string]string {
	return map[string]string{LabelManaged: "true", ComposeProjectLabel: project}
}
