package events

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrInvalidName refuses a name that would look like another one, or like
// nothing: see CheckNames.
var ErrInvalidName = NewRefusal("invalid_name", "invalid name")

// CheckNames is the ledger's admission check on the names an event
// introduces: the consumer paths of a plan and the hosts and groups its
// ownership entries name, and the host and group of host_up. Each must
// be in Unicode normalization form NFKC (so in NFC too: a name typed
// with a decomposed "é" and one with the composed "é" cannot both
// exist, nor a fullwidth "ａ" beside "a"), and hold no character that
// renders invisibly or reorders the text around it (CheckName).
//
// It is not part of the fold: the engine still folds every stored event
// as the rules version it was written under says (a name accepted
// before this check existed folds exactly as before, and later events
// may keep referring to it). Demand, release and host_down only refer to
// names a plan or a host_up introduced, so the engine refuses any other
// (unknown_consumer, unknown_host); they are not checked here, so that a
// pool holding such a name from before can still release it or take it
// down. docs/decisions.md 160.
func CheckNames(p Payload) error {
	switch e := p.(type) {
	case *PlanChange:
		for _, c := range e.Plan.Consumers {
			if err := CheckName("consumer path", c.Path); err != nil {
				return err
			}
			for _, o := range c.Own {
				if err := CheckName("host", o.Host); err != nil {
					return err
				}
				if err := CheckName("group", o.Group); err != nil {
					return err
				}
			}
		}
	case *HostUp:
		if err := CheckName("host", e.Host); err != nil {
			return err
		}
		return CheckName("group", e.Group)
	}
	return nil
}

// CheckName refuses (ErrInvalidName) a name, of the kind given for the
// message, that holds a character people cannot see or that changes how
// the text around it is shown, or that NFKC normalization would change:
//
//   - format characters (Unicode category Cf: bidirectional controls such
//     as U+202E, zero-width space, joiners and non-joiners, word joiner,
//     soft hyphen, the byte order mark, tags), the other default-ignorable
//     code points (Hangul fillers, U+034F, ...) and variation selectors;
//   - control characters (Cc), private-use (Co), surrogates (Cs) and
//     code points Unicode has not assigned (Cn): they have no agreed look;
//   - anything NFKC maps to something else: decomposed accents (not NFC),
//     fullwidth and halfwidth forms, ligatures, superscripts, circled and
//     other compatibility characters, no-break and other special spaces;
//   - a component (between '/' and '.') that mixes scripts as look-alike
//     names do (Latin with Cyrillic or Greek letters, "pаth" with a
//     Cyrillic "а"), or digits of two numbering systems (mixedScripts:
//     UTS #39's Moderately Restrictive level).
//
// Everything else is allowed (letters and marks of every script, digits,
// punctuation, symbols), within each kind's own rules (the engine's for
// paths, ValidateHostName's for hosts). The error names the first
// offending code point. Invalid UTF-8 is refused too.
func CheckName(kind, name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %s %.64q is not UTF-8", ErrInvalidName, kind, name)
	}
	for _, r := range name {
		if why := Invisible(r); why != "" {
			return fmt.Errorf("%w: %s %.64q contains %s, %s", ErrInvalidName, kind, name, codePoint(r), why)
		}
	}
	if !norm.NFKC.IsNormalString(name) {
		r := firstChanged(name)
		why := "a compatibility form of another character"
		if !norm.NFC.IsNormalString(name) {
			why = "not in NFC (it composes with what precedes it, or is out of canonical order)"
		}
		return fmt.Errorf("%w: %s %.64q contains %s, %s: write %.64q", ErrInvalidName, kind, name, codePoint(r), why, norm.NFKC.String(name))
	}
	if why := mixedScripts(kind, name); why != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, why)
	}
	return nil
}

// Invisible says why r may not be in a name or an id (it renders
// invisibly, reorders the text around it, or has no agreed look), or "".
func Invisible(r rune) string {
	switch {
	case unicode.Is(unicode.Cf, r):
		return "a format character (renders invisibly or reorders text)"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return "a character that renders invisibly"
	case unicode.IsControl(r):
		return "a control character"
	case unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r):
		return "a private-use or surrogate code point"
	case !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z):
		return "a code point Unicode has not assigned"
	}
	return ""
}

// firstChanged is the rune at which s stops being in NFKC: the end of
// its shortest prefix that is not.
func firstChanged(s string) rune {
	for i, r := range s {
		if !norm.NFKC.IsNormalString(s[:i+utf8.RuneLen(r)]) {
			return r
		}
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// codePoint is "U+202E" (Unicode's names would add a megabyte of tables
// to the binary; the code point, what kind of character it is and the
// name to write instead are enough to act on).
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }
