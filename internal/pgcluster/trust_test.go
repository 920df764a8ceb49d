package pgcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The configuration checks read files as PostgreSQL does: comments to
// the end of the line outside quotes, "name = value" or "name value".
func TestConfigurationChecks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		check      func(string) error
		text, says string // says "": accepted
	}{
		{checkHBA, hbaConf, ""},
		{checkHBA, "# trust everyone\nlocal all all scram-sha-256 # not trust\n", ""},
		{checkHBA, "host all all 0.0.0.0/0 reject\n", ""},
		{checkHBA, "local all all scram-sha-256\nhost all all 127.0.0.1/32 trust\n", "line 2 lets clients in with method trust"},
		{checkHBA, "host all all 127.0.0.1 255.255.255.255 md5\n", "method md5"},
		{checkHBA, "host all @admins 127.0.0.1/32 scram-sha-256\n", "@admins"},
		{checkHBA, "host all all 127.0.0.1/32\n", "names no method"},
		{checkConf, "max_connections = 100\t\t# (change requires restart)\nlc_messages = 'C' # x\ndatestyle 'iso, mdy'\n", ""},
		{checkConf, "log_line_prefix = '# %m'\nwal_writer_delay = '10s'\n", ""},
		{checkConf, "log_directory = '/tmp/theirs'\n", "sets log_directory"},
		{checkConf, "shared_buffers = 128MB\nSHARED_PRELOAD_LIBRARIES = 'x'\n", "line 2 sets shared_preload_libraries"},
		{checkConf, "include_dir 'conf.d'\n", "sets include_dir"},
		{checkConf, "archive_command='cp %p /x' # '\n", "sets archive_command"},
	} {
		err := tc.check(write("conf", tc.text))
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tc.text, err)
		case tc.says != "" && (!errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%q: %v, want a refusal saying %q", tc.text, err, tc.says)
		}
	}
}
