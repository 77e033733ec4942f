package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var violationsDir = filepath.Join("..", "..", "testdata", "projects", "policy-violations")

// Real escapes, refused with the flag that allows each problem, and allowed with it.
func TestConfigPolicyFlags(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-runner")
	envFile := filepath.Join(t.TempDir(), "vars.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=from-a-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file  string
		want  []string // in the refusal
		allow []string // flags that make it pass
		value string   // in the output, when it passes
	}{
		{"provider.yaml", []string{`service "x": provider`, "--allow providers"}, []string{"--allow", "providers"}, "allow_providers: true"},
		{"volume-driver-opts.yaml", []string{"volumes.d.driver_opts", "--allow volume-driver-opts"}, []string{"--allow", "volume-driver-opts"}, "device: /dev/sda1"},
		{"other-containers.yaml", []string{"4 problems", "--allow-cap SYS_PTRACE", "--allow-cap SYS_TIME", "--allow other-containers"},
			[]string{"--allow", "other-containers", "--allow-cap", "SYS_PTRACE", "--allow-cap", "sys_time"}, "pid: container:traefik"},
		// The runner's key is not read: it is blank, with a warning naming the flag that passes it.
		{"whole-tree/sandbox/env/compose.yaml", []string{"2 problems", "variable=OPENAI_API_KEY", "--pass-env OPENAI_API_KEY", "build.context", "build.dockerfile"},
			[]string{"--allow", "any-mount", "--pass-env", "OPENAI_API_KEY"}, "K: sk-from-the-runner"},
		{"whole-tree/sandbox/env/compose.yaml", nil, []string{"--allow-mount-root", filepath.Join(violationsDir, "whole-tree"), "--env-file", envFile}, "K: from-a-file"},
		{"whole-tree/sandbox/env/compose.yaml", nil, []string{"--allow", "any-mount", "--env-file", envFile, "--var", "OPENAI_API_KEY=given"}, "K: given"},
		{"seccomp-profile.yaml", []string{"security_opt[0]", "--allow unconfined"}, []string{"--allow", "unconfined"}, "allow-all.json"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(violationsDir, tt.file)
			if tt.want != nil {
				code, _, errOut := runConfigCLI(t, "config", path)
				if code != exitFailure || !strings.Contains("\n"+errOut, "\ncomposebox: policy_violation: ") || strings.Contains(errOut, "sk-from-the-runner") {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				for _, w := range tt.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr %q does not name %q", errOut, w)
					}
				}
			}
			code, out, errOut := runConfigCLI(t, append([]string{"config", path}, tt.allow...)...)
			if code != exitOK {
				t.Fatalf("with %v: exit %d, stderr %s", tt.allow, code, errOut)
			}
			for _, w := range []string{tt.value, "x-composebox-policy:", "pull_policy: never"} {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestConfigPolicyFile(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	write := func(s string) {
		if err := os.WriteFile(policy, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("allow_other_containers: true\nallow_capabilities: [SYS_PTRACE]\nmemory: 512m\negress_off: true\n")
	code, out, errOut := runConfigCLI(t, "--json", "config", filepath.Join(violationsDir, "other-containers.yaml"), "--policy", policy, "--allow-cap", "SYS_TIME")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var p struct {
		Policy struct {
			AllowOtherContainers bool     `json:"allow_other_containers"`
			AllowCapabilities    []string `json:"allow_capabilities"`
			Memory               int64    `json:"memory"`
		} `json:"x-composebox-policy"`
		Services map[string]struct {
			MemLimit string `json:"mem_limit"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Policy.AllowOtherContainers || strings.Join(p.Policy.AllowCapabilities, ",") != "SYS_PTRACE,SYS_TIME" || p.Policy.Memory != 512<<20 {
		t.Errorf("policy in force %+v", p.Policy)
	}
	if p.Services["default"].MemLimit != "536870912" {
		t.Errorf("the policy's default memory limit was not applied: %+v", p.Services)
	}
	// A misspelt opt-in is an error, not a silent no.
	write("allow_priviledged: true\n")
	code, _, errOut = runConfigCLI(t, "config", filepath.Join(violationsDir, "privileged.yaml"), "--policy", policy)
	if code != exitFailure || !strings.Contains(errOut, "invalid_config") || !strings.Contains(errOut, "allow_priviledged") {
		t.Errorf("misspelt policy: exit %d, stderr %q", code, errOut)
	}
	// An unknown --allow kind is a usage error listing the kinds.
	code, _, errOut = runConfigCLI(t, "config", filepath.Join(violationsDir, "privileged.yaml"), "--allow", "everything")
	if code != exitUsage || !strings.Contains(errOut, "privileged, host-network") {
		t.Errorf("--allow everything: exit %d, stderr %q", code, errOut)
	}
}
