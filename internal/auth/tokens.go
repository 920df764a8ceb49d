package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cluster-ledger/ledger/events"
)

// Scope is one kind of access a token grants.
type Scope string

// The scopes. Append and plan apply to the token's pools only; read
// applies to the token's pools on routes that name a pool.
const (
	// ScopeAppend: demand and release events.
	ScopeAppend Scope = events.ScopeAppend
	// ScopePlan: plan, host_up and host_down events.
	ScopePlan Scope = events.ScopePlan
	// ScopeRead: the read endpoints (allocations, decisions, console).
	ScopeRead Scope = "read"
	// ScopeMetrics: GET /metrics of every process (figures of every
	// pool, no consumer's allocation); the token's pools do not narrow it.
	ScopeMetrics Scope = "metrics"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopeAppend, ScopePlan, ScopeRead, ScopeMetrics}

// AllPools in an entry's pools grants every pool.
const AllPools = "*"

// TokenPrefix starts every token this package generates, so a token is
// recognisable in a leaked log or a secret scanner.
const TokenPrefix = "ldg_"

// Errors of reading a tokens file or building an entry.
var (
	ErrInvalidEntry = errors.New("invalid token entry")
)

// Entry is one line of a tokens file.
type Entry struct {
	// Name is the identity: the producer recorded for the events appended
	// with this token. Unique in a file.
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the token; the token itself is kept
	// nowhere by the ledger.
	SHA256 string  `json:"sha256"`
	Scopes []Scope `json:"scopes"`
	// Pools the token may touch ("*": all).
	Pools []string `json:"pools"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// validate checks an entry as read from a file or built by NewEntry.
func (e Entry) validate() error {
	if !namePattern.MatchString(e.Name) {
		return fmt.Errorf("%w: name %q (1 to 64 of letters, digits, '.', '_', '@', '-'; starting with a letter or digit)", ErrInvalidEntry, e.Name)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("%w: %s: sha256 must be 64 hex digits", ErrInvalidEntry, e.Name)
	}
	if len(e.Scopes) == 0 {
		return fmt.Errorf("%w: %s: no scopes (want some of %v)", ErrInvalidEntry, e.Name, Scopes)
	}
	for _, s := range e.Scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("%w: %s: unknown scope %q (want some of %v)", ErrInvalidEntry, e.Name, s, Scopes)
		}
	}
	if len(e.Pools) == 0 {
		return fmt.Errorf("%w: %s: no pools (list them, or \"*\" for all)", ErrInvalidEntry, e.Name)
	}
	for _, p := range e.Pools {
		if p != AllPools && !poolPattern.MatchString(p) {
			return fmt.Errorf("%w: %s: pool %q", ErrInvalidEntry, e.Name, p)
		}
	}
	return nil
}

// poolPattern mirrors stream.ValidatePool (not imported: auth depends on
// nothing of the ledger).
var poolPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Identity is who presented a valid token, and what it may do.
type Identity struct {
	Name   string
	scopes []Scope
	pools  []string
}

// Has reports whether the identity holds scope at all (on some pool).
func (id *Identity) Has(scope Scope) bool { return slices.Contains(id.scopes, scope) }

// Allows reports whether the identity may use scope on pool ("" for a
// route that names no pool: the scope alone decides).
func (id *Identity) Allows(scope Scope, pool string) bool {
	if !id.Has(scope) {
		return false
	}
	return pool == "" || slices.Contains(id.pools, AllPools) || slices.Contains(id.pools, pool)
}

// Same reports whether o is the same identity with the same rights: a
// long-lived request (a live stream) ends when its token no longer
// authenticates as the identity it began with (revoked, rotated, its
// scopes or pools changed).
func (id *Identity) Same(o *Identity) bool {
	return id != nil && o != nil && id.Name == o.Name && slices.Equal(id.scopes, o.scopes) && slices.Equal(id.pools, o.pools)
}

// Tokens is a set of entries, safe for concurrent use (it never changes).
type Tokens struct {
	entries []Entry
	hashes  [][]byte
}

// New returns the token set of entries, checking each and that names are
// unique.
func New(entries ...Entry) (*Tokens, error) {
	t := &Tokens{}
	names := map[string]bool{}
	for _, e := range entries {
		if err := e.validate(); err != nil {
			return nil, err
		}
		if names[e.Name] {
			return nil, fmt.Errorf("%w: name %q appears twice", ErrInvalidEntry, e.Name)
		}
		names[e.Name] = true
		h, _ := hex.DecodeString(e.SHA256)
		t.entries = append(t.entries, e)
		t.hashes = append(t.hashes, h)
	}
	return t, nil
}

// Len is the number of entries.
func (t *Tokens) Len() int { return len(t.entries) }

// Authenticate returns the identity of token, or false. Every entry is
// compared, in constant time, so the answer's timing tells nothing about
// which entry (if any) is close.
func (t *Tokens) Authenticate(token string) (*Identity, bool) {
	if t == nil || token == "" {
		return nil, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, h := range t.hashes {
		if subtle.ConstantTimeCompare(sum[:], h) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	e := t.entries[found]
	return &Identity{Name: e.Name, scopes: e.Scopes, pools: e.Pools}, true
}

// Hash is the hex SHA-256 of a token, as an entry keeps it.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Generate returns a new random token (256 bits) and its entry.
func Generate(name string, scopes []Scope, pools []string) (token string, e Entry, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Entry{}, err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	e = Entry{Name: name, SHA256: Hash(token), Scopes: scopes, Pools: pools}
	if err := e.validate(); err != nil {
		return "", Entry{}, err
	}
	return token, e, nil
}

// ParsePools reads a comma-separated list of pools ("*": every one),
// each once, in the order given; the entry validates the names.
func ParsePools(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if p := strings.TrimSpace(f); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// ParseScopes reads a comma-separated list of scopes ("all": every one).
func ParseScopes(s string) ([]Scope, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(Scopes), nil
	}
	var out []Scope
	for _, f := range strings.Split(s, ",") {
		sc := Scope(strings.TrimSpace(f))
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("unknown scope %q (want some of %v, or all)", sc, Scopes)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

// Parse reads a tokens file's content: one JSON Entry a line; blank lines
// and lines starting with # are ignored. Unknown fields are errors.
func Parse(b []byte) (*Tokens, error) {
	var entries []Entry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var e Entry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("line %d: %w: %v", n, ErrInvalidEntry, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("line %d: %w: one entry a line", n, ErrInvalidEntry)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	t, err := New(entries...)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Load reads a tokens file. A file others may read or write is refused:
// hashes are not secrets, but who may do what is.
func Load(path string) (*Tokens, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("tokens file %s has mode %v: make it private (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	if t.Len() == 0 {
		return nil, fmt.Errorf("tokens file %s has no entries: nobody could use the API", path)
	}
	return t, nil
}

// Entries returns the set's entries, in file order.
func (t *Tokens) Entries() []Entry { return slices.Clone(t.entries) }

// Authenticator answers who a presented token is: a fixed set (*Tokens)
// or a tokens file reloaded as it changes (*File).
type Authenticator interface {
	Authenticate(token string) (*Identity, bool)
}

// ReadFile reads the entries of the tokens file at path without the
// checks Load makes for serving (mode, at least one entry): what `ledger
// token list` shows. A file that does not exist has none.
func ReadFile(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return t.entries, nil
}

// AppendFile adds an entry to the tokens file at path (created 0600),
// refusing a name already there.
func AppendFile(path string, e Entry) error {
	return updateFile(path, true, func(entries []Entry) ([]Entry, error) {
		return append(entries, e), nil
	})
}

// GrantFile adds scopes to the entry name of the tokens file at path.
// `ledger dev` uses it to give an admin token created before a scope
// existed every scope.
func GrantFile(path, name string, scopes ...Scope) error {
	return updateFile(path, false, func(entries []Entry) ([]Entry, error) {
		i, err := find(entries, name, path)
		if err != nil {
			return nil, err
		}
		for _, s := range scopes {
			if !slices.Contains(entries[i].Scopes, s) {
				entries[i].Scopes = append(slices.Clone(entries[i].Scopes), s)
			}
		}
		return entries, nil
	})
}

// RevokeFile removes the entry name from the tokens file at path and
// returns it: its token is refused by every server that reloads the file.
// Removing the last entry is allowed (a server then refuses everyone).
func RevokeFile(path, name string) (Entry, error) {
	var gone Entry
	err := updateFile(path, false, func(entries []Entry) ([]Entry, error) {
		i, err := find(entries, name, path)
		if err != nil {
			return nil, err
		}
		gone = entries[i]
		return slices.Delete(entries, i, i+1), nil
	})
	return gone, err
}

// RotateFile gives the entry name of the tokens file at path a new random
// token, keeping its scopes and pools, and returns the token (to hand over
// once) and the new entry. The old token is refused once servers reload.
func RotateFile(path, name string) (string, Entry, error) {
	var token string
	var e Entry
	err := updateFile(path, false, func(entries []Entry) ([]Entry, error) {
		i, err := find(entries, name, path)
		if err != nil {
			return nil, err
		}
		token, e, err = Generate(name, entries[i].Scopes, entries[i].Pools)
		if err != nil {
			return nil, err
		}
		entries[i] = e
		return entries, nil
	})
	return token, e, err
}

func find(entries []Entry, name, path string) (int, error) {
	i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return -1, fmt.Errorf("%w: no entry %q in %s", ErrInvalidEntry, name, path)
	}
	return i, nil
}

// updateFile rewrites the tokens file at path with change's entries,
// checked as a set, through a temporary file (mode 0600) renamed over it:
// a server reloading the file sees the old content or the new one, never
// half of it. create allows a file that does not exist yet.
//
// path must be a regular file (or missing, with create): the rename
// replaced whatever was there, so `ledger token add --file /dev/null` as
// root made /dev/null a regular file of mode 0600, and a FIFO was read
// until a writer came. A symbolic link is followed and its target
// rewritten, in the target's directory: renamed over, the link itself
// became a file that servers reading the target never saw.
func updateFile(path string, create bool, change func([]Entry) ([]Entry, error)) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tokens file %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("tokens file %s is not a regular file (%s): a tokens file is rewritten whole and renamed over, which would replace it; name a regular file",
			path, fi.Mode().Type())
	}
	old, err := os.ReadFile(path)
	if err != nil && !(create && errors.Is(err, os.ErrNotExist)) {
		return err
	}
	t, err := Parse(old)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", path, err)
	}
	entries, err := change(slices.Clone(t.entries))
	if err != nil {
		return err
	}
	if _, err := New(entries...); err != nil {
		return err
	}
	var out bytes.Buffer
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		out.Write(append(line, '\n'))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
