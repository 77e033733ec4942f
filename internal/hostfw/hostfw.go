// Package hostfw keeps sample networks off the host's own addresses. A container reaches the
// host's services (a model server, a metrics endpoint, the engine's published ports) at its
// network's gateway, at docker0's address and at every address of the host's interfaces; all of
// that traffic enters the host through the bridge and is delivered locally, so it passes the
// netfilter input hook, never forward. The firewall drops it there, whatever the port, for IPv4
// and IPv6, while replies to connections the host opened still flow. Traffic between containers
// of one network and egress to the outside are forwarded, never delivered locally, and are not
// touched.
//
// The rules live in an nftables table of composebox's own (inet composebox), beside Docker's
// iptables rules rather than inside them: a drop in any base chain is final, so the table needs
// no place in Docker's chains, and Docker rewriting its own never removes it. Each protected
// network has one rule, commented with its network id and bridge name, added when composebox
// creates the network and removed when it removes it; Prune removes the rules of networks that
// no longer exist.
package hostfw

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/composebox/composebox/internal/errdefs"
)

// Table and Chain name composebox's rules: `nft list table inet composebox` shows them.
const (
	Table = "composebox"
	Chain = "input"
)

// commentPrefix starts the comment of every per-network rule: "composebox network <id> <bridge>".
const commentPrefix = "composebox network "

// ErrUnavailable marks a host where the rules cannot be applied: not root, or no nftables in
// the kernel. It is an ErrPrerequisite.
var ErrUnavailable = errdefs.New(errdefs.ErrPrerequisite, "host firewall unavailable")

// Network is a bridge network to keep off the host.
type Network struct {
	// ID is the engine's network id.
	ID string
	// Bridge is the host interface of the network (br-<id[:12]> unless the network names one).
	Bridge string
}

// BridgeName is the host interface of a bridge network: the name its options give, else the
// bridge driver's br-<first 12 characters of the id>.
func BridgeName(id string, options map[string]string) string {
	if name := options["com.docker.network.bridge.name"]; name != "" {
		return name
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return "br-" + id
}

// Rule is one per-network rule as the kernel holds it.
type Rule struct {
	Network
	Handle uint64
}

// Firewall applies and removes the rules. It holds no state of its own: every call reads the
// kernel's, so any number of processes may share the table. It is safe for concurrent use.
type Firewall struct {
	// mu serialises this process's changes, so that two samples' Protect of one table do not
	// both create its chain.
	mu sync.Mutex
}

// New returns a firewall. It does no I/O.
func New() *Firewall { return &Firewall{} }

func (f *Firewall) conn() (*nftables.Conn, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, unavailable(err)
	}
	return c, nil
}

var (
	table = &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	chain = &nftables.Chain{
		Name:     Chain,
		Table:    table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookInput,
		Priority: nftables.ChainPriorityFilter,
	}
)

// unavailable wraps a netlink failure that means the host cannot have these rules.
func unavailable(err error) error {
	why := "nftables is not available"
	switch {
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		why = fmt.Sprintf("not permitted (uid %d; it needs root or CAP_NET_ADMIN)", os.Geteuid())
	case errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EOPNOTSUPP):
		why = "the kernel has no nftables (nf_tables)"
	}
	return errdefs.Wrap(ErrUnavailable, err, "host firewall: "+why)
}

// ensure creates the table, its chain and the rules every network shares, once: the whole
// set is one batch that fails if the table exists, so that two processes never both add the
// shared rules.
func (f *Firewall) ensure(c *nftables.Conn) error {
	if _, err := c.ListChain(table, Chain); err == nil {
		return nil
	}
	c.CreateTable(table)
	c.AddChain(chain)
	for _, r := range sharedRules() {
		c.AddRule(r)
	}
	err := c.Flush()
	if err == nil || errors.Is(err, syscall.EEXIST) {
		if _, lerr := c.ListChain(table, Chain); lerr == nil {
			return nil
		}
	}
	if err == nil {
		err = syscall.ENOENT
	}
	return unavailable(err)
}

