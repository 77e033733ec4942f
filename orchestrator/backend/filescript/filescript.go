package sandboxio

// The shell scripts file and directory operations run in a container, and the exit codes they
// report failures with, for other backends that move files over a plain exec (the Kubernetes
// backend) and must fail the same way.
const (
	ReadFileScript  = readScript
	WriteFileScript = writeScript
	ReadDirScript   = readDirScript
	WriteDirScript  = writeDirScript

	CodeNotFound   = codeNotFound
	CodeIsDir      = codeIsDir
	CodePermission = codePermission
	CodeNotDir     = codeNotDir
	CodeNotRegular = codeNotRegular
)
