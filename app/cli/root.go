// Package cli is Hearth's command line: one cobra command per file, each a thin
// client of the engine and the packages below it. The contract (names, flags,
// --json) is DESIGN.md's and scripts depend on it.
package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/internal/loglevel"
)

// NewRoot builds the hearth command tree. studio is what runs when hearth is
// given no sub-command.
func NewRoot(studio func() error) *cobra.Command {
	root := &cobra.Command{
		Use:           "hearth",
		Short:         "Hearth: chat, speak and fine-tune local models on your own GPU",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return studio()
		},
	}
	var verbose bool
	root.PersistentFlags().BoolVar(&verbose, "verbose", false,
		"show the GPU libraries' and drivers' diagnostics too (HEARTH_LOG=debug; default $HEARTH_LOG, else errors only)")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if verbose {
			// Through the environment, which is where the GPU device,
			// opened deep in the engine, reads its settings.
			if err := os.Setenv(loglevel.Env, loglevel.Debug.String()); err != nil {
				return err
			}
		}
		_, err := loglevel.FromEnv()
		return err
	}
	root.AddCommand(
		newInfoCmd(),
		newTokenizeCmd(), newDetokenizeCmd(),
		newInspectCmd(),
		newQuantizeCmd(), newMergeCmd(), newTrainCmd(),
		newSynthCmd(), newImportCmd(), newVoiceCmd(),
		newGenerateCmd(), newChatCmd(), newLogitsCmd(), newEmbedCmd(), newBenchCmd(),
		newServeCmd(),
		newPullCmd(),
		newModelsCmd(),
		newSpeakCmd(),
	)
	return root
}
