package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// TaskRequest is the body of POST /v1/tasks.
type TaskRequest struct {
	Name                string            `json:"name,omitempty"`
	ComposeYAML         string            `json:"compose_yaml,omitempty"`
	Path                string            `json:"path,omitempty"`
	Files               []string          `json:"files,omitempty"`
	WorkingDir          string            `json:"working_dir,omitempty"`
	Env                 map[string]string `json:"env,omitempty"`
	PassEnv             []string          `json:"pass_env,omitempty"`
	Profiles            []string          `json:"profiles,omitempty"`
	Policy              *PolicyRequest    `json:"policy,omitempty"`
	DefaultService      string            `json:"default_service,omitempty"`
	AgentImage          string            `json:"agent_image,omitempty"`
	ImageOverrides      map[string]string `json:"image_overrides,omitempty"`
	Prebuilt            bool              `json:"prebuilt,omitempty"`
	ReadyTimeoutSeconds float64           `json:"ready_timeout_seconds,omitempty"`
	// Warm keeps that many ready samples of the task, which sample inits take first.
	Warm int `json:"warm,omitempty"`
}

// PolicyRequest are a task's policy opt-ins, as `--allow`, `--allow-cap` and
// `--allow-mount-root` give them on the command line.
type PolicyRequest struct {
	Allow             []string `json:"allow,omitempty"`
	AllowCapabilities []string `json:"allow_capabilities,omitempty"`
	AllowedMountRoots []string `json:"allowed_mount_roots,omitempty"`
	// Egress narrows the task's egress allowlist (NAME[:PORT], as --egress), within the
	// server's own --egress when it has one.
	Egress []string `json:"egress,omitempty"`
}

// Task is a task as the API reports it.
type Task struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Lease          string            `json:"lease"`
	DefaultService string            `json:"default_service"`
	Services       []string          `json:"services"`
	Images         map[string]string `json:"images,omitempty"`
	// Pool is the task's warm pool, when it keeps one or was refused one.
	Pool *Pool `json:"pool,omitempty"`
}

// Pool is a task's warm pool as the API reports it.
type Pool struct {
	Target   int    `json:"target"`
	Ready    int    `json:"ready"`
	Filling  int    `json:"filling"`
	Poolable bool   `json:"poolable"`
	Reason   string `json:"reason,omitempty"`
	Failures int    `json:"failures"`
}

// spec turns the request into a task spec, within the server's ceiling. Paths name the
// server's host, whose working directory means nothing to a client, so they must be absolute.
func (req TaskRequest) spec(c Ceiling) (orchestrator.TaskSpec, error) {
	const op = "init task"
	if req.ComposeYAML != "" && req.Path != "" {
		return orchestrator.TaskSpec{}, invalid(op + ": give compose_yaml or path, not both")
	}
	for _, p := range append([]string{req.Path, req.WorkingDir}, req.Files...) {
		if p != "" && !filepath.IsAbs(p) {
			return orchestrator.TaskSpec{}, invalid(fmt.Sprintf("%s: path %q: want an absolute path on the server's host", op, p))
		}
	}
	if req.ReadyTimeoutSeconds < 0 {
		return orchestrator.TaskSpec{}, invalid(op + ": ready_timeout_seconds is negative")
	}
	if req.Warm < 0 {
		return orchestrator.TaskSpec{}, invalid(op + ": warm is negative")
	}
	spec := orchestrator.TaskSpec{
		Name:           req.Name,
		Path:           req.Path,
		Files:          req.Files,
		Environment:    req.Env,
		Profiles:       req.Profiles,
		DefaultService: req.DefaultService,
		AgentImage:     req.AgentImage,
		ImageOverrides: req.ImageOverrides,
		Prebuilt:       req.Prebuilt,
		ReadyTimeout:   seconds(req.ReadyTimeoutSeconds),
		Warm:           req.Warm,
	}
	if req.ComposeYAML != "" {
		spec.YAML = []byte(req.ComposeYAML)
	}
	if err := c.narrow(req, &spec); err != nil {
		return orchestrator.TaskSpec{}, err
	}
	return spec, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func (s *Server) taskJSON(t *taskEntry) Task {
	out := Task{ID: t.id, Name: t.task.Name(), Lease: t.lease, DefaultService: t.task.DefaultService(), Images: t.task.Images()}
	if st := t.task.PoolStatus(); st.Target > 0 || !st.Poolable {
		out.Pool = &Pool{Target: st.Target, Ready: st.Ready, Filling: st.Filling, Poolable: st.Poolable, Reason: st.Reason, Failures: st.Failures}
	}
	if p := t.task.Project(); p != nil {
		out.Services = p.ServiceNames()
		slices.Sort(out.Services)
	}
	if out.Services == nil {
		out.Services = []string{}
	}
	return out
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	release, err := s.acquire(leaseID, false)
	if err != nil {
		return err
	}
	defer release()
	var req TaskRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, false); err != nil {
		return err
	}
	spec, err := req.spec(s.opts.Ceiling)
	if err != nil {
		return err
	}
	spec.Observer = s.events.observer(leaseID)
	task, err := s.o.TaskInit(r.Context(), spec)
	if err != nil {
		return s.opts.Ceiling.serverOptIns(err)
	}
	e := &taskEntry{id: task.Name() + "-" + newID("")[:8], lease: leaseID, task: task}
	s.mu.Lock()
	_, live := s.leases[leaseID]
	if live && !s.closed {
		s.tasks[e.id] = e
	}
	s.mu.Unlock()
	if !live || s.isClosed() {
		_ = task.Cleanup(context.WithoutCancel(r.Context()))
		return notFound(fmt.Sprintf("init task %s: lease %s ended while the task was being set up", task.Name(), leaseID))
	}
	writeJSON(w, http.StatusCreated, s.taskJSON(e))
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// task finds a task of lease by id. Another lease's task is not found.
func (s *Server) task(id, lease string) (*taskEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.lease != lease {
		return nil, notFound(fmt.Sprintf("task %s: no such task of lease %s on this server", id, lease))
	}
	return t, nil
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	out := make([]Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		if t.lease == leaseID {
			out = append(out, s.taskJSON(t))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out})
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	t, err := s.task(r.PathValue("task"), leaseID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.taskJSON(t))
	return nil
}

func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	id := r.PathValue("task")
	s.mu.Lock()
	t, ok := s.tasks[id]
	ok = ok && t.lease == leaseID
	if ok {
		delete(s.tasks, id)
		s.forgetSamplesOf(id)
	}
	s.mu.Unlock()
	if !ok {
		return notFound(fmt.Sprintf("clean up task %s: no such task of lease %s on this server", id, leaseID))
	}
	if err := t.task.Cleanup(r.Context()); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
