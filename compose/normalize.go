package compose

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// minStartIntervalAPI is the first Engine API that accepts healthcheck.start_interval.
const minStartIntervalAPI = "1.44"

// apiBefore reports whether Engine API version v (major.minor) is older than min. Parts that
// are missing or not numbers count as 0, as the engine's own comparison does.
func apiBefore(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range max(len(a), len(b)) {
		if c := cmp.Compare(versionPart(a, i), versionPart(b, i)); c != 0 {
			return c < 0
		}
	}
	return false
}

func versionPart(parts []string, i int) int {
	if i >= len(parts) {
		return 0
	}
	n, _ := strconv.Atoi(parts[i])
	return n
}

// NormalizeOptions describe one sample's project.
type NormalizeOptions struct {
	// Name is the project name, from ProjectName. Empty keeps the loaded name.
	Name string
	// Task, Sample and Owner go into the dev.composebox.* labels. Owner defaults to this
	// process (labels.SelfOwner()).
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
	// OnAdapt receives each adaptation Normalize makes (nil: none is reported).
	OnAdapt func(Adaptation)
}

var reProjectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Normalize returns a copy of proj ready for one sample: its name, the composebox and compose
// labels on every service, network and named volume, `init: true` and a short stop grace where
// the service sets neither, start_interval stripped on old engines, and prebuilt images in place
// of builds. Network, volume, secret and config names derived from the loaded project name are
// derived again from the new one. proj is not modified.
//
// What would make parallel samples collide or share is adapted, each change reported to
// opts.OnAdapt: container_name is dropped and becomes a network alias; a fixed published host
// port becomes an ephemeral one on the same host_ip (127.0.0.1 when none is given); an external
// network becomes the sample's own, under the same key and with the same aliases; a fixed name:
// of a network or volume is prefixed with the project name. A project that referenced
// ${COMPOSE_PROJECT_NAME} (SampleVariables) is reported too.
func Normalize(proj *types.Project, opts NormalizeOptions) (*types.Project, error) {
	if proj == nil {
		return nil, errdefs.New(ErrInvalidConfig, "normalize: no project given")
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
	report := opts.OnAdapt
	if report == nil {
		report = func(Adaptation) {}
	}
	if slices.Contains(SampleVariables(p), ProjectNameEnv) {
		report(Adaptation{Kind: AdaptProjectName, From: "${" + ProjectNameEnv + "}", To: p.Name,
			Message: fmt.Sprintf("${%s} is the sample's project name %q", ProjectNameEnv, p.Name)})
	}
	adapt(p, report)
	owner := opts.Owner
	if owner == "" {
		owner = labels.SelfOwner()
	}
	created := opts.Created
	if created.IsZero() {
		created = time.Now()
	}
	grace := types.Duration(opts.StopGrace)
	if grace <= 0 {
		grace = types.Duration(time.Second)
	}
	stripStartInterval := opts.APIVersion != "" && apiBefore(opts.APIVersion, minStartIntervalAPI)
	ours := map[string]string{
		labels.LabelManaged: "true",
		labels.LabelTask:    opts.Task,
		labels.LabelSample:  opts.Sample,
		labels.LabelOwner:   owner,
		labels.LabelCreated: created.UTC().Format(time.RFC3339),
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
			labels.ComposeProjectLabel:     p.Name,
			labels.ComposeServiceLabel:     name,
			labels.ComposeVersionLabel:     labels.ComposeVersion,
			labels.ComposeOneoffLabel:      "False",
			labels.ComposeWorkingDirLabel:  p.WorkingDir,
			labels.ComposeConfigFilesLabel: configFiles,
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
	t := SanitizeName(task, 20)
	id := SanitizeName(shortID, 32)
	parts := []string{"cbx"}
	for _, s := range []string{t, id} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "-")
}

// SanitizeName lowercases s, turns anything outside [a-z0-9_-] into '-', collapses runs of '-',
// and cuts it to max characters without a leading or trailing '-' or '_'.
func SanitizeName(s string, max int) string {
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
