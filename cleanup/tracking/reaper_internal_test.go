package tracking

import "testing"

func TestWithoutReaperEnv(t *testing.T) {
	got := withoutReaperEnv([]string{"A=1", reaperOwnerEnv + "=x", "B=2", reaperStageEnv + "=watch"})
	if len(got) != 2 || got[0] != "A=1" || got[1] != "B=2" {
		t.Errorf("withoutReaperEnv = %v", got)
	}
}
