package clocale

import (
	"os"
	"testing"
)

func TestNormalizeAndRestore(t *testing.T) {
	init := saved
	t.Cleanup(func() { saved = init })
	cases := []struct {
		name                   string
		lcAll, lcMessages, lng string
		wantVar, wantValue     string // the variable Fyne reads, and what it reads
	}{
		{"Debian default", "", "", "C.UTF-8", "LANG", "C"},
		{"lower-case codeset", "", "", "C.utf8", "LANG", "C"},
		{"POSIX with codeset", "", "", "POSIX.UTF-8", "LANG", "POSIX"},
		{"LC_ALL decides", "C.UTF-8", "", "en_US.UTF-8", "LC_ALL", "C"},
		{"LC_MESSAGES decides", "", "C.UTF-8", "de_DE.UTF-8", "LC_MESSAGES", "C"},
		{"a real language is kept", "", "", "en_GB.UTF-8", "LANG", "en_GB.UTF-8"},
		{"plain C is kept", "", "", "C", "LANG", "C"},
		{"modifier only", "", "", "C@euro", "LANG", "C"},
		{"nothing set", "", "", "", "LANG", ""},
		{"a language named like C is kept", "", "", "Cy_GB.UTF-8", "LANG", "Cy_GB.UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			saved.name, saved.value = "", ""
			t.Setenv("LC_ALL", c.lcAll)
			t.Setenv("LC_MESSAGES", c.lcMessages)
			t.Setenv("LANG", c.lng)
			before := map[string]string{"LC_ALL": c.lcAll, "LC_MESSAGES": c.lcMessages, "LANG": c.lng}

			Normalize()
			if got := os.Getenv(c.wantVar); got != c.wantValue {
				t.Errorf("after Normalize %s = %q, want %q", c.wantVar, got, c.wantValue)
			}
			Restore()
			for name, want := range before {
				if got := os.Getenv(name); got != want {
					t.Errorf("after Restore %s = %q, want the user's %q", name, got, want)
				}
			}
		})
	}
}
