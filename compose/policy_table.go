package compose

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// The policy table classifies every field of compose-go's types by its YAML path: services.*
// for any service, [] for the elements of a list (services.*.volumes[].source). A field is
//   - walked: a structure whose own fields are classified below it;
//   - allowed: inert to the host (image, command, healthcheck, ports, ...);
//   - checked by a named rule (capabilities, namespaces, host paths, ...);
//   - denied, with the opt-in that allows it, or none.
// The checker walks a loaded project by reflection, and any field set in the project whose path
// is not in the table is denied with its path: a field a newer compose-go adds stays denied
// until it is classified here (TestPolicyTableCoversComposeTypes fails first). Extensions (x-*)
// are inert to the engine and always allowed.

type fieldClass int

const (
	classWalk fieldClass = iota
	classAllow
	classDeny
	classRule
)

type fieldEntry struct {
	class fieldClass
	kind  string // classDeny: the opt-in ("" when nothing allows it)
	rule  string // classRule: the rule's name (policyRules)
	walk  bool   // classRule: the structure is also walked, its fields classified below it
	why   string // classAllow: why it is inert; classDeny: what it does
}

func walk() fieldEntry                 { return fieldEntry{class: classWalk} }
func allow(why string) fieldEntry      { return fieldEntry{class: classAllow, why: why} }
func deny(kind, why string) fieldEntry { return fieldEntry{class: classDeny, kind: kind, why: why} }
func rule(name string) fieldEntry      { return fieldEntry{class: classRule, rule: name} }
func ruleWalk(name string) fieldEntry  { return fieldEntry{class: classRule, rule: name, walk: true} }

const (
	inContainer = "acts inside the container"
	resources   = "a resource setting of the container"
	swarmOnly   = "used by swarm only; compose ignores it"
	metadata    = "metadata"
	adapted     = "allowed: normalisation gives each sample its own"
)

