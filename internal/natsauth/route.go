package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cluster-ledger/ledger/internal/secretfile"
)

// RouteFile is the file, beside the seeds, that holds the user and
// password NATS servers of one cluster present to each other on their
// routes. nats-server authenticates routes by user and password (or TLS
// certificates), not by nkeys, so this one secret is shared by the
// cluster's servers and by nothing else.
const RouteFile = "route.secret"

// RouteUser is the user name of the cluster routes.
const RouteUser = "ledger-route"

// Route is the credentials of a cluster's routes.
type Route struct {
	User, Password string
}

// InitRoute creates dir (0700) and its route credentials (0600, a random
// 256-bit password) when they are missing, and returns them. Existing
// credentials are kept: a restarted server still joins its cluster.
func InitRoute(dir string) (Route, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Route{}, err
	}
	path := filepath.Join(dir, RouteFile)
	if _, err := os.Stat(path); os.IsNotExist(err) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return Route{}, err
		}
		if err := secretfile.WriteNew(path, []byte(RouteUser+":"+hex.EncodeToString(b)+"\n")); err != nil {
			return Route{}, err
		}
	}
	return LoadRoute(dir)
}

// LoadRoute reads the route credentials of dir, refusing a file others
// may read (ErrUnsafe) or one that holds no user:password line
// (ErrBadCreds).
func LoadRoute(dir string) (Route, error) {
	path := filepath.Join(dir, RouteFile)
	st, err := os.Stat(path)
	if err != nil {
		return Route{}, fmt.Errorf("%w: %w", ErrNoCreds, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Route{}, fmt.Errorf("%w: %s has mode %v; chmod 600 it", ErrUnsafe, path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Route{}, fmt.Errorf("%w: %w", ErrNoCreds, err)
	}
	user, pass, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	if !ok || user == "" || len(pass) < 16 {
		return Route{}, fmt.Errorf("%w: %s holds no user:password line (a password of 16 characters at least)", ErrBadCreds, path)
	}
	return Route{User: user, Password: pass}, nil
}
