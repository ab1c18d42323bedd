package cli

import (
	"bytes"
	"encoding/json"
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
