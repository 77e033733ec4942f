package api

import (
	"context"
	"fmt"
	"net/http"
)

// KindUnsupported is a verb the server's backend cannot do (fork, snapshot or reset on
// Kubernetes): the message names the backend and says why.
const KindUnsupported = "unsupported"

// ForkRequest is the body of POST /v1/samples/{project}/fork.
type ForkRequest struct {
	// N is how many forks to start (default 1).
	N int `json:"n,omitempty"`
}

// ForkResult is the answer of a fork: the source's project and the new samples, which belong
// to the same lease and task as the source.
type ForkResult struct {
	Source string   `json:"source"`
	Forks  []Sample `json:"forks"`
}

// SnapshotRequest is the body of POST /v1/samples/{project}/snapshots and of
// POST /v1/samples/{project}/reset.
type SnapshotRequest struct {
	Name string `json:"name"`
}

// Snapshot is a recorded state of a sample.
type Snapshot struct {
	Name    string `json:"name"`
	Project string `json:"project"`
}

// maxForks bounds one request's forks: each is a whole sample.
const maxForks = 64

func (s *Server) forkSample(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	req := ForkRequest{N: 1}
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, true); err != nil {
		return err
	}
	if req.N < 1 || req.N > maxForks {
		return invalid(fmt.Sprintf("fork %s: n is %d, want 1 to %d", e.sample.Project(), req.N, maxForks))
	}
	forks, err := e.sample.Fork(r.Context(), req.N)
	if err != nil {
		return err
	}
	out := ForkResult{Source: e.sample.Project(), Forks: []Sample{}}
	entries := make([]*sampleEntry, len(forks))
	s.mu.Lock()
	_, live := s.leases[e.lease]
	_, taskLive := s.tasks[e.task]
	ok := live && taskLive && !s.closed
	for i, f := range forks {
		entries[i] = &sampleEntry{task: e.task, lease: e.lease, sample: f}
		if ok {
			s.samples[f.Project()] = entries[i]
		}
		out.Forks = append(out.Forks, sampleJSON(entries[i]))
	}
	s.mu.Unlock()
	if !ok {
		for _, f := range forks {
			_ = f.Cleanup(context.WithoutCancel(r.Context()))
		}
		return notFound(fmt.Sprintf("fork %s: its lease or task ended while the forks started", e.sample.Project()))
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) snapshotSample(w http.ResponseWriter, r *http.Request) error {
	return s.onSnapshot(w, r, func(e *sampleEntry, name string) error {
		sn, err := e.sample.Snapshot(r.Context(), name)
		if err == nil {
			writeJSON(w, http.StatusCreated, Snapshot{Name: sn.Name(), Project: sn.Project()})
		}
		return err
	})
}

func (s *Server) resetSample(w http.ResponseWriter, r *http.Request) error {
	return s.onSnapshot(w, r, func(e *sampleEntry, name string) error {
		if err := e.sample.Reset(r.Context(), name); err != nil {
			return err
		}
		s.mu.Lock()
		out := sampleJSON(e)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// onSnapshot runs do on the request's sample, held for the request, with the snapshot name
// its body gives.
func (s *Server) onSnapshot(w http.ResponseWriter, r *http.Request, do func(e *sampleEntry, name string) error) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	var req SnapshotRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, false); err != nil {
		return err
	}
	return do(e, req.Name)
}
