package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestInfoJSONListsTheChosenAdapter(t *testing.T) {
	cmd := newInfoCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep infoReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("hearth info --json is not JSON: %v\n%s", err, out.String())
	}
	if len(rep.Adapters) == 0 || rep.Chosen == nil {
		t.Fatalf("no adapter chosen: %+v", rep)
	}
	c := rep.Chosen
	if c.Name == "" || c.Backend == "" || c.Limits.MaxStorageBufferBindingSize == 0 || len(c.Features) == 0 {
		t.Errorf("chosen adapter lacks name, backend, limits or features: %+v", c)
	}
	// The shader language is tried on a device, not read off the feature
	// list (engine/gpu's TestBindingLanguage pins lavapipe's answer).
	if rep.Language == nil {
		t.Fatalf("no shader language reported (%s)", rep.LanguageError)
	}
	var text bytes.Buffer
	printInfo(&text, rep)
	if want := "shader language              " + rep.Language.String(); !strings.Contains(text.String(), want) {
		t.Errorf("the text report lacks %q:\n%s", want, text.String())
	}
	// And which weight types decode on 8-bit activations.
	if !slices.Contains(rep.DecodeQ8, "Q4_K") || !strings.Contains(text.String(), "8-bit decode activations     Q4_K") {
		t.Errorf("the report does not say Q4_K decodes on 8-bit activations: %v\n%s", rep.DecodeQ8, text.String())
	}
}

// TestInfoSaysWhereAutoRuns: hearth info reports where text, speech and
// training run under auto and why: over a software adapter (lavapipe, as
// on CI) text and speech on the CPU, training on that adapter.
func TestInfoSaysWhereAutoRuns(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "")
	cmd := newInfoCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var rep infoReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Chosen == nil {
		t.Fatalf("no adapter chosen: %+v", rep)
	}
	onChosen := "gpu: " + rep.Chosen.Label()
	if rep.AutoTraining.Backend != onChosen || rep.AutoTraining.Reason == "" {
		t.Errorf("training under auto: %+v, want %s with a reason", rep.AutoTraining, onChosen)
	}
	if rep.Chosen.Type == "cpu" {
		if rep.Auto.Backend != "cpu" || !strings.Contains(rep.Auto.Reason, "software renderer") {
			t.Errorf("text under auto over the software adapter %s: %+v, want the CPU, saying why", rep.Chosen.Name, rep.Auto)
		}
		if !strings.Contains(rep.AutoTraining.Reason, "software renderer") {
			t.Errorf("training on the software adapter without saying so: %q", rep.AutoTraining.Reason)
		}
	} else if rep.Auto.Backend != onChosen || rep.Auto.Reason == "" {
		t.Errorf("text under auto: %+v, want %s with a reason", rep.Auto, onChosen)
	}
	var text bytes.Buffer
	printInfo(&text, rep)
	if !strings.Contains(text.String(), rep.Auto.Reason) || !strings.Contains(text.String(), rep.AutoTraining.Reason) {
		t.Errorf("the text report leaves out a reason:\n%s", text.String())
	}
}

func TestInfoNamesAnUnknownAdapter(t *testing.T) {
	t.Setenv("HEARTH_ADAPTER", "no-such-gpu-anywhere")
	cmd := newInfoCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "no-such-gpu-anywhere") {
		t.Fatalf("HEARTH_ADAPTER matching nothing: %v, want an error naming it", err)
	}
}
