package compose

import (
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
)

// format: raw takes values as written; a bare KEY takes the project's variable, never the
// process environment.
func TestEnvFileRawFormat(t *testing.T) {
	registerEnvFileFormats()
	t.Setenv("HOSTONLY", "from the process")
	vars := map[string]string{}
	err := dotenv.ParseWithFormat(strings.NewReader("A='q'\nB=$X ${Y}\nGIVEN\nHOSTONLY\n"), "raw.env", vars,
		func(k string) (string, bool) { return map[string]string{"GIVEN": "g"}[k], k == "GIVEN" }, rawEnvFormat)
	if err != nil || vars["A"] != "'q'" || vars["B"] != "$X ${Y}" || vars["GIVEN"] != "g" || len(vars) != 3 {
		t.Errorf("raw = %v, %v", vars, err)
	}
	err = dotenv.ParseWithFormat(strings.NewReader("bad key=1\n"), "raw.env", map[string]string{}, nil, rawEnvFormat)
	if err == nil || !strings.Contains(err.Error(), "raw.env") {
		t.Errorf("a key with a space: %v", err)
	}
}
