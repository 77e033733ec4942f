// Package compose resolves, loads, normalises and polices the compose projects that composebox
// runs. Loading goes through compose-go; nothing else in composebox parses compose files.
//
// The flow for one task and its samples is:
//
//	r, err := compose.Resolve(path, compose.ResolveOptions{})       // which case applies (a suite's layout too), and why
//	proj, err := compose.Load(ctx, r, compose.LoadOptions{...})     // compose-go, variables, default, agent, images, the policy: every problem at once
//	plan, err := compose.PlanImages(proj, task)                     // build once per task
//	sample, err := compose.Normalize(proj, compose.NormalizeOptions{...}) // per sample: name, labels, adaptations
//	err = policy.RecheckHostPaths(sample)                           // right before the sample is created
//
// The package is pure logic: nothing here talks to a Docker daemon.
package compose

import "github.com/composebox/composebox/internal/errdefs"

// Error categories returned by this package, for errors.Is.
var (
	// ErrInvalidConfig marks a config that cannot be resolved, parsed or loaded.
	ErrInvalidConfig = errdefs.ErrInvalidConfig
	// ErrPolicyViolation marks a config that loads but asks for something the policy forbids.
	ErrPolicyViolation = errdefs.ErrPolicyViolation
)
