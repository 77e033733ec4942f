package cpus

import (
	"os"
	"path/filepath"
	"testing"
)

// tree writes files (path relative to a temp root → content) and returns the root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		self   string
		want   float64
		wantOK bool
	}{
		{name: "nothing mounted", self: "0::/\n"},
		{name: "v2 unlimited", files: map[string]string{"cpu.max": "max 100000\n"}, self: "0::/\n"},
		{name: "v2 at root", files: map[string]string{"cpu.max": "150000 100000\n"}, self: "0::/\n", want: 1.5, wantOK: true},
		{name: "v2 quota only", files: map[string]string{"cpu.max": "50000\n"}, self: "0::/\n", want: 0.5, wantOK: true},
		{name: "v2 own cgroup", files: map[string]string{"cpu.max": "max 100000", "a/b/cpu.max": "300000 100000"}, self: "0::/a/b\n", want: 3, wantOK: true},
		{name: "v2 parent is tighter", files: map[string]string{"a/cpu.max": "100000 100000", "a/b/cpu.max": "300000 100000"}, self: "0::/a/b\n", want: 1, wantOK: true},
		{name: "v2 path not mounted (no cgroupns)", files: map[string]string{"cpu.max": "200000 100000"}, self: "0::/docker/abc\n", want: 2, wantOK: true},
		{name: "v2 malformed", files: map[string]string{"cpu.max": "lots 100000"}, self: "0::/\n"},
		{name: "v2 zero period", files: map[string]string{"cpu.max": "100000 0"}, self: "0::/\n"},
		{name: "v1 unlimited", files: map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, self: "2:cpu,cpuacct:/\n"},
		{name: "v1 limited", files: map[string]string{"cpu/cpu.cfs_quota_us": "250000\n", "cpu/cpu.cfs_period_us": "100000\n"}, self: "2:cpu,cpuacct:/\n", want: 2.5, wantOK: true},
		{name: "v1 nested", files: map[string]string{
			"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
			"cpu/job/cpu.cfs_quota_us": "50000", "cpu/job/cpu.cfs_period_us": "100000",
		}, self: "4:memory:/job\n2:cpu,cpuacct:/job\n0::/\n", want: 0.5, wantOK: true},
		{name: "v1 joint mount", files: map[string]string{"cpu,cpuacct/cpu.cfs_quota_us": "400000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, self: "2:cpuacct,cpu:/\n", want: 4, wantOK: true},
		{name: "v1 period missing", files: map[string]string{"cpu/cpu.cfs_quota_us": "400000"}, self: "2:cpu:/\n"},
		{name: "hybrid takes the smaller", files: map[string]string{
			"cpu.max": "300000 100000", "cpu/cpu.cfs_quota_us": "200000", "cpu/cpu.cfs_period_us": "100000",
		}, self: "2:cpu:/\n0::/\n", want: 2, wantOK: true},
		{name: "cpuacct alone is not cpu", files: map[string]string{"cpu/x/cpu.cfs_quota_us": "100000", "cpu/x/cpu.cfs_period_us": "100000"}, self: "3:cpuacct:/x\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.files)
			got, ok := Quota(root, []byte(tc.self))
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("Quota = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		numCPU int
		files  map[string]string
		want   int
	}{
		{name: "no quota", numCPU: 8, want: 8},
		{name: "quota below cpus rounds up", numCPU: 8, files: map[string]string{"cpu.max": "150000 100000"}, want: 2},
		{name: "quota above cpus", numCPU: 2, files: map[string]string{"cpu.max": "800000 100000"}, want: 2},
		{name: "tiny quota is still one", numCPU: 4, files: map[string]string{"cpu.max": "1000 100000"}, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := count(tc.numCPU, tree(t, tc.files), []byte("0::/\n")); got != tc.want {
				t.Errorf("count = %d, want %d", got, tc.want)
			}
		})
	}
	if n := Count(); n < 1 {
		t.Errorf("Count() = %d on this machine", n)
	}
}
