package natsauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/redact"
	"github.com/cluster-ledger/ledger/internal/secretfile"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// Role is one identity of the ledger on NATS.
type Role string

// The roles; see the package documentation for their rights.
const (
	Admin     Role = "admin"
	Ledger    Role = "ledger"
	Projector Role = "projector"
	Auditor   Role = "auditor"
)

// Roles lists every role, in a fixed order.
var Roles = []Role{Admin, Ledger, Projector, Auditor}

// Errors; match with errors.Is.
var (
	// ErrNoCreds: a seed file is missing or unreadable.
	ErrNoCreds = errors.New("natsauth: no NATS credentials")
	// ErrBadCreds: a file holds no usable user seed.
	ErrBadCreds = errors.New("natsauth: bad NATS credentials")
	// ErrUnsafe: a seed file can be read by others than its owner.
	ErrUnsafe = errors.New("natsauth: credentials readable by others")
)

// SeedFile is the file of role's seed in dir.
func SeedFile(dir string, r Role) string { return filepath.Join(dir, string(r)+".nk") }

// Keys are the public keys of the roles.
type Keys map[Role]string

// Init creates dir (0700) and a seed file (0600) for every role that has
// none, and returns the public keys of all roles. Existing seeds are
// kept: a restart keeps the identities.
func Init(dir string) (Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	for _, r := range Roles {
		path := SeedFile(dir, r)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, err
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, err
		}
		if err := secretfile.WriteNew(path, append(seed, '\n')); err != nil {
			return nil, err
		}
	}
	return Load(dir)
}

// Load reads the public keys of every role from dir's seed files.
func Load(dir string) (Keys, error) {
	keys := Keys{}
	for _, r := range Roles {
		kp, err := readSeed(SeedFile(dir, r))
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadCreds, err)
		}
		keys[r] = pub
	}
	return keys, nil
}

// readSeed reads a user seed: a file holding the seed alone (nk -gen
// user) or a NATS .creds file (the seed is its SU... line).
func readSeed(path string) (nkeys.KeyPair, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: give the identity's nkey seed file with --nats-creds or LEDGER_NATS_CREDS (`ledger dev` prints the auditor's)", ErrNoCreds)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCreds, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; chmod 600 it", ErrUnsafe, path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCreds, err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if bytes.HasPrefix(line, []byte("SU")) {
			kp, err := nkeys.FromSeed(line)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadCreds, path, err)
			}
			return kp, nil
		}
	}
	return nil, fmt.Errorf("%w: %s holds no user seed (a line starting SU)", ErrBadCreds, path)
}

// Option is the client option that authenticates with the seed in path,
// with the identity's private inbox prefix (InboxPrefix): the replies to
// its requests come there, where no other identity may subscribe. The
// file is read (and its mode checked) now; the seed is kept only as long
// as the connection needs it to sign the server's challenge.
func Option(path string) (nats.Option, error) {
	kp, err := readSeed(path)
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCreds, err)
	}
	auth, inbox := nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(InboxPrefix(pub))
	return func(o *nats.Options) error {
		if err := auth(o); err != nil {
			return err
		}
		return inbox(o)
	}, nil
}

// SeedInbox is the inbox prefix (InboxPrefix) of the identity whose seed
// is in path: what another NATS client (the nats CLI's --inbox-prefix)
// must use with that seed.
func SeedInbox(path string) (string, error) {
	kp, err := readSeed(path)
	if err != nil {
		return "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadCreds, err)
	}
	return InboxPrefix(pub), nil
}

// InboxPrefix is the inbox prefix of the identity whose public key is pub:
// "_INBOX.<pub>". Each identity but admin may subscribe only under its
// own, so nobody reads the replies meant for another (a subscription to
// "_INBOX.>" is refused). A nats CLI user passes it as --inbox-prefix.
func InboxPrefix(pub string) string { return "_INBOX." + pub }

