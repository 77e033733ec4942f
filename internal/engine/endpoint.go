package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config"
	dockercontext "github.com/docker/cli/cli/context"
	"github.com/docker/cli/cli/context/docker"
	"github.com/docker/cli/cli/flags"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/errdefs"
)

// Endpoint is where one Docker Engine is reached, named explicitly rather than by the
// environment: a Unix socket, TCP (with TLS from a directory of certificates), SSH, or a context
// of the docker CLI's store.
type Endpoint struct {
	// Host is a unix://PATH, tcp://HOST:PORT or ssh://[USER@]HOST[:PORT] address; empty for a
	// Context.
	Host string `json:"host,omitempty" yaml:"host,omitempty"`
	// TLSDir is a directory holding ca.pem (the engine's certificate is checked against it)
	// and, for client authentication, cert.pem and key.pem: the layout of DOCKER_CERT_PATH.
	// Only for a tcp:// Host.
	TLSDir string `json:"tls,omitempty" yaml:"tls,omitempty"`
	// Context names a context of the docker CLI's store (`docker context ls`), whose address
	// and TLS material are used.
	Context string `json:"context,omitempty" yaml:"context,omitempty"`
}

// contextPrefix marks an endpoint that names a docker CLI context.
const contextPrefix = "context:"

// endpointForms is what an endpoint may be, for error messages.
const endpointForms = "want unix:///PATH, tcp://HOST:PORT[?tls=CERTDIR], ssh://[USER@]HOST[:PORT] or context:NAME"

// ParseEndpoint reads an endpoint as written on a command line: unix:///run/docker.sock,
// tcp://host:2376?tls=/etc/certs (TLS from a directory of ca.pem, cert.pem and key.pem),
// ssh://user@host, or context:NAME. A malformed one is ErrInvalidConfig.
func ParseEndpoint(s string) (Endpoint, error) {
	if name, ok := strings.CutPrefix(s, contextPrefix); ok {
		e := Endpoint{Context: name}
		return e, e.Validate()
	}
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("endpoint %q (%s)", s, endpointForms))
	}
	e := Endpoint{Host: s}
	if u.RawQuery != "" && u.Scheme != "tcp" {
		return Endpoint{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("endpoint %q: settings such as tls=CERTDIR apply to tcp:// only", s))
	}
	if u.Scheme == "tcp" && u.RawQuery != "" {
		q := u.Query()
		e.TLSDir = q.Get("tls")
		q.Del("tls")
		if len(q) > 0 {
			return Endpoint{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("endpoint %q: unknown setting %q (the one setting is tls=CERTDIR)", s, u.RawQuery))
		}
		u.RawQuery = ""
		e.Host = u.String()
	}
	return e, e.Validate()
}

// String is the endpoint as ParseEndpoint reads it.
func (e Endpoint) String() string {
	switch {
	case e.Context != "":
		return contextPrefix + e.Context
	case e.TLSDir != "":
		return e.Host + "?tls=" + url.QueryEscape(e.TLSDir)
	}
	return e.Host
}

// Validate checks the endpoint's form, without touching the network or the files.
func (e Endpoint) Validate() error {
	bad := func(why string) error {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("endpoint %q: %s", e.String(), why))
	}
	if e.Context != "" {
		if e.Host != "" || e.TLSDir != "" {
			return bad("a context names its own address and certificates")
		}
		return nil
	}
	u, err := url.Parse(e.Host)
	if err != nil || e.Host == "" {
		return bad(endpointForms)
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return bad("no socket path (" + endpointForms + ")")
		}
	case "tcp":
		if u.Host == "" || u.Port() == "" {
			return bad("no host:port (" + endpointForms + ")")
		}
	case "ssh":
		if u.Host == "" {
			return bad("no host (" + endpointForms + ")")
		}
	default:
		return bad(endpointForms)
	}
	if e.TLSDir != "" && u.Scheme != "tcp" {
		return bad("TLS certificates apply to tcp:// only")
	}
	return nil
}

// Client returns a client for the endpoint, with API version negotiation. It does not contact
// the engine. Unreadable certificates or an unknown context are ErrPrerequisite.
func (e Endpoint) Client() (client.APIClient, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if e.Context != "" {
		c, err := command.NewAPIClientFromFlags(&flags.ClientOptions{Context: e.Context}, config.LoadDefaultConfigFile(io.Discard))
		if err != nil {
			return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, fmt.Sprintf("docker context %s (see `docker context ls`)", e.Context))
		}
		return c, nil
	}
	ep := docker.Endpoint{EndpointMeta: docker.EndpointMeta{Host: e.Host}}
	if e.TLSDir != "" {
		tlsData, err := readTLSDir(e.TLSDir)
		if err != nil {
			return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "endpoint "+e.String())
		}
		ep.TLSData = tlsData
	}
	opts, err := ep.ClientOpts()
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "endpoint "+e.String())
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "endpoint "+e.String())
	}
	return c, nil
}

// readTLSDir reads ca.pem, and cert.pem with key.pem when both are there.
func readTLSDir(dir string) (*dockercontext.TLSData, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read TLS certificates: %w", err)
		}
		return b, nil
	}
	ca, err := read("ca.pem")
	if err != nil {
		return nil, err
	}
	data := &dockercontext.TLSData{CA: ca}
	cert, cerr := read("cert.pem")
	key, kerr := read("key.pem")
	switch {
	case cerr == nil && kerr == nil:
		data.Cert, data.Key = cert, key
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
		// Server authentication only.
	default:
		return nil, errors.Join(cerr, kerr)
	}
	return data, nil
}