// policyTable is the allowlist. Keys are YAML paths; include[] is the top-level include list,
// which the loader consumes (its files are checked before they are read).
var policyTable = map[string]fieldEntry{
	"name":     allow("the project name; each sample gets its own"),
	"services": walk(),
	"networks": walk(),
	"volumes":  walk(),
	"secrets":  walk(),
	"configs":  walk(),
	"models":   deny("providers", "compose runs the Docker Model Runner on the host for models"),

	"include[].path":              rule("include-file"),
	"include[].project_directory": rule("include-file"),
	"include[].env_file":          rule("include-file"),

	// A service.
	"services.*.name":                allow(metadata),
	"services.*.profiles":            allow(metadata),
	"services.*.annotations":         deny("runtime", "OCI annotations, which a runtime may act on"),
	"services.*.attach":              allow("log attachment; composebox never attaches"),
	"services.*.build":               walk(),
	"services.*.develop":             walk(),
	"services.*.blkio_config":        walk(),
	"services.*.cap_add":             rule("capabilities"),
	"services.*.cap_drop":            allow("drops capabilities"),
	"services.*.cgroup_parent":       deny("cgroup-parent", "places the container in a cgroup of the host's choosing"),
	"services.*.cgroup":              rule("namespaces"),
	"services.*.cpu_count":           allow(resources),
	"services.*.cpu_percent":         allow(resources),
	"services.*.cpu_period":          allow(resources),
	"services.*.cpu_quota":           allow(resources),
	"services.*.cpu_rt_period":       deny("host-priority", "realtime CPU scheduling, ahead of the host's processes"),
	"services.*.cpu_rt_runtime":      deny("host-priority", "realtime CPU scheduling, ahead of the host's processes"),
	"services.*.cpus":                allow(resources),
	"services.*.cpuset":              allow(resources),
	"services.*.cpu_shares":          allow(resources),
	"services.*.command":             allow(inContainer),
	"services.*.configs":             walk(),
	"services.*.container_name":      allow(adapted),
	"services.*.credential_spec":     deny("", "a Windows credential spec, read from the host"),
	"services.*.depends_on":          walk(),
	"services.*.deploy":              walk(),
	"services.*.device_cgroup_rules": deny("devices", "access to host devices"),
	"services.*.devices":             deny("devices", "direct access to a host device"),
	"services.*.dns":                 allow(inContainer),
	"services.*.dns_opt":             allow(inContainer),
	"services.*.dns_search":          allow(inContainer),
	"services.*.dockerfile":          deny("", "not part of the compose file format: use build.dockerfile"),
	"services.*.domainname":          allow(inContainer),
	"services.*.entrypoint":          allow(inContainer),
	"services.*.provider":            deny("providers", "compose runs the provider's program on the host"),
	"services.*.environment":         allow(inContainer),
	"services.*.env_file":            walk(),
	"services.*.expose":              allow(inContainer),
	"services.*.extends":             walk(),
	"services.*.external_links":      deny("other-containers", "links to containers outside the sample"),
	"services.*.extra_hosts":         allow(inContainer),
	"services.*.group_add":           allow(inContainer),
	"services.*.gpus":                deny("devices", "the host's GPUs"),
	"services.*.hostname":            allow(inContainer),
	"services.*.healthcheck":         walk(),
	"services.*.image":               allow("a local image: composebox never pulls"),
	"services.*.init":                allow(inContainer),
	"services.*.ipc":                 rule("namespaces"),
	"services.*.isolation":           rule("runtime"),
	"services.*.labels":              rule("labels"),
	"services.*.label_file":          rule("label-file"),
	"services.*.links":               allow("links to services of the sample"),
	"services.*.logging":             walk(),
	"services.*.log_driver":          rule("logging-driver"),
	"services.*.log_opt":             allow("options of an allowed logging driver"),
	"services.*.mem_limit":           allow(resources),
	"services.*.mem_reservation":     allow(resources),
	"services.*.memswap_limit":       allow(resources),
	"services.*.mem_swappiness":      allow(resources),
	"services.*.mac_address":         allow(inContainer),
	"services.*.models":              deny("providers", "compose runs the Docker Model Runner on the host for models"),
	"services.*.net":                 rule("namespaces"),
	"services.*.network_mode":        rule("namespaces"),
	"services.*.networks":            walk(),
	"services.*.oom_kill_disable":    deny("host-priority", "the kernel kills host processes rather than this container"),
	"services.*.oom_score_adj":       rule("oom-score"),
	"services.*.pid":                 rule("namespaces"),
	"services.*.pids_limit":          allow(resources),
	"services.*.platform":            allow("selects a local image variant"),
	"services.*.ports":               walk(),
	"services.*.privileged":          deny("privileged", "full access to the host"),
	"services.*.pull_policy":         rule("pull-policy"),
	"services.*.read_only":           allow(inContainer),
	"services.*.restart":             allow(inContainer),
	"services.*.runtime":             rule("runtime"),
	"services.*.scale":               allow("replicas within the sample"),
	"services.*.secrets":             walk(),
	"services.*.security_opt":        rule("security-opt"),
	"services.*.shm_size":            allow(resources),
	"services.*.stdin_open":          allow(inContainer),
	"services.*.stop_grace_period":   allow(inContainer),
	"services.*.stop_signal":         allow(inContainer),
	"services.*.storage_opt":         allow(resources),
	"services.*.sysctls":             rule("sysctls"),
	"services.*.tmpfs":               allow(inContainer),
	"services.*.tty":                 allow(inContainer),
	"services.*.ulimits":             ruleWalk("ulimits"),
	"services.*.use_api_socket":      deny("docker-socket", "mounts the docker socket"),
	"services.*.user":                allow(inContainer),
	"services.*.userns_mode":         rule("namespaces"),
	"services.*.uts":                 rule("namespaces"),
	"services.*.volume_driver":       deny("volume-driver-opts", "a volume driver other than local"),
	"services.*.volumes":             walk(),
	"services.*.volumes_from":        rule("volumes-from"),
	"services.*.working_dir":         allow(inContainer),
	"services.*.post_start":          walk(),
	"services.*.pre_stop":            walk(),

	// build
	"services.*.build.context":             rule("build-context"),
	"services.*.build.dockerfile":          rule("dockerfile"),
	"services.*.build.dockerfile_inline":   allow("a Dockerfile given inline"),
	"services.*.build.entitlements":        rule("entitlements"),
	"services.*.build.args":                allow("build arguments"),
	"services.*.build.provenance":          allow("BuildKit attestations; the classic builder ignores them"),
	"services.*.build.sbom":                allow("BuildKit attestations; the classic builder ignores them"),
	"services.*.build.ssh":                 deny("", "forwards the host's SSH agent or keys into the build"),
	"services.*.build.labels":              rule("labels"),
	"services.*.build.cache_from":          allow("ignored: the classic builder imports no cache"),
	"services.*.build.cache_to":            allow("ignored: the classic builder exports no cache"),
	"services.*.build.no_cache":            allow("build setting"),
	"services.*.build.additional_contexts": rule("additional-contexts"),
	"services.*.build.pull":                allow("ignored: composebox's builds never pull"),
	"services.*.build.extra_hosts":         allow("build setting"),
	"services.*.build.isolation":           rule("runtime"),
	"services.*.build.network":             rule("build-network"),
	"services.*.build.target":              allow("build setting"),
	"services.*.build.secrets":             walk(),
	"services.*.build.secrets[].source":    allow("a project secret, checked where it is defined"),
	"services.*.build.secrets[].target":    allow("build setting"),
	"services.*.build.secrets[].uid":       allow("build setting"),
	"services.*.build.secrets[].gid":       allow("build setting"),
	"services.*.build.secrets[].mode":      allow("build setting"),
	"services.*.build.shm_size":            allow("build setting"),
	"services.*.build.tags":                allow("ignored: composebox tags builds itself"),
	"services.*.build.ulimits":             ruleWalk("ulimits"),
	"services.*.build.ulimits.*.single":    allow("build setting"),
	"services.*.build.ulimits.*.soft":      allow("build setting"),
	"services.*.build.ulimits.*.hard":      allow("build setting"),
	"services.*.build.platforms":           allow("build setting"),
	"services.*.build.privileged":          deny("privileged", "privileged build steps"),

	// develop (compose watch, which composebox never runs)
	"services.*.develop.watch":                         walk(),
	"services.*.develop.watch[].path":                  rule("develop-path"),
	"services.*.develop.watch[].action":                allow("compose watch; composebox never runs it"),
	"services.*.develop.watch[].target":                allow("compose watch; composebox never runs it"),
	"services.*.develop.watch[].exec":                  walk(),
	"services.*.develop.watch[].exec.command":          allow(inContainer),
	"services.*.develop.watch[].exec.user":             allow(inContainer),
	"services.*.develop.watch[].exec.privileged":       deny("privileged", "a privileged command in the container"),
	"services.*.develop.watch[].exec.working_dir":      allow(inContainer),
	"services.*.develop.watch[].exec.environment":      allow(inContainer),
	"services.*.develop.watch[].include":               allow("compose watch; composebox never runs it"),
	"services.*.develop.watch[].ignore":                allow("compose watch; composebox never runs it"),
	"services.*.develop.watch[].initial_sync":          allow("compose watch; composebox never runs it"),
	"services.*.blkio_config.weight":                   allow(resources),
	"services.*.blkio_config.weight_device":            walk(),
	"services.*.blkio_config.weight_device[].path":     allow("throttles a host device; grants no access"),
	"services.*.blkio_config.weight_device[].weight":   allow(resources),
	"services.*.blkio_config.device_read_bps":          walk(),
	"services.*.blkio_config.device_read_bps[].path":   allow("throttles a host device; grants no access"),
	"services.*.blkio_config.device_read_bps[].rate":   allow(resources),
	"services.*.blkio_config.device_read_iops":         walk(),
	"services.*.blkio_config.device_read_iops[].path":  allow("throttles a host device; grants no access"),
	"services.*.blkio_config.device_read_iops[].rate":  allow(resources),
	"services.*.blkio_config.device_write_bps":         walk(),
	"services.*.blkio_config.device_write_bps[].path":  allow("throttles a host device; grants no access"),
	"services.*.blkio_config.device_write_bps[].rate":  allow(resources),
	"services.*.blkio_config.device_write_iops":        walk(),
	"services.*.blkio_config.device_write_iops[].path": allow("throttles a host device; grants no access"),
	"services.*.blkio_config.device_write_iops[].rate": allow(resources),
	"services.*.configs[].source":                      allow("a project config, checked where it is defined"),
	"services.*.configs[].target":                      allow(inContainer),
	"services.*.configs[].uid":                         allow(inContainer),
	"services.*.configs[].gid":                         allow(inContainer),
	"services.*.configs[].mode":                        allow(inContainer),
	"services.*.secrets[].source":                      allow("a project secret, checked where it is defined"),
	"services.*.secrets[].target":                      allow(inContainer),
	"services.*.secrets[].uid":                         allow(inContainer),
	"services.*.secrets[].gid":                         allow(inContainer),
	"services.*.secrets[].mode":                        allow(inContainer),
	"services.*.depends_on.*.condition":                allow("start order within the sample"),
	"services.*.depends_on.*.restart":                  allow("start order within the sample"),
	"services.*.depends_on.*.required":                 allow("start order within the sample"),
	"services.*.env_file[].path":                       rule("env-file"),
	"services.*.env_file[].required":                   allow("whether the file must exist"),
	"services.*.env_file[].format":                     allow("the file's format"),
	"services.*.extends.file":                          rule("extends-file"),
	"services.*.extends.service":                       allow("a service of the extended file"),
	"services.*.healthcheck.test":                      allow(inContainer),
	"services.*.healthcheck.timeout":                   allow(inContainer),
	"services.*.healthcheck.interval":                  allow(inContainer),
	"services.*.healthcheck.retries":                   allow(inContainer),
	"services.*.healthcheck.start_period":              allow(inContainer),
	"services.*.healthcheck.start_interval":            allow(inContainer),
	"services.*.healthcheck.disable":                   allow(inContainer),
	"services.*.logging.driver":                        rule("logging-driver"),
	"services.*.logging.options":                       allow("options of an allowed logging driver"),
	"services.*.networks.*.aliases":                    allow("names within the sample's networks"),
	"services.*.networks.*.driver_opts":                deny("network-drivers", "options of the network driver for this endpoint"),
	"services.*.networks.*.gw_priority":                allow("address setting within the sample"),
	"services.*.networks.*.interface_name":             allow("address setting within the sample"),
	"services.*.networks.*.ipv4_address":               allow("address setting within the sample"),
	"services.*.networks.*.ipv6_address":               allow("address setting within the sample"),
	"services.*.networks.*.link_local_ips":             allow("address setting within the sample"),
	"services.*.networks.*.mac_address":                allow("address setting within the sample"),
	"services.*.networks.*.priority":                   allow("address setting within the sample"),
	"services.*.ports[].name":                          allow(metadata),
	"services.*.ports[].mode":                          allow("published port"),
	"services.*.ports[].host_ip":                       rule("host-ip"),
	"services.*.ports[].target":                        allow("published port"),
	"services.*.ports[].published":                     allow(adapted),
	"services.*.ports[].protocol":                      allow("published port"),
	"services.*.ports[].app_protocol":                  allow("published port"),
	"services.*.ulimits.*.single":                      allow(resources),
	"services.*.ulimits.*.soft":                        allow(resources),
	"services.*.ulimits.*.hard":                        allow(resources),
	"services.*.volumes[].type":                        rule("volume-type"),
	"services.*.volumes[].source":                      rule("bind-source"),
	"services.*.volumes[].target":                      allow(inContainer),
	"services.*.volumes[].read_only":                   allow(inContainer),
	"services.*.volumes[].consistency":                 allow("ignored on Linux"),
	"services.*.volumes[].bind":                        walk(),
	"services.*.volumes[].bind.selinux":                allow("relabels the bind's own files, inside the allowed roots"),
	"services.*.volumes[].bind.propagation":            rule("propagation"),
	"services.*.volumes[].bind.create_host_path":       allow("creates a missing source, inside the allowed roots"),
	"services.*.volumes[].bind.recursive":              allow("how submounts of the source are mounted"),
	"services.*.volumes[].volume":                      walk(),
	"services.*.volumes[].volume.labels":               rule("labels"),
	"services.*.volumes[].volume.nocopy":               allow(inContainer),
	"services.*.volumes[].volume.subpath":              allow("a path inside the volume"),
	"services.*.volumes[].tmpfs":                       walk(),
	"services.*.volumes[].tmpfs.size":                  allow(resources),
	"services.*.volumes[].tmpfs.mode":                  allow(inContainer),
	"services.*.volumes[].image":                       walk(),
	"services.*.volumes[].image.subpath":               allow("a path inside an image volume, which volume-type checks"),
	"services.*.post_start[].command":                  allow(inContainer),
	"services.*.post_start[].user":                     allow(inContainer),
	"services.*.post_start[].privileged":               deny("privileged", "a privileged command in the container"),
	"services.*.post_start[].working_dir":              allow(inContainer),
	"services.*.post_start[].environment":              allow(inContainer),
	"services.*.pre_stop[].command":                    allow(inContainer),
	"services.*.pre_stop[].user":                       allow(inContainer),
	"services.*.pre_stop[].privileged":                 deny("privileged", "a privileged command in the container"),
	"services.*.pre_stop[].working_dir":                allow(inContainer),
	"services.*.pre_stop[].environment":                allow(inContainer),

	// deploy
	"services.*.deploy.mode":                                                                    allow(swarmOnly),
	"services.*.deploy.replicas":                                                                allow("replicas within the sample"),
	"services.*.deploy.labels":                                                                  rule("labels"),
	"services.*.deploy.update_config":                                                           walk(),
	"services.*.deploy.rollback_config":                                                         walk(),
	"services.*.deploy.resources":                                                               walk(),
	"services.*.deploy.resources.limits":                                                        walk(),
	"services.*.deploy.resources.reservations":                                                  walk(),
	"services.*.deploy.restart_policy":                                                          walk(),
	"services.*.deploy.placement":                                                               walk(),
	"services.*.deploy.endpoint_mode":                                                           allow(swarmOnly),
	"services.*.deploy.placement.constraints":                                                   allow(swarmOnly),
	"services.*.deploy.placement.preferences":                                                   walk(),
	"services.*.deploy.placement.preferences[].spread":                                          allow(swarmOnly),
	"services.*.deploy.placement.max_replicas_per_node":                                         allow(swarmOnly),
	"services.*.deploy.restart_policy.condition":                                                allow(inContainer),
	"services.*.deploy.restart_policy.delay":                                                    allow(inContainer),
	"services.*.deploy.restart_policy.max_attempts":                                             allow(inContainer),
	"services.*.deploy.restart_policy.window":                                                   allow(inContainer),
	"services.*.deploy.resources.limits.cpus":                                                   allow(resources),
	"services.*.deploy.resources.limits.memory":                                                 allow(resources),
	"services.*.deploy.resources.limits.pids":                                                   allow(resources),
	"services.*.deploy.resources.limits.devices":                                                deny("devices", "host devices such as GPUs"),
	"services.*.deploy.resources.limits.generic_resources":                                      walk(),
	"services.*.deploy.resources.reservations.cpus":                                             allow(resources),
	"services.*.deploy.resources.reservations.memory":                                           allow(resources),
	"services.*.deploy.resources.reservations.pids":                                             allow(resources),
	"services.*.deploy.resources.reservations.devices":                                          deny("devices", "host devices such as GPUs"),
	"services.*.deploy.resources.reservations.generic_resources":                                walk(),
	"services.*.deploy.resources.limits.generic_resources[].discrete_resource_spec":             walk(),
	"services.*.deploy.resources.limits.generic_resources[].discrete_resource_spec.kind":        allow(swarmOnly),
	"services.*.deploy.resources.limits.generic_resources[].discrete_resource_spec.value":       allow(swarmOnly),
	"services.*.deploy.resources.reservations.generic_resources[].discrete_resource_spec":       walk(),
	"services.*.deploy.resources.reservations.generic_resources[].discrete_resource_spec.kind":  allow(swarmOnly),
	"services.*.deploy.resources.reservations.generic_resources[].discrete_resource_spec.value": allow(swarmOnly),

	// networks, volumes, secrets, configs of the project
	"networks.*.name":                        allow(adapted),
	"networks.*.driver":                      rule("network-driver"),
	"networks.*.driver_opts":                 deny("network-drivers", "options of the network driver (a bridge's host interface, say)"),
	"networks.*.ipam":                        walk(),
	"networks.*.ipam.driver":                 rule("ipam-driver"),
	"networks.*.ipam.config":                 walk(),
	"networks.*.ipam.config[].subnet":        allow("addresses of the sample's network"),
	"networks.*.ipam.config[].gateway":       allow("addresses of the sample's network"),
	"networks.*.ipam.config[].ip_range":      allow("addresses of the sample's network"),
	"networks.*.ipam.config[].aux_addresses": allow("addresses of the sample's network"),
	"networks.*.external":                    rule("external-network"),
	"networks.*.internal":                    allow("cuts the network off"),
	"networks.*.attachable":                  allow(swarmOnly),
	"networks.*.labels":                      rule("labels"),
	"networks.*.enable_ipv4":                 allow("addresses of the sample's network"),
	"networks.*.enable_ipv6":                 allow("addresses of the sample's network"),
	"volumes.*.name":                         allow(adapted),
	"volumes.*.driver":                       rule("volume-driver"),
	"volumes.*.driver_opts":                  rule("volume-driver-opts"),
	"volumes.*.external":                     deny("other-containers", "an existing volume, outside the sample"),
	"volumes.*.labels":                       rule("labels"),
	"secrets.*.name":                         allow(adapted),
	"secrets.*.file":                         rule("object-file"),
	"secrets.*.environment":                  rule("object-environment"),
	"secrets.*.content":                      allow("given inline"),
	"secrets.*.external":                     allow(swarmOnly),
	"secrets.*.labels":                       rule("labels"),
	"secrets.*.driver":                       allow(swarmOnly),
	"secrets.*.driver_opts":                  allow(swarmOnly),
	"secrets.*.template_driver":              allow(swarmOnly),
	"configs.*.name":                         allow(adapted),
	"configs.*.file":                         rule("object-file"),
	"configs.*.environment":                  rule("object-environment"),
	"configs.*.content":                      allow("given inline"),
	"configs.*.external":                     allow(swarmOnly),
	"configs.*.labels":                       rule("labels"),
	"configs.*.driver":                       allow(swarmOnly),
	"configs.*.driver_opts":                  allow(swarmOnly),
	"configs.*.template_driver":              allow(swarmOnly),
}

