package scenario

import (
	"strings"
	"testing"
)

const oneScenario = `plan:
  consumers: [{path: /A, share: 1}]
hosts: [{name: h1, slots: 4}]
steps:
  - events: [{type: demand, demands: {/A: 2}}]
    expect: {allocations: {/A: 2}}
`

// A file of two YAML documents (two scenarios concatenated, or a list of
// events with a --- line inside) is refused, naming the second document:
// yaml.Unmarshal reads the first and drops the rest without a word, so
// simulate, load and what-if would pass over the rest as if it were not
// there. A --- before the one document, and empty documents after it,
// are still one document.
func TestParseRefusesSeveralDocuments(t *testing.T) {
	for name, text := range map[string]string{
		"two scenarios":            oneScenario + "---\n" + strings.Replace(oneScenario, "/A: 2}}\n", "/A: 3}}\n", 1),
		"a scenario and then more": oneScenario + "---\nsteps: []\n",
	} {
		if _, err := Parse([]byte(text)); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
			t.Errorf("%s: Parse = %v, want a refusal naming the second document", name, err)
		}
	}
	for name, text := range map[string]string{
		"one document":              oneScenario,
		"a --- before it":           "---\n" + oneScenario,
		"an empty document after":   oneScenario + "---\n",
		"a document end marker":     oneScenario + "...\n",
		"a comment after a --- end": oneScenario + "---\n# nothing more\n",
	} {
		s, err := Parse([]byte(text))
		if err != nil || len(s.Steps) != 1 {
			t.Errorf("%s: Parse = %v", name, err)
		}
	}

	events := "events:\n  - {type: demand, demands: {/A: 5}}\n"
	if _, err := ParseEvents([]byte(events + "---\nevents:\n  - {type: demand, demands: {/A: 1}}\n")); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Errorf("ParseEvents of two documents = %v, want a refusal", err)
	}
	if evs, err := ParseEvents([]byte("---\n" + events + "---\n")); err != nil || len(evs) != 1 {
		t.Errorf("ParseEvents of one document = %d events, %v", len(evs), err)
	}
}
