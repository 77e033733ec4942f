package compose

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/versions"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/errdefs"
)

// Labels the compose CLI stamps on each service and the compose library does not (ENGINE-NOTES,
// "Embedding compose v2" item 1). They are written out rather than imported from
// github.com/docker/compose/v2/pkg/api so that this package stays free of the compose library.
const (
	ComposeProjectLabel     = "com.docker.compose.project"
	ComposeServiceLabel     = "com.docker.compose.service"
	ComposeVersionLabel     = "com.docker.compose.version"
	ComposeOneoffLabel      = "com.docker.compose.oneoff"
	ComposeWorkingDirLabel  = "com.docker.compose.project.working_dir"
	ComposeConfigFilesLabel = "com.docker.compose.project.config_files"
)

// ComposeVersion is the version label value: the embedded library's release. The library's own
// api.ComposeVersion is empty unless its binary is built with ldflags.
const ComposeVersion = "2.40.3"

// minStartIntervalAPI is the first Engine API that accepts healthcheck.start_interval.
const minStartIntervalAPI = "1.44"

// NormalizeOptions describe one sample's project.
type NormalizeOptions struct {
	// Name is the project name, from ProjectName. Empty keeps the loaded name.
	Name string
	// Task, Sample and Owner go into the dev.composebox.* labels. Owner defaults to this
	// process (cleanup.SelfOwner()).
	Task, Sample, Owner string
	// Created goes into dev.composebox.created; zero means now.
	Created time.Time
	// APIVersion is the engine's API version. Below 1.44, healthcheck.start_interval is removed
	// because the engine would refuse it. Empty leaves it alone.
	APIVersion string
	// StopGrace is the stop grace of services that set none. Zero means 1 s.
	StopGrace time.Duration
	// Images maps a service to the image already built for it: the service runs that image and
	// its build section is dropped, so that samples never rebuild.
	Images map[string]string
}

var reProjectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Normalize returns a copy of proj ready for one sample: its name, the composebox and compose
// labels on every service, network and named volume, `init: true` and a short stop grace where
// the service sets neither, start_interval stripped on old engines, and prebuilt images in place
// of builds. Network, volume, secret and config names derived from the loaded project name are
// derived again from the new one. proj is not modified. container_name, and a fixed `name:` on
// one of the project's own networks or volumes, are rejected (ErrInvalidConfig): parallel
// samples would collide on them, or share them.
func Normalize(proj *types.Project, opts NormalizeOptions) (*types.Project, error) {
	if proj == nil {
		return nil, errdefs.New(ErrInvalidConfig, "normalize: no project given")
	}
	var named []string
	for _, name := range proj.ServiceNames() {
		if cn := proj.Services[name].ContainerName; cn != "" {
			named = append(named, fmt.Sprintf("%s (%q)", name, cn))
		}
	}
	if len(named) > 0 {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"normalize: container_name is not allowed, it would make parallel samples collide: service %s",
			strings.Join(named, ", service ")))
	}
	if fixed := fixedNames(proj); len(fixed) > 0 {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"normalize: a fixed name is not allowed, it would make parallel samples share or collide: %s",
			strings.Join(fixed, ", ")))
	}
	for svc := range opts.Images {
		if _, ok := proj.Services[svc]; !ok {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("normalize: image given for unknown service %q", svc))
		}
	}

	p := proj.WithServicesDisabled() // a deep copy
	if opts.Name != "" {
		if !reProjectName.MatchString(opts.Name) {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
				"normalize: invalid project name %q: want [a-z0-9][a-z0-9_-]*", opts.Name))
		}
		p.Name = opts.Name
		renameResources(p, proj.Name)
	}
	owner := opts.Owner
	if owner == "" {
		owner = cleanup.SelfOwner()
	}
	created := opts.Created
	if created.IsZero() {
		created = time.Now()
	}
	grace := types.Duration(opts.StopGrace)
	if grace <= 0 {
		grace = types.Duration(time.Second)
	}
	stripStartInterval := opts.APIVersion != "" && versions.LessThan(opts.APIVersion, minStartIntervalAPI)
	ours := map[string]string{
		cleanup.LabelManaged: "true",
		cleanup.LabelTask:    opts.Task,
		cleanup.LabelSample:  opts.Sample,
		cleanup.LabelOwner:   owner,
		cleanup.LabelCreated: created.UTC().Format(time.RFC3339),
	}
	configFiles := strings.Join(p.ComposeFiles, ",")

	for name, s := range p.Services {
		if img, ok := opts.Images[name]; ok {
			s.Image, s.Build = img, nil
			if s.PullPolicy == types.PullPolicyBuild {
				s.PullPolicy = ""
			}
		}
		if s.Init == nil {
			s.Init = new(true)
		}
		if s.StopGracePeriod == nil {
			s.StopGracePeriod = new(grace)
		}
		if stripStartInterval && s.HealthCheck != nil {
			s.HealthCheck.StartInterval = nil
		}
		s.Labels = withLabels(s.Labels, ours)
		s.CustomLabels = withLabels(s.CustomLabels, map[string]string{
			ComposeProjectLabel:     p.Name,
			ComposeServiceLabel:     name,
			ComposeVersionLabel:     ComposeVersion,
			ComposeOneoffLabel:      "False",
			ComposeWorkingDirLabel:  p.WorkingDir,
			ComposeConfigFilesLabel: configFiles,
		})
		p.Services[name] = s
	}
	for name, n := range p.Networks {
		if !bool(n.External) {
			n.Labels = withLabels(n.Labels, ours)
			p.Networks[name] = n
		}
	}
	for name, v := range p.Volumes {
		if !bool(v.External) {
			v.Labels = withLabels(v.Labels, ours)
			p.Volumes[name] = v
		}
	}
	return p, nil
}

