// Package clocale lets Fyne read the C locale's UTF-8 variant, Debian's
// default LANG=C.UTF-8, as the C locale it is.
//
// Fyne's language lookup (fyne.io/fyne/v2/lang, through
// github.com/jeandeaual/go-locale) accepts "C" and "POSIX" but turns
// "C.UTF-8" into the tag "C", which it cannot parse, and logs
// "Fyne error: Error parsing user locale C". It does so from its package
// init, so in every hearth command, window or not, and again whenever the
// studio resolves a font. A Go binary runs every linked package's init, so
// the command line cannot avoid Fyne's by not calling it; this package
// instead makes the environment Fyne reads parseable before that init runs.
//
// Importing the package rewrites the locale variable Fyne reads (the first
// set of LC_ALL, LC_MESSAGES and LANG) from C.UTF-8 or POSIX.UTF-8 to plain
// "C" or "POSIX", which mean the same untranslated messages. Its init runs
// before Fyne's: Go initialises packages in import-path order as soon as
// their imports are ready, this package imports only os and strings, and
// Fyne's lang package waits on golang.org/x/text/language, whose path sorts
// after this one's. Restore gives the user's value back, for commands that
// start other programs; Normalize applies the rewrite again for the studio.
package clocale

import (
	"os"
	"strings"
)

// saved is the variable Normalize rewrote and its value before; name is
// empty when nothing was rewritten.
var saved struct{ name, value string }

func init() { Normalize() }

// Normalize rewrites a C.UTF-8-style locale to the plain C or POSIX that
// Fyne understands; other locales are left alone.
func Normalize() {
	name, value := effective()
	base := value
	if i := strings.IndexAny(base, ".@"); i >= 0 {
		base = base[:i]
	}
	if value == base || (base != "C" && base != "POSIX") {
		return
	}
	if err := os.Setenv(name, base); err != nil {
		return // the variable stays as it was: Fyne logs its complaint, nothing breaks
	}
	saved.name, saved.value = name, value
}

// Restore puts back the value Normalize rewrote, if any.
func Restore() {
	if saved.name == "" {
		return
	}
	_ = os.Setenv(saved.name, saved.value) // the name was settable a moment ago
	saved.name, saved.value = "", ""
}

// effective is the variable that decides the locale of messages, as
// go-locale looks it up, and its value.
func effective() (name, value string) {
	for _, name := range [...]string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := os.Getenv(name); v != "" {
			return name, v
		}
	}
	return "", ""
}
