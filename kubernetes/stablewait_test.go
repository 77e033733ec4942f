package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The wait before the look into a running container is what is left of stableUptime since its
// reported start, a second added for the start's truncation, and never more than stableUptime.
func TestStableWait(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	running := func(started time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}}
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want time.Duration
	}{
		{"started this second", running(now), stableUptime},
		{"started 1.1 s ago", running(now.Add(-1100 * time.Millisecond)), 150 * time.Millisecond},
		{"started 5 s ago", running(now.Add(-5 * time.Second)), 0},
		{"no start reported", &corev1.Pod{}, stableUptime},
	} {
		if got := stableWait(c.pod, now); got != c.want {
			t.Errorf("%s: waits %v, want %v", c.name, got, c.want)
		}
	}
}