// sharedRules come before every network's drop: replies to connections the host opened, and
// IPv6 neighbour discovery, without which a container cannot resolve its gateway's address and
// has no IPv6 egress.
func sharedRules() []*nftables.Rule {
	established := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	return []*nftables.Rule{
		{
			Table: table, Chain: chain,
			Exprs: []expr.Any{
				&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: established, Xor: make([]byte, 4)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
				&expr.Verdict{Kind: expr.VerdictAccept},
			},
			UserData: userdata.AppendString(nil, userdata.TypeComment, "composebox: replies to connections the host opened"),
		},
		{
			Table: table, Chain: chain,
			Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: []byte{135}}, // neighbour solicitation
				&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: []byte{136}}, // neighbour advertisement
				&expr.Verdict{Kind: expr.VerdictAccept},
			},
			UserData: userdata.AppendString(nil, userdata.TypeComment, "composebox: IPv6 neighbour discovery"),
		},
	}
}

// ifname is an interface name as the kernel compares it: NUL-padded to IFNAMSIZ.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// Protect drops every new connection from n's bridge to the host's own addresses. It is
// idempotent. A host where the rules cannot be applied gets ErrUnavailable.
func (f *Firewall) Protect(n Network) error {
	if n.ID == "" || n.Bridge == "" || len(n.Bridge) >= unix.IFNAMSIZ || strings.ContainsAny(n.ID+n.Bridge, " \x00") {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("host firewall: protect network %q (bridge %q): not a network id and interface name", n.ID, n.Bridge))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	if err := f.ensure(c); err != nil {
		return err
	}
	rules, err := f.rules(c)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(rules, func(r Rule) bool { return r.Network == n }) {
		return nil
	}
	c.AddRule(&nftables.Rule{
		Table: table, Chain: chain,
		Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n.Bridge)},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictDrop},
		},
		UserData: userdata.AppendString(nil, userdata.TypeComment, commentPrefix+n.ID+" "+n.Bridge),
	})
	if err := c.Flush(); err != nil {
		return unavailable(fmt.Errorf("add the rule of network %s: %w", n.ID, err))
	}
	return nil
}

// Rules lists the per-network rules. A host without the table (or without nftables) has none.
func (f *Firewall) Rules() ([]Rule, error) {
	c, err := f.conn()
	if err != nil {
		return nil, nil
	}
	return f.rules(c)
}

func (f *Firewall) rules(c *nftables.Conn) ([]Rule, error) {
	rs, err := c.GetRules(table, chain)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EPROTONOSUPPORT) {
			return nil, nil
		}
		return nil, fmt.Errorf("host firewall: list rules: %w", err)
	}
	var out []Rule
	for _, r := range rs {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		rest, ok := strings.CutPrefix(comment, commentPrefix)
		if !ok {
			continue
		}
		id, bridge, _ := strings.Cut(rest, " ")
		out = append(out, Rule{Network: Network{ID: id, Bridge: bridge}, Handle: r.Handle})
	}
	return out, nil
}

// Release removes the rules of the networks with these ids. Rules already gone, and a host
// without the table, are not errors.
func (f *Firewall) Release(ids ...string) error {
	_, err := f.remove(func(r Rule) bool { return slices.Contains(ids, r.ID) })
	return err
}

// Remove removes these rules, as Rules listed them: exactly those, by handle, so that a rule a
// network gained since the listing is never taken for one of them. It returns those it removed;
// a rule already gone is not an error.
func (f *Firewall) Remove(rules ...Rule) ([]Rule, error) {
	return f.remove(func(r Rule) bool { return slices.Contains(rules, r) })
}

func (f *Firewall) remove(doomed func(Rule) bool) ([]Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return nil, nil // no nftables here: nothing of ours to remove
	}
	rules, err := f.rules(c)
	if err != nil {
		return nil, err
	}
	var removed []Rule
	var errs []error
	for _, r := range rules {
		if !doomed(r) {
			continue
		}
		err := c.DelRule(&nftables.Rule{Table: table, Chain: chain, Handle: r.Handle})
		if err == nil {
			err = c.Flush()
		}
		switch {
		case err == nil:
			removed = append(removed, r)
		case errors.Is(err, syscall.ENOENT):
			// Another process removed it first.
		default:
			errs = append(errs, fmt.Errorf("host firewall: remove the rule of network %s: %w", r.ID, err))
		}
	}
	return removed, errors.Join(errs...)
}

// Check reports whether rules can be applied here: it sets up the table (which drops nothing
// until a network is protected) and reads it back. A host where they cannot gets
// ErrUnavailable.
func (f *Firewall) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	if err := f.ensure(c); err != nil {
		return err
	}
	if _, err := c.GetRules(table, chain); err != nil {
		return unavailable(err)
	}
	return nil
}
