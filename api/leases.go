package api

import (
	"fmt"
	"net/http"
	"time"
)

// Lease is a lease as the API reports it.
type Lease struct {
	ID         string    `json:"id"`
	TTLSeconds float64   `json:"ttl_seconds"`
	ExpiresAt  time.Time `json:"expires_at"`
}

type leaseRequest struct {
	TTLSeconds float64 `json:"ttl_seconds"`
}

func leaseJSON(l lease) Lease {
	return Lease{ID: l.id, TTLSeconds: l.ttl.Seconds(), ExpiresAt: l.expires.UTC()}
}

func (s *Server) createLease(w http.ResponseWriter, r *http.Request) error {
	var req leaseRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, true); err != nil {
		return err
	}
	if req.TTLSeconds != 0 && req.TTLSeconds < 1 {
		return invalid(fmt.Sprintf("open lease: ttl_seconds %g: want at least 1", req.TTLSeconds))
	}
	l, err := s.openLease(time.Duration(req.TTLSeconds * float64(time.Second)))
	if err != nil {
		return err
	}
	s.mu.Lock()
	out := leaseJSON(*l)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// ownLease is the lease a request on /v1/leases/{lease} acts on. The lease id in the path is
// the caller's credential; a caller that names a lease of its own in the header may act on that
// one only.
func ownLease(r *http.Request, op string) (string, error) {
	id := r.PathValue("lease")
	if h := r.Header.Get(leaseHeader); h != "" && h != id {
		return "", notFound(fmt.Sprintf("%s %s: no such lease (expired or closed)", op, id))
	}
	return id, nil
}

func (s *Server) heartbeatLease(w http.ResponseWriter, r *http.Request) error {
	id, err := ownLease(r, "heartbeat lease")
	if err != nil {
		return err
	}
	l, err := s.heartbeat(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, leaseJSON(l))
	return nil
}

func (s *Server) deleteLease(w http.ResponseWriter, r *http.Request) error {
	id, err := ownLease(r, "close lease")
	if err != nil {
		return err
	}
	if !s.expire(id, true) {
		return notFound(fmt.Sprintf("close lease %s: no such lease (expired or closed)", id))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
