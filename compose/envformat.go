package compose

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/docker/cli/pkg/kvfile"
)

// rawEnvFormat is the env_file format `format: raw`: KEY=VALUE lines read as `docker run
// --env-file` reads them, with no quoting, escapes or interpolation. compose-go knows only its
// own .env format; the compose CLI registers this one itself, and so does composebox.
const rawEnvFormat = "raw"

var envFormatsOnce sync.Once

// registerEnvFileFormats registers the env_file formats the compose CLI adds to compose-go's,
// before the first load reads an env_file. compose-go keeps its formats in a process-wide table,
// so this is done once, here and nowhere else, and only by a load: importing the package
// changes nothing. A program that also links the compose CLI registers the same parser.
func registerEnvFileFormats() {
	envFormatsOnce.Do(func() { dotenv.RegisterFormat(rawEnvFormat, parseRawEnv) })
}

// parseRawEnv is the compose CLI's "raw" env_file parser (docker/compose cmd/compose): docker/cli's
// key-value parser, where a KEY line without '=' takes its value from lookup (the project's
// variables, never the process environment).
func parseRawEnv(r io.Reader, filename string, vars map[string]string, lookup func(string) (string, bool)) error {
	lines, err := kvfile.ParseFromReader(r, lookup)
	if err != nil {
		return fmt.Errorf("failed to parse env_file %s: %w", filename, err)
	}
	for _, line := range lines {
		key, value, _ := strings.Cut(line, "=")
		vars[key] = value
	}
	return nil
}
