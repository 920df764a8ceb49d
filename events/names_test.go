package events

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckNameRefusesLookAlikesAndInvisibles(t *testing.T) {
	for _, tc := range []struct {
		name, in, codePoint string
	}{
		{"right-to-left override", "/team\u202Eb", "U+202E"},
		{"left-to-right isolate", "/a\u2066b", "U+2066"},
		{"zero width space", "/team\u200Ba", "U+200B"},
		{"zero width joiner", "/a\u200Db", "U+200D"},
		{"word joiner", "/a\u2060b", "U+2060"},
		{"byte order mark", "/\uFEFFa", "U+FEFF"},
		{"soft hyphen", "/a\u00ADb", "U+00AD"},
		{"tag character", "/a\U000E0041", "U+E0041"},
		{"hangul filler", "/a\u3164", "U+3164"},
		{"combining grapheme joiner", "/a\u034Fb", "U+034F"},
		{"variation selector", "/a\uFE0F", "U+FE0F"},
		{"private use", "/a\uE000", "U+E000"},
		{"unassigned", "/a\U000E0080", "U+E0080"},
		{"fullwidth letters", "/ｔｅａｍ", "U+FF54"},
		{"ligature", "/ﬁnance", "U+FB01"},
		{"superscript", "/team²", "U+00B2"},
		{"no-break space", "h\u00A01", "U+00A0"},
		{"decomposed accent (NFD)", "/cafe\u0301", "U+0301"},
		{"Kelvin sign", "/\u212A", "U+212A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckName("consumer path", tc.in)
			if !errors.Is(err, ErrInvalidName) || CodeOf(err) != "invalid_name" {
				t.Fatalf("CheckName(%q) = %v, want invalid_name", tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.codePoint) {
				t.Errorf("CheckName(%q) = %q, want it to name %s", tc.in, err, tc.codePoint)
			}
		})
	}
}

func TestCheckNameAcceptsNFC(t *testing.T) {
	for _, in := range []string{
		"/eng/dev", "/café", "/équipe/ü", "/Ωμέγα/δ", "/チーム/開発", "/команда", "/فريق", "/צוות",
		"/한국", "/a-b_c.d@e+f", "gpu-07.example.com", "rack 3", "/x/π",
	} {
		if err := CheckName("name", in); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", in, err)
		}
	}
}

func TestCheckNamesCoversWhatEventsIntroduce(t *testing.T) {
	bad := "/a\u200Bb"
	slots := int64(1)
	for _, tc := range []struct {
		name string
		p    Payload
		want bool
	}{
		{"plan path", &PlanChange{Plan: Plan{Consumers: []Consumer{{Path: "/ok"}, {Path: bad}}}}, true},
		{"plan own host", &PlanChange{Plan: Plan{Consumers: []Consumer{{Path: "/ok", Own: []OwnEntry{{Host: "h\u202E1"}}}}}}, true},
		{"plan own group", &PlanChange{Plan: Plan{Consumers: []Consumer{{Path: "/ok", Own: []OwnEntry{{Group: "ｇｐｕ", Slots: &slots}}}}}}, true},
		{"host_up host", &HostUp{Host: "h\u200B1", Slots: 1}, true},
		{"host_up group", &HostUp{Host: "h1", Group: "gpu\u2066", Slots: 1}, true},
		{"plan, every name fine", &PlanChange{Plan: Plan{Consumers: []Consumer{{Path: "/café/é"}}}}, false},
		// References are the engine's to check against the pool: a name
		// accepted before this check can still be released or taken down.
		{"demand refers", &Demand{Demands: map[string]int64{bad: 1}}, false},
		{"release refers", &Release{Consumer: bad, Slots: 1}, false},
		{"host_down refers", &HostDown{Host: "h\u200B1"}, false},
	} {
		err := CheckNames(tc.p)
		if got := errors.Is(err, ErrInvalidName); got != tc.want {
			t.Errorf("%s: CheckNames = %v, want refused %v", tc.name, err, tc.want)
		}
	}
}

// Look-alike names that mix scripts within one component (UTS #39's
// Moderately Restrictive level) are refused as invalid_name, naming the
// scripts; names of one script, and the mixes people write (Japanese,
// Chinese, Korean with Latin, Latin with Arabic or Hebrew), are accepted.
func TestMixedScriptNames(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"/team/аdmin", "Cyrillic (U+0430)"},   // Cyrillic а in a Latin component
		{"/prod/gpu-οne", "Greek (U+03BF)"},    // Greek ο
		{"/ΑΒ-аб", "Greek (U+0391), Cyrillic"}, // Greek with Cyrillic
		{"/eng/Ꭺlpha", "Cherokee"},             // Cherokee Ꭺ: not for identifiers
		{"/gpu-8৪", "two numbering systems"},   // ASCII 8 beside Bengali ৪
		{"/gpu-৪", "digits other than 0-9"},    // Bengali ৪ beside Latin letters
	} {
		err := CheckName("consumer path", c.name)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want invalid_name naming %s", c.name, err, c.want)
		}
	}
	if err := CheckName("host", "gpu-01.rаck.example"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a host label mixing Latin and Cyrillic: %v", err)
	}
	for _, ok := range []string{
		"/команда/разработка", "/ομάδα", "/team/команда", // one script per component
		"/チーム/開発-dev", "/研究-lab", "/한국-team", "/注音ㄅ-x", // Japanese, Chinese, Korean mixes with Latin
		"/ml-فريق", "/team-צוות", "/café/équipe", "/a1/b_2-c.3", "/بيانات-٣٤", // Latin with one recommended script; Arabic letters with Arabic digits
	} {
		if err := CheckName("consumer path", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
}
