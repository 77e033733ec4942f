package compose

import (
	"errors"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

func project(services ...types.ServiceConfig) *types.Project {
	p := &types.Project{Name: "p", Services: types.Services{}}
	for _, s := range services {
		p.Services[s.Name] = s
	}
	return p
}

func svc(name string, ext ...any) types.ServiceConfig {
	s := types.ServiceConfig{Name: name, Image: "busybox"}
	if len(ext) > 0 {
		s.Extensions = types.Extensions{DefaultExtension: ext[0]}
	}
	return s
}

// chosen records a task's choice of default service on p, as Load does.
func chosen(p *types.Project, name string) *types.Project {
	p.Extensions = types.Extensions{DefaultChoiceExtension: name}
	return p
}

const noDefault = `choose default service: 2 services (db, web) and none is the default: choose one for the task, ` +
	`add an agent service beside them, name one "default" or mark one x-default: true`

func TestDefaultService(t *testing.T) {
	tests := []struct {
		name    string
		proj    *types.Project
		want    string
		order   []string
		wantErr string
	}{
		{"named default wins", project(svc("a", true), svc("default"), svc("b")), "default", []string{"default", "a", "b"}, ""},
		{"x-default", project(svc("web"), svc("main", true), svc("db", false)), "main", []string{"main", "db", "web"}, ""},
		{"x-default quoted", project(svc("web"), svc("main", "true")), "main", []string{"main", "web"}, ""},
		{"only service", project(svc("solo")), "solo", []string{"solo"}, ""},
		{"two x-default", project(svc("b", true), svc("a", true), svc("c")), "", nil,
			"choose default service: services a, b are all marked x-default: true; mark only one"},
		{"ambiguous", project(svc("web"), svc("db")), "", nil,
			noDefault},
		{"x-default false only", project(svc("web", false), svc("db")), "", nil,
			noDefault},
		{"chosen wins over the named default", chosen(project(svc("default"), svc("db", true)), "db"), "db", []string{"db", "default"}, ""},
		{"chosen but missing", chosen(project(svc("default")), "web"), "", nil, `choose default service: "web": no such service`},
		{"no services", project(), "", nil, "choose default service: the project has no services"},
		{"nil project", nil, "", nil, "choose default service: the project has no services"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DefaultService(tt.proj)
			order, oerr := ServiceOrder(tt.proj)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("DefaultService error = %v, want exactly %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalidConfig) || !errors.Is(oerr, ErrInvalidConfig) {
					t.Errorf("errors %v / %v are not ErrInvalidConfig", err, oerr)
				}
				var nd *NoDefaultError
				if errors.As(err, &nd) != (tt.wantErr == noDefault) {
					t.Errorf("errors.As(%v, *NoDefaultError) = %v", err, !(tt.wantErr == noDefault))
				}
				return
			}
			if err != nil || oerr != nil {
				t.Fatalf("DefaultService: %v, ServiceOrder: %v", err, oerr)
			}
			if got != tt.want {
				t.Errorf("DefaultService = %q, want %q", got, tt.want)
			}
			if !slices.Equal(order, tt.order) {
				t.Errorf("ServiceOrder = %v, want %v", order, tt.order)
			}
		})
	}
}
