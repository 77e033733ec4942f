package kubernetes

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"k8s.io/client-go/rest"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// noImages is an image builder that is never called: describing a backend builds nothing.
type noImages struct{}

func (noImages) BaseImage(context.Context) (string, error) { return "", errors.ErrUnsupported }
func (noImages) Build(context.Context, types.ServiceConfig, backend.BuildOptions) (bool, error) {
	return false, errors.ErrUnsupported
}
func (noImages) SaveImages(context.Context, []string, io.Writer) error { return errors.ErrUnsupported }
func (noImages) LoadImages(context.Context, io.Reader) error           { return errors.ErrUnsupported }
func (noImages) Close() error                                          { return nil }

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
users: [{name: u, user: {token: t}}]
`

// A backend describes itself for the reaper's watchdog, which reads back the same options:
// the kubeconfig made absolute (the watchdog runs in /), the registry, the storage class, the
// volume root and the DNS servers. One made from a rest.Config cannot be described.
func TestDescribeRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kc"), []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	b, err := New(Options{Kubeconfig: "kc", Registry: "reg:5000", Images: noImages{}, StorageClass: "fast", VolumeRoot: "/srv/v", DNS: []string{"10.0.0.10", "10.0.0.11"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, err := b.Describe()
	if err != nil {
		t.Fatal(err)
	}
	got, err := OptionsOf(d)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Kubeconfig: filepath.Join(dir, "kc"), Registry: "reg:5000", StorageClass: "fast", VolumeRoot: "/srv/v", DNS: []string{"10.0.0.10", "10.0.0.11"}}
	if d.Kind != "kubernetes" || !reflect.DeepEqual(got, want) {
		t.Errorf("described %+v, read back %+v; want %+v", d, got, want)
	}

	rb, err := New(Options{Config: &rest.Config{Host: "https://127.0.0.1:6443"}, Registry: "reg:5000", Images: noImages{}})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if _, err := rb.Describe(); !errors.Is(err, errdefs.ErrPrerequisite) {
		t.Errorf("describe a backend made from a rest.Config: %v, want ErrPrerequisite", err)
	}
	if _, err := OptionsOf(backend.Description{Kind: "docker"}); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("kubernetes options of a docker description: %v, want ErrInvalidConfig", err)
	}
}
