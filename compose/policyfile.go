package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/internal/errdefs"
)

// PolicyExtension is the key under which `composebox config` shows the policy in force, in
// the project it prints: an x- extension, which the engine ignores.
const PolicyExtension = "x-composebox-policy"

// ReadPolicyFile reads a policy file (`--policy FILE`): YAML with the field names of Policy
// (allow_privileged: true, allow_capabilities: [SYS_PTRACE], memory: 512m, ...), on top of
// DefaultPolicy. An unknown field is an error, so that a misspelt opt-in is not silently off.
func ReadPolicyFile(path string) (Policy, error) {
	data, err := readLimited(path, defaultLimits.MaxFileSize)
	if err != nil {
		return Policy{}, errdefs.Wrap(ErrInvalidConfig, err, "read policy "+path)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return Policy{}, fmt.Errorf("read policy %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy parses a policy file's content (see ReadPolicyFile).
func ParsePolicy(data []byte) (Policy, error) {
	p := DefaultPolicy()
	if len(bytes.TrimSpace(data)) == 0 {
		return p, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return p, errdefs.Wrap(ErrInvalidConfig, err, "parse policy")
	}
	// memory may be a size with a unit, as in compose files.
	if m := mappingOf(&doc); m != nil {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if v := m.Content[i+1]; m.Content[i].Value == "memory" && v.Kind == yaml.ScalarNode {
				var b types.UnitBytes
				if err := b.DecodeMapstructure(v.Value); err != nil {
					return p, errdefs.New(ErrInvalidConfig, fmt.Sprintf("parse policy: memory %q: want a size such as 512m", v.Value))
				}
				v.Value, v.Tag, v.Style = strconv.FormatInt(int64(b), 10), "!!int", 0
			}
		}
	}
	normalized, err := yaml.Marshal(&doc)
	if err != nil {
		return p, errdefs.Wrap(ErrInvalidConfig, err, "parse policy")
	}
	dec := yaml.NewDecoder(bytes.NewReader(normalized))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
		return p, errdefs.Wrap(ErrInvalidConfig, err, "parse policy")
	}
	return p, nil
}
