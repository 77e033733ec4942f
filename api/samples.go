package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/composebox/composebox/orchestrator"
)

// SampleRequest is the body of POST /v1/tasks/{task}/samples.
type SampleRequest struct {
	ID                  string            `json:"id,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	ReadyTimeoutSeconds float64           `json:"ready_timeout_seconds,omitempty"`
}

// Sample is a sample as the API reports it.
type Sample struct {
	Project        string `json:"project"`
	ID             string `json:"id"`
	Task           string `json:"task"`
	Lease          string `json:"lease"`
	DefaultService string `json:"default_service"`
	Detached       bool   `json:"detached"`
	// Engine names the engine the sample lives on.
	Engine    string    `json:"engine,omitempty"`
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Sandbox is one service of a sample.
type Sandbox struct {
	Service       string `json:"service"`
	Container     string `json:"container"`
	ContainerName string `json:"container_name"`
	WorkingDir    string `json:"working_dir"`
	User          string `json:"user"`
	Default       bool   `json:"default"`
}

func sandboxesJSON(sm *orchestrator.Sample) []Sandbox {
	out := []Sandbox{}
	for _, sb := range sm.Sandboxes() {
		out = append(out, Sandbox{Service: sb.Service(), Container: sb.ContainerID(), ContainerName: sb.ContainerName(),
			WorkingDir: sb.WorkingDir(), User: sb.User(), Default: sb.IsDefault()})
	}
	return out
}

// sampleJSON reports e; call it with s.mu held (detached may change).
func sampleJSON(e *sampleEntry) Sample {
	out := Sample{Project: e.sample.Project(), ID: e.sample.ID(), Task: e.task, Lease: e.lease,
		Detached: e.detached, Engine: e.sample.Engine(), Sandboxes: sandboxesJSON(e.sample)}
	if d := e.sample.Default(); d != nil {
		out.DefaultService = d.Service()
	}
	return out
}

func (s *Server) createSample(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	t, err := s.task(r.PathValue("task"), leaseID)
	if err != nil {
		return err
	}
	release, err := s.acquire(leaseID, false)
	if err != nil {
		return err
	}
	defer release()
	var req SampleRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, true); err != nil {
		return err
	}
	if req.ReadyTimeoutSeconds < 0 {
		return invalid("init sample: ready_timeout_seconds is negative")
	}
	sm, err := t.task.SampleInit(r.Context(), orchestrator.SampleSpec{ID: req.ID, Metadata: req.Metadata, ReadyTimeout: seconds(req.ReadyTimeoutSeconds)})
	if err != nil {
		return err
	}
	e := &sampleEntry{task: t.id, lease: leaseID, sample: sm}
	s.mu.Lock()
	_, live := s.leases[leaseID]
	_, taskLive := s.tasks[t.id]
	ok := live && taskLive && !s.closed
	if ok {
		s.samples[sm.Project()] = e
	}
	out := sampleJSON(e)
	s.mu.Unlock()
	if !ok {
		_ = sm.Cleanup(context.WithoutCancel(r.Context()))
		return notFound(fmt.Sprintf("init sample of task %s: its lease or task ended while it started", t.id))
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// sample finds a sample of the request's lease by project and counts the request against that
// lease. Another lease's sample is not found.
func (s *Server) sample(r *http.Request) (*sampleEntry, func(), error) {
	leaseID, err := leaseOf(r)
	if err != nil {
		return nil, nil, err
	}
	project := r.PathValue("project")
	s.mu.Lock()
	e, ok := s.samples[project]
	s.mu.Unlock()
	if !ok || e.lease != leaseID {
		return nil, nil, notFound(fmt.Sprintf("sample %s: no such sample of lease %s on this server", project, leaseID))
	}
	release, err := s.acquire(e.lease, s.isDetached(e))
	if err != nil {
		return nil, nil, err
	}
	return e, release, nil
}

func (s *Server) isDetached(e *sampleEntry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.detached
}

// sandbox finds the request's sandbox; release gives back its slot.
func (s *Server) sandbox(r *http.Request) (*orchestrator.Sandbox, func(), error) {
	e, release, err := s.sample(r)
	if err != nil {
		return nil, nil, err
	}
	sb, err := e.sample.Sandbox(r.PathValue("service"))
	if err != nil {
		release()
		return nil, nil, err
	}
	return sb, release, nil
}

func (s *Server) listSamples(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	task := r.URL.Query().Get("task")
	s.mu.Lock()
	out := []Sample{}
	for _, e := range s.samples {
		if e.lease == leaseID && (task == "" || e.task == task) {
			out = append(out, sampleJSON(e))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Sample) int { return cmp.Compare(a.Project, b.Project) })
	writeJSON(w, http.StatusOK, map[string]any{"samples": out})
	return nil
}

func (s *Server) getSample(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	s.mu.Lock()
	out := sampleJSON(e)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSample(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	project := r.PathValue("project")
	s.mu.Lock()
	e, ok := s.samples[project]
	ok = ok && e.lease == leaseID
	if ok {
		delete(s.samples, project)
	}
	s.mu.Unlock()
	if !ok {
		return notFound(fmt.Sprintf("remove sample %s: no such sample of lease %s on this server", project, leaseID))
	}
	if err := e.sample.Cleanup(r.Context()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) detachSample(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	if err := e.sample.Detach(r.Context()); err != nil {
		return err
	}
	s.mu.Lock()
	e.detached = true
	out := sampleJSON(e)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": sandboxesJSON(e.sample)})
	return nil
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request) error {
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	c, err := sb.Connection(r.Context())
	if err != nil {
		return err
	}
	if c.Ports == nil {
		c.Ports = []orchestrator.Port{}
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}
