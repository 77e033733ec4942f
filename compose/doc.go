// Package compose resolves, loads, normalises and polices the compose projects that composebox
// runs. Loading goes through compose-go; nothing else in composebox parses compose files.
package compose

import _ "github.com/compose-spec/compose-go/v2/cli"
