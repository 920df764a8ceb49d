package events

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// mixedScripts says why name, of the kind given for the message, mixes
// scripts the way look-alike names do, or "". Each component of the
// name (what lies between '/' and '.') must meet Unicode TS #39's
// "Moderately Restrictive" level (section 5.2), its letters' scripts
// (Script property; Common and Inherited, such as punctuation, ASCII
// digits and combining marks, count for none):
//
//   - one script; or
//   - Latin with Han, Hiragana and Katakana (Japanese), with Han and
//     Bopomofo (Chinese), or with Han and Hangul (Korean); or
//   - Latin with one other script recommended for identifiers (Unicode
//     UAX #31, table 5) but Cyrillic and Greek, whose letters copy
//     Latin's (а, е, о, р, с, х; Α, Β, Ε, Ο, ...).
//
// Its decimal digits, too, come from one numbering system, and beside
// Latin letters that is 0-9 (UTS #39 section 5.3: "৪" beside "8").
//
// A component written wholly in one script is accepted even where each
// of its letters looks like a Latin one (a whole-script confusable such
// as Cyrillic "рау"): telling those apart needs Unicode's confusables
// data, which no well-kept Go library carries (docs/decisions.md 191).
func mixedScripts(kind, name string) string {
	for _, comp := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '.' }) {
		var scripts []string
		first := map[string]rune{}
		zero := rune(-1)
		for _, r := range comp {
			if unicode.Is(unicode.Nd, r) {
				z := digitZero(r)
				if zero >= 0 && z != zero {
					return fmt.Sprintf("%s %.64q mixes the digits of two numbering systems in %.64q (%s beside %s)", kind, name, comp, codePoint(zero), codePoint(z))
				}
				zero = z
			}
			s := scriptOf(r)
			if s == "Common" || s == "Inherited" || s == "" {
				continue
			}
			if _, ok := first[s]; !ok {
				first[s] = r
				scripts = append(scripts, s)
			}
		}
		if zero >= 0 && zero != '0' && slices.Contains(scripts, "Latin") {
			return fmt.Sprintf("%s %.64q has Latin letters and digits other than 0-9 in %.64q (%s): use 0-9 beside Latin letters", kind, name, comp, codePoint(zero))
		}
		if !moderatelyRestrictive(scripts) {
			var names []string
			for _, s := range scripts {
				names = append(names, fmt.Sprintf("%s (%s)", s, codePoint(first[s])))
			}
			return fmt.Sprintf("%s %.64q mixes scripts in %.64q: %s; write each part of a name in one script (Latin may go with Han, Hiragana, Katakana, Hangul, Bopomofo, or one other script but Cyrillic and Greek)",
				kind, name, comp, strings.Join(names, ", "))
		}
	}
	return ""
}

// moderatelyRestrictive reports whether a component's scripts meet UTS
// #39's Moderately Restrictive level.
func moderatelyRestrictive(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, set := range [][]string{
		{"Latin", "Han", "Hiragana", "Katakana"},
		{"Latin", "Han", "Bopomofo"},
		{"Latin", "Han", "Hangul"},
	} {
		if subset(scripts, set) {
			return true
		}
	}
	if len(scripts) != 2 || !slices.Contains(scripts, "Latin") {
		return false
	}
	other := scripts[0]
	if other == "Latin" {
		other = scripts[1]
	}
	return other != "Cyrillic" && other != "Greek" && slices.Contains(recommendedScripts, other)
}

func subset(a, of []string) bool {
	for _, s := range a {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// recommendedScripts are the scripts Unicode recommends for identifiers
// (UAX #31, table 5, besides Common and Inherited); the others (limited
// use, excluded: Cherokee, whose letters copy Latin's, runic, ...) may
// not be mixed with Latin.
var recommendedScripts = []string{
	"Arabic", "Armenian", "Bengali", "Bopomofo", "Cyrillic", "Devanagari", "Ethiopic", "Georgian", "Greek",
	"Gujarati", "Gurmukhi", "Han", "Hangul", "Hebrew", "Hiragana", "Kannada", "Katakana", "Khmer", "Lao",
	"Latin", "Malayalam", "Myanmar", "Oriya", "Sinhala", "Tamil", "Telugu", "Thaana", "Thai", "Tibetan",
}

// digitZero is the zero of r's numbering system: Unicode puts each
// system's decimal digits 0 to 9 at consecutive code points.
func digitZero(r rune) rune {
	start := r // the first digit of the run of consecutive digits r is in
	for start > 0 && r-start < 64 && unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return start + (r-start)/10*10
}

// scriptOf is the Script property of r ("" for none), from the standard
// library's tables (unicode.Scripts), searched as one sorted list.
func scriptOf(r rune) string {
	if r < 0x80 {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return "Latin"
		}
		return "Common"
	}
	scriptRanges.once.Do(buildScriptRanges)
	rs := scriptRanges.list
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= r })
	if i < len(rs) && rs[i].lo <= r {
		return rs[i].script
	}
	return ""
}

type scriptRange struct {
	lo, hi rune
	script string
}

var scriptRanges struct {
	once sync.Once
	list []scriptRange
}

func buildScriptRanges() {
	var list []scriptRange
	add := func(lo, hi, stride rune, s string) {
		if stride == 1 {
			list = append(list, scriptRange{lo, hi, s})
			return
		}
		for r := lo; r <= hi; r += stride {
			list = append(list, scriptRange{r, r, s})
		}
	}
	for s, t := range unicode.Scripts {
		for _, r := range t.R16 {
			add(rune(r.Lo), rune(r.Hi), rune(r.Stride), s)
		}
		for _, r := range t.R32 {
			add(rune(r.Lo), rune(r.Hi), rune(r.Stride), s)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].lo < list[j].lo })
	scriptRanges.list = list
}
