package multiengine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
)

// EngineConfig is one Docker Engine of several, as `--engine NAME=ENDPOINT` or an entry of an
// `--engines` file gives it.
type EngineConfig struct {
	// Name names the engine in placements, listings and errors.
	Name string `yaml:"name" json:"name"`
	// Endpoint is unix:///PATH, tcp://HOST:PORT (TLS certificates with TLS, or as
	// tcp://HOST:PORT?tls=CERTDIR), ssh://[USER@]HOST[:PORT], or context:NAME (a context of
	// the docker CLI's store).
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// TLS is a directory holding ca.pem, cert.pem and key.pem, for a tcp:// endpoint.
	TLS string `yaml:"tls,omitempty" json:"tls,omitempty"`
	// MaxSamples is how many samples the engine takes at most (0: no bound; its load is then
	// weighed by its CPUs).
	MaxSamples int `yaml:"max_samples,omitempty" json:"max_samples,omitempty"`
	// Labels describe the engine.
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// SubnetPool is the pool the engine's managed subnets come from, such as 10.214.0.0/16
	// (default: an equal share of the orchestrator's pool, so that engines sharing a host's
	// routes never pick the same subnet).
	SubnetPool string `yaml:"subnet_pool,omitempty" json:"subnet_pool,omitempty"`
}

// EndpointOf is the engine's endpoint, its TLS directory folded in.
func (c EngineConfig) EndpointOf() (engine.Endpoint, error) {
	ep, err := engine.ParseEndpoint(c.Endpoint)
	if err != nil {
		return ep, fmt.Errorf("engine %s: %w", c.Name, err)
	}
	if c.TLS != "" {
		if ep.TLSDir != "" && ep.TLSDir != c.TLS {
			return ep, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %s: two TLS directories (%s and %s)", c.Name, ep.TLSDir, c.TLS))
		}
		ep.TLSDir = c.TLS
		if err := ep.Validate(); err != nil {
			return ep, fmt.Errorf("engine %s: %w", c.Name, err)
		}
	}
	return ep, nil
}

// Validate checks the configuration's form, without reaching the engine.
func (c EngineConfig) Validate() error {
	if err := validName(c.Name); err != nil {
		return err
	}
	if _, err := c.EndpointOf(); err != nil {
		return err
	}
	if c.MaxSamples < 0 {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %s: max_samples %d is negative", c.Name, c.MaxSamples))
	}
	if c.SubnetPool != "" {
		if _, err := netip.ParsePrefix(c.SubnetPool); err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("engine %s: subnet_pool", c.Name))
		}
	}
	return nil
}

// ParseFlag reads `NAME=ENDPOINT`, the form of --engine.
func ParseFlag(s string) (EngineConfig, error) {
	name, ep, ok := strings.Cut(s, "=")
	if !ok || name == "" || ep == "" {
		return EngineConfig{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %q: want NAME=ENDPOINT, as a=unix:///var/run/docker.sock", s))
	}
	c := EngineConfig{Name: name, Endpoint: ep}
	return c, c.Validate()
}

// enginesFile is the document of an --engines file.
type enginesFile struct {
	Engines []EngineConfig `yaml:"engines"`
}

// LoadFile reads an --engines file: YAML with a list `engines`, each entry an EngineConfig
// (name, endpoint, tls, max_samples, labels, subnet_pool). Unknown keys are errors.
func LoadFile(path string) ([]EngineConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "read engines file")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f enginesFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "engines file "+path)
	}
	if len(f.Engines) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engines file %s: no engines (want a list under `engines:`)", path))
	}
	for _, c := range f.Engines {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("engines file %s: %w", path, err)
		}
	}
	return f.Engines, nil
}

// Config is how New makes each engine's backend.
type Config struct {
	// Logger receives diagnostics (default: discarded).
	Logger *slog.Logger
	// Retry says how each engine's calls ride out its hiccups.
	Retry lifecycle.RetryPolicy
	// Subnets configures managed subnets; its pool is split in equal shares among the engines
	// that give no subnet_pool of their own.
	Subnets subnets.Subnets
}

// New connects to each engine (without contacting it: Ping does) and returns them as one
// Backend, which Close closes.
func New(cfgs []EngineConfig, cfg Config) (*Backend, error) {
	if len(cfgs) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "engines: none given")
	}
	pools, err := enginePools(cfgs, cfg.Subnets)
	if err != nil {
		return nil, err
	}
	members := make([]Member, 0, len(cfgs))
	closeAll := func() {
		for _, m := range members {
			_ = m.Backend.Close()
		}
	}
	for i, c := range cfgs {
		if err := c.Validate(); err != nil {
			closeAll()
			return nil, err
		}
		ep, _ := c.EndpointOf()
		sn := cfg.Subnets
		sn.Pool = pools[i]
		db, err := dockerbackend.FromEndpoint(ep, dockerbackend.Options{Logger: cfg.Logger, Retry: cfg.Retry, Subnets: sn, Name: c.Name})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("engine %s: %w", c.Name, err)
		}
		members = append(members, Member{Name: c.Name, Backend: db, MaxSamples: c.MaxSamples, Labels: c.Labels})
	}
	b, err := NewFromBackends(members, Options{Logger: cfg.Logger})
	if err != nil {
		closeAll()
		return nil, err
	}
	for _, c := range cfgs {
		ep, _ := c.EndpointOf()
		b.byName[c.Name].configured = ep.String()
	}
	b.owned = true
	return b, nil
}

// enginePools is each engine's subnet pool: its own, else its share of the common one.
func enginePools(cfgs []EngineConfig, s subnets.Subnets) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, len(cfgs))
	shared := 0
	for i, c := range cfgs {
		if c.SubnetPool != "" {
			p, err := netip.ParsePrefix(c.SubnetPool)
			if err != nil {
				return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("engine %s: subnet_pool", c.Name))
			}
			out[i] = p.Masked()
			continue
		}
		shared++
	}
	if shared == 0 || s.Disabled {
		return out, nil
	}
	common, err := subnets.Configured(s.Pool, s.Bits)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "engines")
	}
	shares, err := common.Split(shared)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "engines")
	}
	j := 0
	for i, c := range cfgs {
		if c.SubnetPool == "" {
			out[i] = shares[j].Base
			j++
		}
	}
	return out, nil
}
