package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app/download"
)

// pullRetries is how many times hearth pull resumes a dropped connection
// on its own before giving up: a multi-gigabyte download over a home link
// meets a reset now and then, and each retry costs only a Range request.
const pullRetries = 5

func newPullCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pull SPEC",
		Short: "Download a GGUF model from Hugging Face into the Hugging Face cache",
		Long: `Download one .gguf file from a Hugging Face model repository into the
Hugging Face hub cache, which huggingface_hub shares: a file either of them
downloaded is not downloaded again. SPEC is owner/name:file.gguf (revision
main), owner/name@revision:path/file.gguf, or a https://huggingface.co/...
resolve or blob URL of the file.

The file goes to models--OWNER--NAME/blobs/<sha256> under $HF_HUB_CACHE
(else $HF_HOME/hub, else ~/.cache/huggingface/hub), linked from
snapshots/<commit>/<file>, whose path is printed for -m. An interrupted
download (Ctrl-C, a lost connection, a full disk) keeps what it received and
the same command resumes it; the file is checked against the SHA-256 the hub
publishes.

$HF_TOKEN opens gated and private repositories (it is sent to the hub only,
never to the CDN it redirects to); $HF_ENDPOINT names a mirror. This is the
only network access Hearth makes, and only when asked.`,
		Example: `  hearth pull bartowski/Llama-3.2-1B-Instruct-GGUF:Llama-3.2-1B-Instruct-Q4_K_M.gguf
  hearth pull unsloth/Qwen3-4B-GGUF@main:Qwen3-4B-Q4_K_M.gguf --json
  hearth pull https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/blob/main/qwen2.5-0.5b-instruct-q4_k_m.gguf`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := download.ParseSpec(args[0])
			if err != nil {
				return err
			}
			// Ctrl-C ends the download through its context, so it reports
			// what it kept rather than dying mid-write.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			bar := &pullProgress{w: cmd.ErrOrStderr()}
			res, err := download.Download(ctx, spec, download.Options{
				Progress: bar.update,
				Retries:  pullRetries,
				Waiting: func(lock string) {
					bar.note(fmt.Sprintf("another download of this file is running (lock %s); waiting for it", lock))
				},
			})
			bar.finish()
			if errors.Is(err, context.Canceled) {
				return fmt.Errorf("%w; run hearth pull %s again to resume", err, spec)
			}
			if err != nil {
				return err
			}
			return printPullReport(cmd.OutOrStdout(), spec, res, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"path", "sha256", "bytes", …} instead of the path`)
	return cmd
}

// pullProgress draws a byte bar on a terminal; elsewhere it prints nothing,
// since the path printed at the end says what arrived.
type pullProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *pullProgress) update(done, total int64) {
	if p.bar == nil {
		// The size is known only once the hub has answered.
		if p.bar = newBytesBar(p.w, total, false); p.bar == nil {
			return
		}
	}
	p.bar.Set64(done)
}

// note prints a line above the bar, or on its own where there is none.
func (p *pullProgress) note(s string) { lineAboveBar(p.w, p.bar, s) }

func (p *pullProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}

// pullReport is hearth pull's --json shape.
type pullReport struct {
	Path     string `json:"path"`
	SHA256   string `json:"sha256"`
	Bytes    int64  `json:"bytes"`
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	File     string `json:"file"`
	Commit   string `json:"commit"`
	Fetched  int64  `json:"fetched"` // bytes received by this run; 0 when the cache had the file
}

func printPullReport(w io.Writer, spec download.Spec, res download.Result, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(w, res.Path)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(pullReport{
		Path: res.Path, SHA256: res.SHA256, Bytes: res.Size,
		Repo: spec.Repo, Revision: spec.Revision, File: spec.File, Commit: res.Commit, Fetched: res.Fetched,
	})
}
