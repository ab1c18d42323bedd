// Command hearth is the Hearth studio and its command line: with no arguments it
// opens the desktop app, with a sub-command it runs that command (hearth --help).
package main

import (
	"fmt"
	"os"

	"github.com/hearthstudio/hearth/app/cli"
	"github.com/hearthstudio/hearth/ui"
)

func main() {
	if err := cli.NewRoot(ui.Run).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hearth:", err)
		os.Exit(1)
	}
}