// fixedNames lists the project's own networks and volumes whose engine name the file fixes
// (name: x) rather than leaving compose-go to derive it from the project name.
func fixedNames(p *types.Project) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(p.Networks)) {
		if n := p.Networks[key]; !bool(n.External) && n.Name != "" && n.Name != p.Name+"_"+key {
			out = append(out, fmt.Sprintf("network %s (name %q)", key, n.Name))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(p.Volumes)) {
		if v := p.Volumes[key]; !bool(v.External) && v.Name != "" && v.Name != p.Name+"_"+key {
			out = append(out, fmt.Sprintf("volume %s (name %q)", key, v.Name))
		}
	}
	return out
}

// renameResources re-derives the engine names compose-go put on networks, volumes, secrets and
// configs from the project name at load time (<project>_<key>), so that each sample gets its own.
func renameResources(p *types.Project, old string) {
	rename := func(key, name string) string {
		if name == "" || name == old+"_"+key {
			return p.Name + "_" + key
		}
		return name
	}
	for key, n := range p.Networks {
		if !bool(n.External) {
			n.Name = rename(key, n.Name)
			p.Networks[key] = n
		}
	}
	for key, v := range p.Volumes {
		if !bool(v.External) {
			v.Name = rename(key, v.Name)
			p.Volumes[key] = v
		}
	}
	for key, s := range p.Secrets {
		if !bool(s.External) {
			s.Name = rename(key, s.Name)
			p.Secrets[key] = s
		}
	}
	for key, c := range p.Configs {
		if !bool(c.External) {
			c.Name = rename(key, c.Name)
			p.Configs[key] = c
		}
	}
}

// withLabels returns a copy of l with add on top: a user's label cannot stand in for ours.
func withLabels(l types.Labels, add map[string]string) types.Labels {
	out := make(types.Labels, len(l)+len(add))
	maps.Copy(out, l)
	maps.Copy(out, add)
	return out
}

// ProjectName is a sample's compose project name, cbx-<task>-<shortid>: lowercase,
// [a-z0-9][a-z0-9_-]*, with the task part cut to 20 characters. An empty task gives
// cbx-<shortid>.
func ProjectName(task, shortID string) string {
	t := sanitizeName(task, 20)
	id := sanitizeName(shortID, 32)
	parts := []string{"cbx"}
	for _, s := range []string{t, id} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "-")
}

// sanitizeName lowercases s, turns anything outside [a-z0-9_-] into '-', collapses runs of '-',
// and cuts it to max characters without a leading or trailing '-' or '_'.
func sanitizeName(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			if !strings.HasSuffix(b.String(), "-") {
				b.WriteByte('-')
			}
		}
	}
	out := strings.Trim(b.String(), "-_")
	if len(out) > max {
		out = strings.TrimRight(out[:max], "-_")
	}
	return out
}

// NewSampleID returns a short random sample id: 8 hex characters.
func NewSampleID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