// Connect connects to url as the identity in credsPath (no identity when
// credsPath is ""), with opts. A refused identity gets an error that says
// where credentials come from.
func Connect(url, credsPath string, opts ...nats.Option) (*nats.Conn, error) {
	if credsPath != "" {
		o, err := Option(credsPath)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(url, opts...)
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("NATS %s refused the connection (%w): give the credentials with LEDGER_NATS_CREDS or --nats-creds (`ledger dev` prints them); with the right ones, the identity holds its most connections at once (natsauth.MaxConnections)", redact.Conn(url), err)
	}
	if errors.Is(err, nats.ErrNoServers) {
		return nil, fmt.Errorf("NATS %s: %w: is NATS running, and is NATS_URL (or --nats-url) right?", redact.Conn(url), err)
	}
	if err != nil {
		return nil, fmt.Errorf("NATS %s: %w", redact.Conn(url), redact.Error(err, url))
	}
	return nc, nil
}

// The JetStream API subjects of the LEDGER stream the roles use.
const (
	apiInfo       = "$JS.API.INFO"
	apiStreamInfo = "$JS.API.STREAM.INFO.LEDGER"
	apiMsgGet     = "$JS.API.STREAM.MSG.GET.LEDGER"
	apiDirectGet  = "$JS.API.DIRECT.GET.LEDGER"   // batched range reads (internal/stream.Read)
	apiDirectLast = "$JS.API.DIRECT.GET.LEDGER.>" // the last message of a subject
)

// Layout names the durable consumers the projector identity may manage:
// Name (an unpartitioned projector) and Name-p<k>of<n> for every
// partitioning n of 1 to MaxPartitions (projections.PartitionName). No
// other identity may create, read from, update or delete any consumer.
type Layout struct {
	Name          string
	MaxPartitions int
}

// DefaultLayout is the projector's default name (projections.DefaultName)
// with partitionings of up to 16 (README: choosing N).
var DefaultLayout = Layout{Name: "projector", MaxPartitions: 16}

// ErrBadLayout: a Layout's name is not a consumer name, or its
// partitions are out of range.
var ErrBadLayout = errors.New("natsauth: bad projector layout")

// Validate checks that l names valid consumers: a name of letters,
// digits, '-' and '_' and 0 to 256 partitionings (projections.MaxPartitions).
func (l Layout) Validate() error {
	if l.Name == "" || len(l.Name) > 64 || strings.IndexFunc(l.Name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return fmt.Errorf("%w: projector name %q (letters, digits, '-' and '_', 1 to 64)", ErrBadLayout, l.Name)
	}
	if l.MaxPartitions < 0 || l.MaxPartitions > 256 {
		return fmt.Errorf("%w: %d partitions (0 to 256)", ErrBadLayout, l.MaxPartitions)
	}
	return nil
}

// Consumers lists the consumer names of l.
func (l Layout) Consumers() []string {
	names := []string{l.Name}
	for n := 1; n <= l.MaxPartitions; n++ {
		for k := 0; k < n; k++ {
			names = append(names, fmt.Sprintf("%s-p%dof%d", l.Name, k, n))
		}
	}
	return names
}

// consumerSubjects are the JetStream API subjects of consumer name on
// LEDGER that the projector uses: create or update it (the create
// subject that names it, with its filter or without: a partition's
// consumer filters to several subjects, which the request carries;
// never the nameless one), read
// its state, pull from it, acknowledge, delete it (an unpartitioned
// projector recreates its durable at its committed offset), and, for a
// partition, unpin the instance holding it and reset it to an offset.
func consumerSubjects(name string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE.LEDGER." + name,
		"$JS.API.CONSUMER.CREATE.LEDGER." + name + ".>",
		"$JS.API.CONSUMER.INFO.LEDGER." + name,
		"$JS.API.CONSUMER.MSG.NEXT.LEDGER." + name,
		"$JS.API.CONSUMER.DELETE.LEDGER." + name,
		"$JS.API.CONSUMER.UNPIN.LEDGER." + name,
		"$JS.API.CONSUMER.RESET.LEDGER." + name,
		"$JS.ACK.LEDGER." + name + ".>",
	}
}

// consumerInfo are the subjects that read the state of l's consumers,
// and nothing else of them.
func consumerInfo(l Layout) []string {
	var out []string
	for _, name := range l.Consumers() {
		out = append(out, "$JS.API.CONSUMER.INFO.LEDGER."+name)
	}
	return out
}

