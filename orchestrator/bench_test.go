package orchestrator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// BenchmarkSampleInitMultiService measures SampleInit until every service is ready (healthy
// where it has a healthcheck), one sample at a time, cleanup excluded. It reports the median
// and p95 beside the mean.
func BenchmarkSampleInitMultiService(b *testing.B) {
	o, err := orchestrator.New(orchestrator.WithStateDir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = o.Close() })
	task, err := o.TaskInit(context.Background(), orchestrator.TaskSpec{Path: project("multi-service")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		s, err := task.SampleInit(context.Background(), orchestrator.SampleSpec{})
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		if err := s.Cleanup(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*95/100].Milliseconds()), "p95-ms")
}
