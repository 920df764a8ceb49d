package redact

import (
	"regexp"
	"strings"
)

// Mask replaces a hidden password.
const Mask = "xxxxx"

// passwordKV matches password=VALUE in a keyword/value connection string,
// quoted or not.
var passwordKV = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:\\.|[^'\\])*'|[^\s]+)`)

// URL returns s with the password of every URL in it (SCHEME://USER:PASSWORD@HOST...)
// and every password=VALUE replaced by Mask. Anything that is not a
// secret is kept, so messages still say which role and host they mean.
func URL(s string) string {
	s = passwordKV.ReplaceAllString(s, "${1}"+Mask)
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

// Error returns err with every password of the given connection strings
// (and of any URL in its text) hidden in its message; nil stays nil.
// errors.Is and errors.As see err's chain unchanged.
func Error(err error, conns ...string) error {
	var secrets []string
	for _, c := range conns {
		secrets = append(secrets, password(c))
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
	clean := msg
	for _, sec := range secrets {
		if len(sec) >= 4 { // shorter is no secret worth hiding everywhere
			clean = strings.ReplaceAll(clean, sec, Mask)
		}
	}
	clean = URL(clean)
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

// password is the password of a URL or keyword/value connection string,
// "" when it has none.
func password(conn string) string {
	if m := passwordKV.FindStringSubmatch(conn); m != nil {
		return strings.Trim(m[2], "'")
	}
	i := strings.Index(conn, "://")
	if i < 0 {
		return ""
	}
	rest := conn[i+3:]
	end := strings.IndexAny(rest, " \t\n")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}
