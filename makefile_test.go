package main

import (
	"os"
	"strings"
	"testing"
)

// TestMakeTestRunsNoTimedFuzzing keeps `make test` deterministic: Go's fuzz
// coordinator can miss its own deadline on a loaded 2-core machine and fail
// with "context deadline exceeded" and no failing input, so timed fuzzing
// belongs to `make fuzz`; the seed corpora already run as ordinary tests.
func TestMakeTestRunsNoTimedFuzzing(t *testing.T) {
	b, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipes := map[string][]string{}
	target := ""
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "\t"):
			if target != "" {
				recipes[target] = append(recipes[target], line)
			}
		case strings.Contains(line, ":") && !strings.HasPrefix(line, "#") && !strings.Contains(line, "="):
			target = strings.TrimSpace(line[:strings.Index(line, ":")])
		case strings.TrimSpace(line) == "":
			target = ""
		}
	}
	if len(recipes["test"]) == 0 || len(recipes["fuzz"]) == 0 {
		t.Fatalf("Makefile: no recipe for test (%d lines) or fuzz (%d lines)", len(recipes["test"]), len(recipes["fuzz"]))
	}
	for _, line := range recipes["test"] {
		if strings.Contains(line, "-fuzz ") || strings.Contains(line, "-fuzz=") {
			t.Errorf("make test runs a timed fuzzer: %s", strings.TrimSpace(line))
		}
	}
	for _, fuzzer := range []string{"FuzzRead", "FuzzFastPreTokenizers", "FuzzReadPTH"} {
		if !strings.Contains(strings.Join(recipes["fuzz"], "\n"), fuzzer) {
			t.Errorf("make fuzz does not run %s", fuzzer)
		}
	}
}
