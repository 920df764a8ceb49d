package redact

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://ledger:s3cretpw@127.0.0.1:5432/ledger?sslmode=disable": "postgres://ledger:xxxxx@127.0.0.1:5432/ledger?sslmode=disable",
		"postgres://ledger@127.0.0.1/ledger":                               "postgres://ledger@127.0.0.1/ledger",
		"connect to postgres://a:b/c@d@host/db: refused":                   "connect to postgres://a:xxxxx@host/db: refused",
		"nats://u:p@n1:4222,nats://u:p@n2:4222":                            "nats://u:xxxxx@n1:4222,nats://u:xxxxx@n2:4222",
		"host=h user=ledger password=s3cret dbname=ledger":                 "host=h user=ledger password=xxxxx dbname=ledger",
		"host=h password='a b\\'c' dbname=x":                               "host=h password=xxxxx dbname=x",
		"no secret here: https://example.com/a?b=c":                        "no secret here: https://example.com/a?b=c",
		"postgres://h/ledger?user=x&password=P&sslmode=disable failed":     "postgres://h/ledger?user=x&password=xxxxx&sslmode=disable failed",
		"postgres://h/ledger?password=p%26q#frag":                          "postgres://h/ledger?password=xxxxx#frag",
		"password=a&b host=h":                                              "password=xxxxx host=h",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestError(t *testing.T) {
	conn := "postgres://ledger_api:0123456789abcdef@127.0.0.1:1/ledger"
	// A driver quoting the password alone, out of its URL.
	base := fmt.Errorf("cannot parse: bad password 0123456789abcdef: %w", io.EOF)
	err := Error(base, conn)
	if strings.Contains(err.Error(), "0123456789abcdef") || !errors.Is(err, io.EOF) {
		t.Fatalf("Error: %q (is EOF %v)", err, errors.Is(err, io.EOF))
	}
	if Error(nil, conn) != nil {
		t.Fatal("Error(nil) is not nil")
	}
	// A password given as a URL's query parameter, percent-encoded, quoted
	// by a driver as given or decoded.
	query := "postgres://127.0.0.1/ledger?user=ledger_api&password=s%26cret99&sslmode=disable"
	for _, quoted := range []string{"s%26cret99", "s&cret99"} {
		if e := Error(fmt.Errorf("bad password %s", quoted), query); strings.Contains(e.Error(), quoted) {
			t.Errorf("Error quotes the query's password: %q", e)
		}
	}
	plain := errors.New("dial tcp: refused")
	if Error(plain, conn) != plain {
		t.Fatal("an error with nothing to hide should be returned as it is")
	}
}

// TestConnOddPassword: a connection string whose password holds what a
// URL needs percent-encoded is hidden whole by Conn, and Error hides the
// pieces a parser quotes of it (decision 424).
func TestConnOddPassword(t *testing.T) {
	for pw, quoted := range map[string]string{
		"Secret0451 Tail0451":  `lookup Tail0451@127.0.0.1: no such host`,
		`Secret0451"Tail0451`:  `parse "pgx5://r:Secret0451\"Tail0451@127.0.0.1/db": invalid userinfo`,
		"Secret0451#Tail0451":  `parse "pgx5://r:Secret0451": invalid port ":Secret0451" after host`,
		"Secret0451@Tail0451":  `hostname resolving error: lookup Tail0451@127.0.0.1: no such host`,
		"Secret0451\tTail0451": `parse "pgx5://r:Secret0451\tTail0451@127.0.0.1/db": invalid control character in URL`,
	} {
		conn := "postgres://r:" + pw + "@127.0.0.1:5432/db?sslmode=disable"
		if got, want := Conn(conn), "postgres://r:xxxxx@127.0.0.1:5432/db?sslmode=disable"; got != want {
			t.Errorf("Conn(%q) = %q, want %q", conn, got, want)
		}
		err := Error(errors.New(quoted), conn)
		if strings.Contains(err.Error(), "Secret0451") || strings.Contains(err.Error(), "Tail0451") {
			t.Errorf("Error(%q) with the password %q = %q", quoted, pw, err)
		}
	}
	// A list of URLs: each password hidden, each host kept.
	if got, want := Conn("nats://a:Secret0451@n1:4222,nats://b:Other0451@n2:4222"), "nats://a:xxxxx@n1:4222,nats://b:xxxxx@n2:4222"; got != want {
		t.Errorf("Conn of a list = %q, want %q", got, want)
	}
	// No password: nothing hidden, the port kept.
	for _, conn := range []string{"nats://127.0.0.1:4222", "postgres://r@h:5432/db"} {
		if got := Conn(conn); got != conn {
			t.Errorf("Conn(%q) = %q", conn, got)
		}
	}
}
