package cli

import (
	"bytes"

	"github.com/spf13/cobra"
)

// execute runs cmd with args and returns what it wrote to its standard
// output and its standard error.
func execute(cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}
