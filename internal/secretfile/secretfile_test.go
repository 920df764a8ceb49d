package secretfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteNewIsPrivateAndNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := WriteNew(path, []byte("secret")); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %v, want 0600", mode)
	}
	if err := WriteNew(path, []byte("other")); err == nil {
		t.Fatal("WriteNew replaced an existing file")
	}
	if b, _ := os.ReadFile(path); string(b) != "secret" {
		t.Fatalf("file holds %q after a refused write", b)
	}
}
