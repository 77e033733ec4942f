package compose

import (
	"io"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/template"
	"github.com/sirupsen/logrus"
)

// The interpolation composebox runs gives what compose-go's gives, value and error, for every
// form compose files use; it only records the unset variables that compose-go would log.
func TestSubstituteMatchesComposeGo(t *testing.T) {
	out := logrus.StandardLogger().Out
	logrus.SetOutput(io.Discard) // compose-go's own run below logs
	t.Cleanup(func() { logrus.SetOutput(out) })
	vars := map[string]string{"SET": "s", "EMPTY": "", "NESTED": "n"}
	m := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	tests := map[string][]string{ // template -> the variables recorded as unset
		"plain $SET ${SET} $EMPTY ${EMPTY}": nil,
		"$UNSET and ${UNSET2}":              {"UNSET", "UNSET2"},
		"$$ and $${SET} and $$SET":          nil,
		"${SET:-d} ${EMPTY:-d} ${UNSET:-d}": nil,
		"${SET-d} ${EMPTY-d} ${UNSET-d}":    nil,
		"${SET:+a} ${EMPTY:+a} ${UNSET:+a}": nil,
		"${SET+a} ${EMPTY+a} ${UNSET+a}":    nil,
		"${UNSET:-${NESTED}}":               nil,
		"${UNSET:-${UNSET_IN_DEFAULT}}":     {"UNSET_IN_DEFAULT"},
		"${SET:-${UNSET_IN_DEFAULT}}":       {"UNSET_IN_DEFAULT"}, // compose-go interpolates the default first
		"${UNSET:-x}/${AFTER}":              {"AFTER"},
		"${UNSET:-a${SET}b}${SET}":          nil,
		"${UNSET:-${NESTED:-${DEEP}}}":      {"DEEP"},
		"${SET:?never} ${SET?never}":        nil,
		"${EMPTY?allowed}":                  nil,
		"${EMPTY:?empty is missing}":        nil,
		"${UNSET?missing $SET}":             nil,
		"${UNSET:?}":                        nil,
		"${SET:-a:-b} ${UNSET:-a-b+c?d}":    nil,
		"${}":                               nil,
		"${ SET}":                           nil,
		"$":                                 nil,
		"a$":                                nil,
		"${SET":                             nil,
		"prefix-${SET}-${UNSET}-suffix":     {"UNSET"},
		"${set} $lower":                     {"lower", "set"},
	}
	for tmpl, wantUnset := range tests {
		want, wantErr := template.Substitute(tmpl, m)
		u := &unsetRecorder{}
		got, err := u.substitute(tmpl, m)
		if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%q: got %q, %v; compose-go %q, %v", tmpl, got, err, want, wantErr)
		}
		if !slices.Equal(u.sorted(), wantUnset) {
			t.Errorf("%q: unset %v, want %v", tmpl, u.sorted(), wantUnset)
		}
	}
}
