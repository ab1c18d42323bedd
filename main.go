// Command hearth is the Hearth studio and its command line: with no arguments it
// opens the desktop app, with a sub-command it runs that command (hearth --help).
package main

import (
	"fmt"
	"os"

	"github.com/hearthstudio/hearth/app/cli"
	"github.com/hearthstudio/hearth/internal/clocale"
	"github.com/hearthstudio/hearth/ui"
)

func main() {
	// clocale's init has let Fyne's init read a C.UTF-8 locale quietly; the
	// commands, and the programs they start, get the user's locale back.
	clocale.Restore()
	studio := func() error {
		clocale.Normalize() // the studio looks the locale up again as it draws
		return ui.Run()
	}
	if err := cli.NewRoot(studio).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hearth:", err)
		os.Exit(1)
	}
}