// Permissions are the rights of role r whose public key is pub, the
// projector's consumers being DefaultLayout's.
func Permissions(r Role, pub string) *server.Permissions {
	return PermissionsFor(r, pub, DefaultLayout)
}

// PermissionsFor are the rights of role r whose public key is pub, the
// projector's consumers being l's (README: NATS identities):
//   - every role but admin reads the stream (info, message gets, direct
//     gets) and subscribes only to its own inbox prefix;
//   - the ledger also publishes to ledger.*.* (appends: ledger.<pool>.<type>;
//     the stream stores each with its partition, a subject no identity
//     may publish on) and reads the state
//     of l's consumers (info only: GET /v1/status tells from it whether
//     each projector has a live instance, internal/health);
//   - the projector also manages the consumers of l, and no other;
//   - the auditor reads, nothing more: it holds no consumer.
//
// No role answers requests, so none needs allow_responses; nothing but
// admin may touch the stream's configuration or any other consumer.
func PermissionsFor(r Role, pub string, l Layout) *server.Permissions {
	read := []string{apiInfo, apiStreamInfo, apiMsgGet, apiDirectGet, apiDirectLast}
	inbox := &server.SubjectPermission{Allow: []string{InboxPrefix(pub) + ".>"}}
	switch r {
	case Admin:
		return nil // no restriction
	case Ledger:
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: append(append([]string{stream.LegacyFilter}, read...), consumerInfo(l)...)},
			Subscribe: inbox,
		}
	case Projector:
		allow := read
		for _, name := range l.Consumers() {
			allow = append(allow, consumerSubjects(name)...)
		}
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: allow}, Subscribe: inbox}
	case Auditor:
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: read}, Subscribe: inbox}
	}
	// An unknown role may do nothing at all.
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Deny: []string{">"}},
	}
}

// MaxConnections is the most connections each role may hold at once on
// the embedded server (natsserver.User). Together they stay below
// natsserver.DefaultMaxConns, with room left for connections that have
// not yet authenticated, so no identity's connections can keep another
// out. The bounds are far above what each role uses: a `ledger serve`
// or projector instance holds one or two connections (tests and a busy
// site run many instances), an audit or backup tool one.
var MaxConnections = map[Role]int{Admin: 64, Ledger: 256, Projector: 256, Auditor: 128}

// Users are the server-side users for keys, each with its role's rights
// (the projector's consumers being DefaultLayout's) and connection bound.
func Users(keys Keys) []natsserver.User { return UsersFor(keys, DefaultLayout) }

// UsersFor is Users with the projector's consumers of l.
func UsersFor(keys Keys, l Layout) []natsserver.User {
	users := make([]natsserver.User, 0, len(Roles))
	for _, r := range Roles {
		if pub, ok := keys[r]; ok {
			users = append(users, natsserver.User{Nkey: pub, Permissions: PermissionsFor(r, pub, l), MaxConnections: MaxConnections[r]})
		}
	}
	return users
}

// WriteServerConfig writes the authorization block of a nats-server
// configuration file giving keys their roles' rights (for a server run
// outside `ledger dev`, e.g. docker-compose: include it from the main
// configuration), the projector's consumers being l's.
func WriteServerConfig(w io.Writer, keys Keys, l Layout) error {
	var b strings.Builder
	b.WriteString("# Generated by `ledger nats init`: the ledger's NATS identities and rights (README: NATS identities).\nauthorization {\n  users = [\n")
	for _, r := range Roles {
		pub, ok := keys[r]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "    # %s\n    { nkey: %q", r, pub)
		if p := PermissionsFor(r, pub, l); p != nil {
			fmt.Fprintf(&b, ",\n      permissions: {\n        publish: { allow: %s }\n        subscribe: { allow: %s }\n      }\n   ",
				quoteList(p.Publish.Allow), quoteList(p.Subscribe.Allow))
		}
		b.WriteString(" }\n")
	}
	b.WriteString("  ]\n")
	// As the embedded server: an unauthenticated connection holds a
	// slot of max_connections this long at most (natsserver).
	fmt.Fprintf(&b, "  timeout: %g\n}\n", natsserver.DefaultAuthTimeout.Seconds())
	_, err := io.WriteString(w, b.String())
	return err
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
