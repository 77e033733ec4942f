package sandboxio

import "github.com/composebox/composebox/orchestrator/backend/filescript"

// The scripts and exit codes are filescript's, which every backend shares.
const (
	readScript     = filescript.ReadFile
	writeScript    = filescript.WriteFile
	readDirScript  = filescript.ReadDir
	writeDirScript = filescript.WriteDir

	codeNotFound   = filescript.CodeNotFound
	codeIsDir      = filescript.CodeIsDir
	codePermission = filescript.CodePermission
	codeNotDir     = filescript.CodeNotDir
	codeNotRegular = filescript.CodeNotRegular
)
