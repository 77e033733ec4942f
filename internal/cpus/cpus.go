// Package cpus tells how many CPUs this process may keep busy. runtime.NumCPU counts the CPUs
// the process may be scheduled on, but a container started with --cpus (a CFS quota) sees every
// one of them while getting only its quota's worth of time: sizing concurrency by NumCPU alone
// would oversubscribe it.
package cpus

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// DefaultRoot is where the cgroup file systems are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// Count is runtime.NumCPU capped by this process's cgroup CPU quota (rounded up), at least 1.
func Count() int {
	self, _ := os.ReadFile("/proc/self/cgroup")
	return count(runtime.NumCPU(), DefaultRoot, self)
}

func count(numCPU int, root string, procSelfCgroup []byte) int {
	n := numCPU
	if q, ok := Quota(root, procSelfCgroup); ok {
		n = min(n, int(math.Ceil(q)))
	}
	return max(n, 1)
}

// Quota is the CPU quota, in CPUs, of the cgroup that procSelfCgroup (the content of
// /proc/self/cgroup) names under root, or of any ancestor, whichever is tightest: a parent's
// limit applies to its children too. It reads cgroup v2's cpu.max and cgroup v1's
// cpu.cfs_quota_us with cpu.cfs_period_us, and takes the smaller when a hybrid host has both.
// ok is false when no quota is set anywhere on the path.
//
// The path in /proc/self/cgroup may not exist under root (a container without its own cgroup
// namespace sees the host's path but has its own cgroup mounted at root), so the walk always
// ends at root itself.
func Quota(root string, procSelfCgroup []byte) (cpus float64, ok bool) {
	v2, v1 := cgroupPaths(procSelfCgroup)
	best := math.Inf(1)
	consider := func(q float64, found bool) {
		if found && q < best {
			best = q
		}
	}
	for _, dir := range ancestors(root, v2) {
		consider(readCPUMax(filepath.Join(dir, "cpu.max")))
	}
	for _, mount := range []string{"cpu", "cpu,cpuacct"} {
		for _, dir := range ancestors(filepath.Join(root, mount), v1) {
			consider(readCFS(dir))
		}
	}
	if math.IsInf(best, 1) {
		return 0, false
	}
	return best, true
}

// cgroupPaths returns the v2 (unified) path and the v1 path of the cpu controller from
// /proc/self/cgroup lines "id:controllers:path". Missing ones are "/".
func cgroupPaths(procSelfCgroup []byte) (v2, v1 string) {
	v2, v1 = "/", "/"
	sc := bufio.NewScanner(bytes.NewReader(procSelfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case hasController(parts[1], "cpu"):
			v1 = parts[2]
		}
	}
	return v2, v1
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// ancestors lists base/rel and each of its parents up to base, without duplicates.
func ancestors(base, rel string) []string {
	rel = filepath.Clean("/" + rel)
	var out []string
	for {
		out = append(out, filepath.Join(base, rel))
		if rel == "/" {
			return out
		}
		rel = filepath.Dir(rel)
	}
}

// readCPUMax parses cgroup v2's "cpu.max": "<quota> <period>" in µs, or "max <period>" for
// no limit.
func readCPUMax(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || f[0] == "max" {
		return 0, false
	}
	period := 100000.0 // the kernel's default when the file gives only a quota
	if len(f) > 1 {
		p, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return 0, false
		}
		period = p
	}
	return ratio(f[0], period)
}

// readCFS parses cgroup v1's cpu.cfs_quota_us (-1 for no limit) and cpu.cfs_period_us.
func readCFS(dir string) (float64, bool) {
	q, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, false
	}
	p, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false
	}
	period, err := strconv.ParseFloat(strings.TrimSpace(string(p)), 64)
	if err != nil {
		return 0, false
	}
	return ratio(strings.TrimSpace(string(q)), period)
}

func ratio(quota string, period float64) (float64, bool) {
	q, err := strconv.ParseFloat(quota, 64)
	if err != nil || q <= 0 || period <= 0 {
		return 0, false
	}
	return q / period, true
}
