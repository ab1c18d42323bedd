package loglevel

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Level{
		"": Error, "error": Error, "warn": Warn, "warning": Warn,
		"info": Info, "debug": Debug, " DEBUG ": Debug,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && in != "warning" && strings.TrimSpace(strings.ToLower(in)) != got.String() {
			t.Errorf("Parse(%q).String() = %q, want the name back", in, got)
		}
	}
	if _, err := Parse("loud"); err == nil || !strings.Contains(err.Error(), `HEARTH_LOG "loud"`) {
		t.Errorf("Parse(loud) error = %v, want one naming HEARTH_LOG and the value", err)
	}
}
