package tracking

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/composebox/composebox/internal/hostdir"
	"github.com/composebox/composebox/orchestrator/backend"
)

// StateDirEnv overrides the default state directory.
const StateDirEnv = "COMPOSEBOX_STATE_DIR"

// SampleDir is where a sample's own directory lives under a state dir:
// <stateDir>/sample-dirs/<project>, beside the state cache's records. Whatever removes the
// project (its cleanup, `composebox down` or `cleanup`, the reaper) removes it too.
func SampleDir(stateDir, project string) string {
	return filepath.Join(stateDir, "sample-dirs", project)
}

// DefaultStateDir is where composebox keeps its state cache: $COMPOSEBOX_STATE_DIR, else
// $XDG_DATA_HOME/composebox, else ~/.local/share/composebox.
func DefaultStateDir() string {
	if d := os.Getenv(StateDirEnv); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "composebox")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "composebox")
	}
	return filepath.Join(os.TempDir(), "composebox")
}

// SampleRecord is the state cache's entry for one sample.
type SampleRecord struct {
	Project string    `json:"project"`
	Task    string    `json:"task"`
	Sample  string    `json:"sample"`
	Owner   string    `json:"owner"`
	Config  string    `json:"config,omitempty"`
	Created time.Time `json:"created"`
}

// TaskRecord is the state cache's entry for a task held by a process: it keeps the task's
// images from image hygiene while the process lives, even between samples.
type TaskRecord struct {
	Task    string    `json:"task"`
	Owner   string    `json:"owner"`
	Config  string    `json:"config,omitempty"`
	Created time.Time `json:"created"`
}

// Cache is composebox's state cache: one small JSON file per sample and per held task, under
// <dir>/samples and <dir>/tasks, each written atomically, so that concurrent processes never
// lock each other. It is only a cache: the engine's labels are the truth, and every verb works
// with the directory deleted. The zero value is unusable; use OpenCache.
type Cache struct{ dir string }

// OpenCache returns the cache in dir. It does no I/O: directories are made on first write.
func OpenCache(dir string) *Cache { return &Cache{dir: dir} }

// PutSample records a sample.
func (c *Cache) PutSample(r SampleRecord) error {
	return c.write(filepath.Join(c.dir, "samples", fileName(r.Project)), r)
}

// DeleteSample forgets a sample. Forgetting an unknown one is not an error.
func (c *Cache) DeleteSample(project string) error {
	return remove(filepath.Join(c.dir, "samples", fileName(project)))
}

// Samples returns every recorded sample. Unreadable entries are skipped.
func (c *Cache) Samples() ([]SampleRecord, error) {
	return readAll[SampleRecord](filepath.Join(c.dir, "samples"))
}

// PutTask records that owner holds task.
func (c *Cache) PutTask(r TaskRecord) error {
	return c.write(filepath.Join(c.dir, "tasks", taskFile(r.Task, r.Owner)), r)
}

// DeleteTask forgets that owner holds task.
func (c *Cache) DeleteTask(task, owner string) error {
	return remove(filepath.Join(c.dir, "tasks", taskFile(task, owner)))
}

// Tasks returns every recorded task hold. Unreadable entries are skipped.
func (c *Cache) Tasks() ([]TaskRecord, error) {
	return readAll[TaskRecord](filepath.Join(c.dir, "tasks"))
}

// Prune forgets the samples that exist neither in the engine (exists reports which do) nor in
// a live process, and the task holds of processes that are no longer alive.
func (c *Cache) Prune(exists func(project string) bool) error {
	var errs []error
	samples, err := c.Samples()
	errs = append(errs, err)
	for _, r := range samples {
		if !exists(r.Project) && OwnerStatus(r.Owner) != backend.StatusAlive {
			errs = append(errs, c.DeleteSample(r.Project))
		}
	}
	tasks, err := c.Tasks()
	errs = append(errs, err)
	for _, r := range tasks {
		if OwnerStatus(r.Owner) == backend.StatusStale {
			errs = append(errs, c.DeleteTask(r.Task, r.Owner))
		}
	}
	return errors.Join(errs...)
}

func (c *Cache) write(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write state %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write state %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write state %s: %w", path, err)
	}
	return nil
}

func remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete state: %w", err)
	}
	return nil
}

func readAll[T any](dir string) ([]T, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var out []T
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		var v T
		if json.Unmarshal(b, &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// fileName is a project name as a file name: project names are [a-z0-9][a-z0-9_-]*, anything
// else is hashed.
func fileName(project string) string {
	for _, r := range project {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return hash(project) + ".json"
		}
	}
	if project == "" {
		return hash("") + ".json"
	}
	return project + ".json"
}

func taskFile(task, owner string) string { return hash(task+"\x00"+owner) + ".json" }

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// Forget drops what a state dir keeps of a project that was removed: the sample's own
// directory (SampleDir) and its state cache record. Whatever removes a project calls it once
// the project is gone; a project it knows nothing of is nothing to do.
func Forget(stateDir, project string) error {
	dir := SampleDir(stateDir, project)
	// The directory is a nosuid,nodev mount of itself (orchestrator's makeSampleDirs); the
	// removal follows no symlink and opens no file an agent left there.
	if err := hostdir.Release(dir); err != nil {
		return fmt.Errorf("remove the directory of %s: %w", project, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the directory of %s: %w", project, err)
	}
	if err := OpenCache(stateDir).DeleteSample(project); err != nil {
		return fmt.Errorf("forget %s in the state cache: %w", project, err)
	}
	return nil
}
