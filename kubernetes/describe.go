package kubernetes

import (
	"strings"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The settings of a Description of this backend, as Describe writes them and OptionsOf reads
// them: the Options a watchdog needs to reach the same cluster and remove its owner's samples.
const (
	settingKubeconfig   = "kubeconfig"
	settingRegistry     = "registry"
	settingStorageClass = "storage_class"
	settingVolumeRoot   = "volume_root"
	settingDNS          = "dns"
)

// Describe says how to make this backend again in another process (the reaper's watchdog):
// its kubeconfig file, registry, storage class, volume root and DNS servers. A backend made
// from a rest.Config has no file another process could read it from: ErrPrerequisite.
func (b *Backend) Describe() (backend.Description, error) {
	if b.kubeconfig == "" {
		return backend.Description{}, errdefs.New(errdefs.ErrPrerequisite, "describe kubernetes backend: made from a rest.Config, not a kubeconfig file another process can read")
	}
	s := map[string]string{settingKubeconfig: b.kubeconfig, settingRegistry: b.registry}
	if b.storageClass != "" {
		s[settingStorageClass] = b.storageClass
	}
	if b.volumeRoot != "" {
		s[settingVolumeRoot] = b.volumeRoot
	}
	if len(b.dns) > 0 {
		addrs := make([]string, len(b.dns))
		for i, a := range b.dns {
			addrs[i] = a.String()
		}
		s[settingDNS] = strings.Join(addrs, ",")
	}
	return backend.Description{Kind: b.Kind(), Settings: s}, nil
}

// OptionsOf reads back the Options a Description of a Kubernetes backend (Describe) carries.
// Images, Docker and Logger are left for the caller; a description of another kind is
// ErrInvalidConfig.
func OptionsOf(d backend.Description) (Options, error) {
	if d.Kind != "kubernetes" {
		return Options{}, errdefs.New(errdefs.ErrInvalidConfig, "kubernetes options of a "+d.Kind+" backend's description")
	}
	s := d.Settings
	o := Options{Kubeconfig: s[settingKubeconfig], Registry: s[settingRegistry], StorageClass: s[settingStorageClass], VolumeRoot: s[settingVolumeRoot]}
	if dns := s[settingDNS]; dns != "" {
		o.DNS = strings.Split(dns, ",")
	}
	return o, nil
}

var _ backend.Describer = (*Backend)(nil)
