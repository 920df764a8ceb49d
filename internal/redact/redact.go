package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Mask replaces a hidden password.
const Mask = "xxxxx"

// passwordKV matches password=VALUE in a keyword/value connection string,
// quoted or not, where it is not a URL's query parameter (passwordQuery).
var passwordKV = regexp.MustCompile(`(?i)(^|[^?&])(password\s*=\s*)('(?:\\.|[^'\\])*'|[^\s]+)`)

// passwordQuery matches a URL's ?password=VALUE or &password=VALUE: the
// value ends at the next parameter, since a literal '&' in it would have
// to be percent-encoded, so what follows it is kept (helper-41's round
// 10: "...&password=P&sslmode=disable" lost its sslmode).
var passwordQuery = regexp.MustCompile(`(?i)([?&]password=)([^&#\s]+)`)

// URL returns s with the password of every URL in it (SCHEME://USER:PASSWORD@HOST...)
// and every password=VALUE replaced by Mask. Anything that is not a
// secret is kept, so messages still say which role and host they mean.
func URL(s string) string {
	s = passwordQuery.ReplaceAllString(s, "${1}"+Mask)
	s = passwordKV.ReplaceAllString(s, "${1}${2}"+Mask)
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		// The authority ends at the first '/', '?', '#' or space after
		// the user information, which ends at its last '@' (a password
		// with an unescaped '/' or '@' still ends before the host).
		end := strings.IndexAny(s, " \t\n\"'`")
		if end < 0 {
			end = len(s)
		}
		if next := strings.Index(s[:end], "://"); next >= 0 { // a list: nats://a,nats://b
			if end = strings.LastIndexByte(s[:next], ','); end < 0 {
				end = next
			}
		}
		at := strings.LastIndexByte(s[:end], '@')
		if at < 0 {
			continue
		}
		if colon := strings.IndexByte(s[:at], ':'); colon >= 0 {
			b.WriteString(s[:colon+1])
			b.WriteString(Mask)
			s = s[at:]
		}
	}
}

// Conn is URL for a string known to be one connection string (a flag's or
// an environment variable's value, not free text): its password is
// hidden wherever it ends, even when it holds characters a URL needs
// percent-encoded (a space, a quote, '#', '/', '@') that end URL's
// search for it in free text (decision 424).
func Conn(conn string) string {
	urls := splitURLs(conn)
	for i, u := range urls {
		urls[i] = URL(hide(u, passwords(u)))
	}
	return strings.Join(urls, ",")
}

// splitURLs splits a list of URLs (nats://a:p@n1,nats://a:p@n2) at the
// commas before each scheme after the first, so that each URL's password
// is looked for in it alone.
func splitURLs(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return append(out, s)
		}
		next := strings.Index(s[i+3:], "://")
		if next < 0 {
			return append(out, s)
		}
		cut := strings.LastIndexByte(s[:i+3+next], ',')
		if cut < 0 {
			return append(out, s)
		}
		out = append(out, s[:cut])
		s = s[cut+1:]
	}
}

// Error returns err with every password of the given connection strings
// (and of any URL in its text) hidden in its message; nil stays nil.
// errors.Is and errors.As see err's chain unchanged.
func Error(err error, conns ...string) error {
	var secrets []string
	for _, c := range conns {
		for _, u := range splitURLs(c) {
			secrets = append(secrets, passwords(u)...)
		}
	}
	return Secrets(err, secrets...)
}

// Secrets is Error for literal secrets (a token, a password): each is
// hidden wherever err's message quotes it, as are URLs' passwords.
func Secrets(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := URL(hide(msg, secrets))
	if clean == msg {
		return err
	}
	return &redacted{msg: clean, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// hide replaces in s every secret (4 bytes or more: shorter is no secret
// worth hiding everywhere) and the forms messages quote it in: Go's
// quoting (a driver's parse error, "parse \"postgres://...\"") and
// percent-encoding. Longer secrets first, so that one holding another is
// hidden whole.
func hide(s string, secrets []string) string {
	var forms []string
	for _, sec := range secrets {
		if len(sec) < 4 {
			continue
		}
		quoted := strconv.Quote(sec)
		forms = append(forms, sec, quoted[1:len(quoted)-1], url.QueryEscape(sec), url.PathEscape(sec),
			strings.TrimPrefix(url.UserPassword("", sec).String(), ":"))
	}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, Mask)
	}
	return s
}

// passwords are what may be the password of a URL or keyword/value
// connection string (none when it has none). Of a URL, the user
// information ends at an '@' before the host, which a password typed
// without percent-encoding may hold too: so every text from the first
// ':' after the scheme to each '@' after it is a candidate, the longest
// (to the last '@') holding any password whole.
func passwords(conn string) []string {
	if m := passwordQuery.FindStringSubmatch(conn); m != nil {
		if v, err := url.QueryUnescape(m[2]); err == nil && v != m[2] {
			return []string{m[2], v}
		}
		return []string{m[2]}
	}
	if m := passwordKV.FindStringSubmatch(conn); m != nil {
		return []string{strings.Trim(m[3], "'")}
	}
	i := strings.Index(conn, "://")
	if i < 0 {
		return nil
	}
	rest := conn[i+3:]
	colon := strings.IndexByte(rest, ':')
	if colon < 0 {
		return nil
	}
	var out []string
	for at := colon + 1; at < len(rest); at++ {
		if rest[at] == '@' {
			out = append(out, rest[colon+1:at])
		}
	}
	if len(out) > 0 {
		// A parser may cut such a password where a URL's part ends
		// ('#', '?', '/', '@', a space, a quote) and quote a piece of
		// it (golang-migrate's "pgx5://role:PIECE", pgx's host
		// "PIECE@127.0.0.1"): each piece is hidden too.
		out = append(out, strings.FieldsFunc(out[len(out)-1], func(r rune) bool {
			return strings.ContainsRune("#?/@ \t\n\"'`", r)
		})...)
	}
	return out
}
