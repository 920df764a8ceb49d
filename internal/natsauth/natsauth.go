package natsauth

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cluster-ledger/ledger/internal/secretfile"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
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

// Option is the client option that authenticates with the seed in path.
// The file is read (and its mode checked) now; the seed is kept only as
// long as the connection needs it to sign the server's challenge.
func Option(path string) (nats.Option, error) {
	kp, err := readSeed(path)
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCreds, err)
	}
	return nats.Nkey(pub, kp.Sign), nil
}

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
		return nil, fmt.Errorf("NATS %s refused the connection (%w): give the credentials with LEDGER_NATS_CREDS or --nats-creds (`ledger dev` prints them)", redact.URL(url), err)
	}
	if err != nil {
		return nil, fmt.Errorf("NATS %s: %w", redact.URL(url), redact.Error(err, url))
	}
	return nc, nil
}

// The JetStream API subjects of the LEDGER stream the roles use.
const (
	apiInfo        = "$JS.API.INFO"
	apiStreamInfo  = "$JS.API.STREAM.INFO.LEDGER"
	apiMsgGet      = "$JS.API.STREAM.MSG.GET.LEDGER"
	apiDirectGet   = "$JS.API.DIRECT.GET.LEDGER.>"
	apiDirectGet1  = "$JS.API.DIRECT.GET.LEDGER"
	apiConsCreate  = "$JS.API.CONSUMER.CREATE.LEDGER.>"
	apiConsCreate1 = "$JS.API.CONSUMER.CREATE.LEDGER"
	apiConsDurable = "$JS.API.CONSUMER.DURABLE.CREATE.LEDGER.>"
	apiConsInfo    = "$JS.API.CONSUMER.INFO.LEDGER.>"
	apiConsNext    = "$JS.API.CONSUMER.MSG.NEXT.LEDGER.>"
	apiConsDelete  = "$JS.API.CONSUMER.DELETE.LEDGER.>"
	apiConsList    = "$JS.API.CONSUMER.LIST.LEDGER"
	apiConsNames   = "$JS.API.CONSUMER.NAMES.LEDGER"
	apiAck         = "$JS.ACK.LEDGER.>"
	apiConsUnpin   = "$JS.API.CONSUMER.UNPIN.LEDGER.>"
	apiConsReset   = "$JS.API.CONSUMER.RESET.LEDGER.>"
	inbox          = "_INBOX.>"
)

// Permissions are role's rights. Replies to requests come to _INBOX.>,
// the only subjects any role but admin may subscribe to; nothing but admin
// may publish to $JS.API.STREAM.{CREATE,UPDATE,DELETE,PURGE,...}.
func Permissions(r Role) *server.Permissions {
	read := []string{apiInfo, apiStreamInfo, apiMsgGet, apiDirectGet, apiDirectGet1}
	switch r {
	case Admin:
		return nil // no restriction
	case Ledger:
		// An instance far behind on a pool catches up with an ephemeral
		// consumer (internal/api): it may create one and fetch from it, but
		// not delete consumers (the projector's are not its business; its
		// own expire when idle).
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: append([]string{"ledger.>", apiConsCreate, apiConsCreate1, apiConsNext}, read...)},
			Subscribe: &server.SubjectPermission{Allow: []string{inbox}},
		}
	case Projector, Auditor:
		allow := append(read, apiConsCreate, apiConsCreate1, apiConsDurable,
			apiConsInfo, apiConsNext, apiConsDelete, apiConsList, apiConsNames, apiAck)
		if r == Projector { // partitioned projectors hand partitions over and realign them (projections.Group)
			allow = append(allow, apiConsUnpin, apiConsReset)
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: allow},
			Subscribe: &server.SubjectPermission{Allow: []string{inbox}},
		}
	}
	// An unknown role may do nothing at all.
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Deny: []string{">"}},
		Subscribe: &server.SubjectPermission{Deny: []string{">"}},
	}
}

// Users are the server-side users for keys, each with its role's rights.
func Users(keys Keys) []*server.NkeyUser {
	users := make([]*server.NkeyUser, 0, len(Roles))
	for _, r := range Roles {
		if pub, ok := keys[r]; ok {
			users = append(users, &server.NkeyUser{Nkey: pub, Permissions: Permissions(r)})
		}
	}
	return users
}

// WriteServerConfig writes the authorization block of a nats-server
// configuration file giving keys their roles' rights (for a server run
// outside `ledger dev`, e.g. docker-compose: include it from the main
// configuration).
func WriteServerConfig(w io.Writer, keys Keys) error {
	var b strings.Builder
	b.WriteString("# Generated by `ledger nats init`: the ledger's NATS identities and rights.\nauthorization {\n  users = [\n")
	for _, r := range Roles {
		pub, ok := keys[r]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "    # %s\n    { nkey: %q", r, pub)
		if p := Permissions(r); p != nil {
			fmt.Fprintf(&b, ", permissions: { publish: { allow: %s }, subscribe: { allow: %s } }",
				quoteList(p.Publish.Allow), quoteList(p.Subscribe.Allow))
		}
		b.WriteString(" }\n")
	}
	b.WriteString("  ]\n}\n")
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
