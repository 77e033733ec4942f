// Package prereqs checks that the machine can run composebox: a reachable daemon with a recent
// enough API, a known storage driver, the base image (or the busybox to build it), free address
// pools, disk and the host firewall. Doctor runs every check; Require runs the ones a task cannot start without.
package prereqs

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A doctor report's types are the backend boundary's: Doctor is the Docker backend's.
type (
	Status = backend.Status
	Check  = backend.Check
	Report = backend.Report
)

const (
	Pass = backend.Pass
	Warn = backend.Warn
	Fail = backend.Fail
)

// Options tunes Doctor. The zero value checks the default setup.
type Options struct {
	PingTimeout time.Duration // default engine.DefaultPingTimeout
	Busybox     string        // default imagespec.DefaultBusybox
	// Extra are checks computed by the caller (the policy in force, say), appended as given.
	Extra []Check
	// Subnets is the managed-subnet configuration whose pool capacity to report.
	Subnets SubnetOptions
	// HostAccess is the policy's host-access opt-in: samples may reach the host's addresses, so
	// a host firewall that cannot be applied is only a warning.
	HostAccess bool
	// Client is the engine to check (default: the one the environment names); Doctor does not
	// close it.
	Client client.APIClient
}

// SubnetOptions mirrors orchestrator.Subnets (this package does not import the orchestrator).
type SubnetOptions struct {
	Disabled bool
	Pool     netip.Prefix // default 10.213.0.0/16
	Bits     int          // default 27
}

// knownDrivers are storage drivers composebox is tested or known to work with.
var knownDrivers = map[string]Status{
	"overlay2": Pass, "fuse-overlayfs": Pass, "btrfs": Pass, "zfs": Pass,
	"overlay": Warn, "vfs": Warn, "devicemapper": Warn, "aufs": Warn,
}

// Doctor runs every check. It never hangs on a missing daemon: the first contact is bounded by
// the ping timeout, and checks that need the daemon are skipped when it does not answer.
func Doctor(ctx context.Context, opts Options) Report {
	var checks []Check
	c, info, err := connect(ctx, opts)
	// The engine health check (health.go), in its four states, second after the daemon line;
	// over the connection just made when there is one.
	hopts := HealthOptions{Client: opts.Client}
	if err == nil {
		hopts.Client = c
	}
	health := CheckHealth(ctx, hopts).Check()
	if err != nil {
		// The error carries the start hint for library callers; here it goes in Fix.
		detail := strings.Replace(err.Error(), " ("+engine.StartHint+")", "", 1)
		checks = append(checks, Check{Name: "daemon", Status: Fail, Detail: detail, Fix: engine.StartHint}, health)
		checks = append(checks, busyboxCheck(opts.Busybox))
		return finish(checks)
	}
	if opts.Client == nil {
		defer c.Close()
	}
	sys, err := c.Info(ctx)
	if err != nil {
		checks = append(checks, Check{Name: "daemon", Status: Fail, Detail: "read engine info: " + err.Error(), Fix: engine.StartHint}, health)
		return finish(checks)
	}
	checks = append(checks,
		Check{Name: "daemon", Status: Pass, Detail: fmt.Sprintf("engine %s at %s", sys.ServerVersion, info.Host)},
		health)
	if engine.PlainTCP(ctx, c, opts.PingTimeout) {
		checks = append(checks, Check{Name: "engine_transport", Status: Warn, Detail: info.Host + " " + engine.PlainTCPRisk, Fix: engine.PlainTCPFix})
	}
	checks = append(checks,
		Check{Name: "api_version", Status: Pass, Detail: fmt.Sprintf("%s (minimum %s, negotiated)", info.APIVersion, engine.MinAPIVersion)},
		driverCheck(sys),
		baseImageCheck(ctx, c, opts.Busybox),
	)
	checks = append(checks, poolsChecks(ctx, c, info, opts)...)
	checks = append(checks, diskCheck(sys, info))
	checks = append(checks, hostFirewallCheck(info, opts.HostAccess))
	checks = append(checks, opts.Extra...)
	return finish(checks)
}

func finish(checks []Check) Report {
	r := Report{OK: true, Checks: checks}
	for _, c := range checks {
		if c.Status == Fail {
			r.OK = false
		}
	}
	return r
}

func driverCheck(sys system.Info) Check {
	st, ok := knownDrivers[sys.Driver]
	switch {
	case sys.Driver == "":
		return Check{Name: "storage_driver", Status: Fail, Detail: "the engine reports no storage driver", Fix: "check the daemon's configuration and log"}
	case !ok:
		return Check{Name: "storage_driver", Status: Warn, Detail: sys.Driver + " is untested", Fix: "use overlay2 where the kernel supports it"}
	case st == Warn:
		return Check{Name: "storage_driver", Status: Warn, Detail: sys.Driver + " works but is slow or deprecated", Fix: "use overlay2 where the kernel supports it"}
	}
	return Check{Name: "storage_driver", Status: Pass, Detail: sys.Driver}
}

// connect is the client opts gives, pinged, else one connected from the environment.
func connect(ctx context.Context, opts Options) (client.APIClient, engine.Info, error) {
	if opts.Client == nil {
		return engine.Connect(ctx, opts.PingTimeout)
	}
	info, err := engine.Ping(ctx, opts.Client, opts.PingTimeout)
	return opts.Client, info, err
}

// Require checks what a task cannot start without: a daemon answering
// within the ping timeout, API >= 1.41 and a storage driver. It returns an ErrPrerequisite.
func Require(ctx context.Context, c client.APIClient, timeout time.Duration) (engine.Info, error) {
	info, err := engine.Ping(ctx, c, timeout)
	if err != nil {
		return info, err
	}
	sys, err := c.Info(ctx)
	if err != nil {
		return info, errdefs.Wrap(errdefs.ErrPrerequisite, err, "read engine info")
	}
	info.MemTotal, info.NCPU = sys.MemTotal, sys.NCPU
	if ch := driverCheck(sys); ch.Status == Fail {
		return info, errdefs.New(errdefs.ErrPrerequisite, "check storage driver: "+strings.ToLower(ch.Detail))
	}
	return info, nil
}