func init() {
	for _, hook := range []string{"update_config", "rollback_config"} {
		for _, f := range []string{"parallelism", "delay", "failure_action", "monitor", "max_failure_ratio", "order"} {
			policyTable["services.*.deploy."+hook+"."+f] = allow(swarmOnly)
		}
	}
}

var extensionsType = reflect.TypeFor[types.Extensions]()

// yamlName is a field's key in a compose file: its yaml tag, else its lowercased name (yaml.v3's
// default); "" for fields that never come from a file (yaml:"-", unexported, extensions).
func yamlName(f reflect.StructField) string {
	if !f.IsExported() || f.Type == extensionsType {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return strings.ToLower(f.Name)
	}
	return name
}

// elemStruct is the struct type a field holds directly or through pointers, maps and slices,
// with the path suffix of its elements ("", ".*" for a map, "[]" for a list).
func elemStruct(t reflect.Type) (reflect.Type, string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	suffix := ""
	switch t.Kind() {
	case reflect.Map:
		t, suffix = t.Elem(), ".*"
	case reflect.Slice:
		t, suffix = t.Elem(), "[]"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, suffix, t.Kind() == reflect.Struct
}

// walkProject checks every field set in the project against the table.
func (c *checker) walkProject() {
	c.walkStruct(reflect.ValueOf(c.proj).Elem(), "", "")
	// Extensions are not walked; this one means something only beside network_mode bridge.
	for _, name := range c.proj.ServiceNames() {
		if s := c.proj.Services[name]; wantsEngineBridge(s) && !bridgeMode(s.NetworkMode) {
			c.svc = name
			c.invalid("services."+name+"."+EngineBridgeExtension, "true", "namespaces",
				"asks for the engine's shared bridge without network_mode: bridge", "network_mode: bridge")
		}
	}
	c.svc = ""
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (c *checker) walkStruct(v reflect.Value, key, path string) {
	t := v.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		fv := v.Field(i)
		if fv.IsZero() {
			continue
		}
		c.field(fv, join(key, name), join(path, name), v)
	}
}

func (c *checker) field(fv reflect.Value, key, path string, parent reflect.Value) {
	e, ok := policyTable[key]
	if !ok {
		c.add(path, render(fv), "unknown-field", "a field the policy does not know: denied until it is classified", "")
		return
	}
	switch e.class {
	case classAllow:
	case classDeny:
		if e.kind == "" || !c.p.allows(e.kind) {
			c.add(path, render(fv), cmpOr(e.kind, "denied"), e.why, optInFlag(e.kind))
		}
	case classRule:
		fn := policyRules[e.rule]
		if fn == nil {
			panic("compose: policy table names unknown rule " + e.rule)
		}
		fn(c, site{path: path, parent: parent}, fv)
		if e.walk {
			c.descend(fv, key, path)
		}
	case classWalk:
		c.descend(fv, key, path)
	}
}

func (c *checker) descend(fv reflect.Value, key, path string) {
	for fv.Kind() == reflect.Pointer {
		if fv.IsNil() {
			return
		}
		fv = fv.Elem()
	}
	switch fv.Kind() {
	case reflect.Struct:
		c.walkStruct(fv, key, path)
	case reflect.Map:
		keys := fv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			ev := fv.MapIndex(k)
			for ev.Kind() == reflect.Pointer {
				if ev.IsNil() {
					break
				}
				ev = ev.Elem()
			}
			if ev.Kind() != reflect.Struct {
				continue
			}
			if key == "services" {
				c.svc = k.String()
			}
			c.walkStruct(ev, key+".*", path+"."+k.String())
			if key == "services" {
				c.svc = ""
			}
		}
	case reflect.Slice:
		for i := range fv.Len() {
			ev := fv.Index(i)
			for ev.Kind() == reflect.Pointer {
				if ev.IsNil() {
					break
				}
				ev = ev.Elem()
			}
			if ev.Kind() == reflect.Struct {
				c.walkStruct(ev, key+"[]", fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// optInFlag is the command-line flag for an opt-in kind.
func optInFlag(kind string) string {
	if kind == "" {
		return ""
	}
	return "--allow " + kind
}

// render writes a field's value as a short string for messages.
func render(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return fmt.Sprint(v.Bool())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = render(v.Index(i))
		}
		return strings.Join(parts, ",")
	case reflect.Map:
		var parts []string
		m := map[string]string{}
		for _, k := range v.MapKeys() {
			if e, _, isStruct := elemStruct(v.Type()); isStruct && e != nil {
				m[fmt.Sprint(k.Interface())] = "" // a map of structures: its keys say enough
				continue
			}
			m[fmt.Sprint(k.Interface())] = render(v.MapIndex(k))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] == "" {
				parts = append(parts, k)
			} else {
				parts = append(parts, k+"="+m[k])
			}
		}
		return strings.Join(parts, ",")
	case reflect.Struct:
		if d, ok := v.Interface().(types.DeviceMapping); ok {
			return strings.TrimRight(d.Source+":"+d.Target+":"+d.Permissions, ":")
		}
		var parts []string
		for i := range v.NumField() {
			if name := yamlName(v.Type().Field(i)); name != "" && !v.Field(i).IsZero() {
				parts = append(parts, name+"="+render(v.Field(i)))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return fmt.Sprint(v.Interface())
}
