package pgcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// EnvBinDir is the environment variable naming the PostgreSQL bin
// directory when WithBinDir is not given.
const EnvBinDir = "LEDGER_PG_BIN"

// requiredBinaries must all be present in a bin directory.
var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

// debianGlob is where Debian and Ubuntu install versioned server binaries.
var debianGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns the directory holding initdb, pg_ctl and postgres:
// explicit if non-empty, else $LEDGER_PG_BIN, else `pg_config --bindir`
// when pg_config is on PATH, else the highest-versioned
// /usr/lib/postgresql/*/bin that contains initdb. The error matches
// ErrBinariesNotFound and says where it looked.
func FindBinDir(ctx context.Context, explicit string) (string, error) {
	var looked []string
	if explicit != "" {
		if missing := missingBinaries(explicit); missing != "" {
			return "", notFound([]string{explicit + " (WithBinDir: " + missing + ")"})
		}
		return explicit, nil
	}
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if missing := missingBinaries(dir); missing == "" {
			return dir, nil
		} else {
			looked = append(looked, dir+" ($"+EnvBinDir+": "+missing+")")
		}
	} else {
		looked = append(looked, "$"+EnvBinDir+" (unset)")
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output()
		dir := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			looked = append(looked, pgConfig+" --bindir (failed: "+err.Error()+")")
		case dir == "":
			looked = append(looked, pgConfig+" --bindir (empty)")
		default:
			if missing := missingBinaries(dir); missing == "" {
				return dir, nil
			} else {
				looked = append(looked, dir+" (pg_config --bindir: "+missing+")")
			}
		}
	} else {
		looked = append(looked, "pg_config (not on PATH)")
	}
	dirs, _ := filepath.Glob(debianGlob)
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if missingBinaries(dir) == "" {
			return dir, nil
		}
	}
	if len(dirs) == 0 {
		looked = append(looked, debianGlob+" (no match)")
	} else {
		looked = append(looked, debianGlob+" ("+strings.Join(dirs, ", ")+": incomplete)")
	}
	return "", notFound(looked)
}

func notFound(looked []string) error {
	return &Error{
		Kind: ErrBinariesNotFound,
		Detail: "looked in: " + strings.Join(looked, "; ") +
			". Install them (Debian/Ubuntu: `apt-get install postgresql`, which provides " +
			"/usr/lib/postgresql/<version>/bin), or point $" + EnvBinDir + " at the directory holding initdb and pg_ctl",
	}
}

// missingBinaries returns "" when dir has all required binaries, or a
// description of what is missing.
func missingBinaries(dir string) string {
	var missing []string
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "no " + strings.Join(missing, ", ")
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths by numeric
// version (9.6 < 10 < 15).
func versionLess(a, b string) bool {
	va := parseVersion(filepath.Base(filepath.Dir(a)))
	vb := parseVersion(filepath.Base(filepath.Dir(b)))
	for i := 0; i < len(va) && i < len(vb); i++ {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	if len(va) != len(vb) {
		return len(va) < len(vb)
	}
	return a < b
}

func parseVersion(s string) []int {
	var v []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}
