package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/download"
)

// pullRetries is how many times hearth pull resumes a dropped connection
// on its own before giving up: a multi-gigabyte download over a home link
// meets a reset now and then, and each retry costs only a Range request.
const pullRetries = 5

func newPullCmd() *cobra.Command {
	var (
		asJSON      bool
		voices, dir string
	)
	cmd := &cobra.Command{
		Use:   "pull SPEC | hexgrad/Kokoro-82M [--voices NAMES]",
		Short: "Download a GGUF model, or the Kokoro-82M voice model, from Hugging Face",
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

hearth pull hexgrad/Kokoro-82M[@revision] fetches the voice model that
hearth speak, the Voice tab and /v1/audio/speech use: config.json,
kokoro-v1_0.pth (327 MB) and the voice packs --voices names (about 0.5 MB
each; by default ` + strings.Join(app.DefaultKokoroVoices, ", ") + `;
"english" for every English voice, "all" for all of them), into the same
cache, and links them into the Kokoro directory (--dir, by default
` + defaultKokoroHint() + `). Pulling again with other voices adds them.

$HF_TOKEN opens gated and private repositories (it is sent to the hub only,
never to the CDN it redirects to); $HF_ENDPOINT names a mirror. This is the
only network access Hearth makes, and only when asked.`,
		Example: `  hearth pull bartowski/Llama-3.2-1B-Instruct-GGUF:Llama-3.2-1B-Instruct-Q4_K_M.gguf
  hearth pull unsloth/Qwen3-4B-GGUF@main:Qwen3-4B-Q4_K_M.gguf --json
  hearth pull https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/blob/main/qwen2.5-0.5b-instruct-q4_k_m.gguf
  hearth pull hexgrad/Kokoro-82M
  hearth pull hexgrad/Kokoro-82M --voices af_heart,bf_emma,am_adam`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Ctrl-C ends the download through its context, so it reports
			// what it kept rather than dying mid-write.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			bar := &pullProgress{w: cmd.ErrOrStderr()}
			opts := download.Options{
				Progress: bar.update,
				Retries:  pullRetries,
				Waiting: func(lock string) {
					bar.note(fmt.Sprintf("another download of this file is running (lock %s); waiting for it", lock))
				},
			}
			if rev, ok := kokoroSpec(args[0]); ok {
				return pullKokoro(ctx, cmd, args[0], rev, voices, dir, opts, bar, asJSON)
			}
			if cmd.Flags().Changed("voices") || cmd.Flags().Changed("dir") {
				return fmt.Errorf("--voices and --dir are for %s, not %s", app.KokoroRepo, args[0])
			}
			spec, err := download.ParseSpec(args[0])
			if err != nil {
				return err
			}
			res, err := download.Download(ctx, spec, opts)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"path", "sha256", "bytes", …} (for Kokoro-82M {"dir", "voices", …}) instead of the path`)
	cmd.Flags().StringVar(&voices, "voices", "", `Kokoro's voice packs to pull, by name (af_heart,am_adam), or "english" or "all" (default `+strings.Join(app.DefaultKokoroVoices, ",")+`)`)
	cmd.Flags().StringVar(&dir, "dir", "", "the Kokoro directory to put Kokoro-82M in (default kokoro/ in Hearth's folder, where hearth speak looks)")
	return cmd
}

// kokoroSpec reports whether s names Kokoro's repository as a whole,
// hexgrad/Kokoro-82M or hexgrad/Kokoro-82M@REV, and its revision.
func kokoroSpec(s string) (rev string, ok bool) {
	repo, rev, _ := strings.Cut(strings.TrimSpace(s), "@")
	// The hub's repository names are case-insensitive.
	return rev, strings.EqualFold(repo, app.KokoroRepo)
}

// pullKokoro is hearth pull hexgrad/Kokoro-82M: the model and the voices
// named into the Kokoro directory, with one bar over all their bytes.
func pullKokoro(ctx context.Context, cmd *cobra.Command, arg, rev, voices, dir string, opts download.Options, bar *pullProgress, asJSON bool) error {
	if strings.Contains(arg, "@") && rev == "" {
		return fmt.Errorf("%s: empty revision after @", arg)
	}
	var names []string
	if voices != "" {
		names = strings.Split(voices, ",")
	}
	res, err := app.PullKokoro(ctx, app.KokoroPullOptions{
		Revision: rev,
		Voices:   names,
		Dir:      dir,
		Download: opts,
		Progress: func(p app.KokoroProgress) { bar.update(p.Done, p.Total) },
	})
	bar.finish()
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w; run hearth pull %s again to resume", err, arg)
	}
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if !asJSON {
		_, err := fmt.Fprintln(w, res.Dir)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(kokoroPullReport{
		Dir: res.Dir, Snapshot: res.Snapshot, Repo: app.KokoroRepo, Commit: res.Commit,
		Voices: res.Voices, Bytes: res.Bytes, Fetched: res.Fetched,
	})
}

// kokoroPullReport is hearth pull hexgrad/Kokoro-82M's --json shape.
type kokoroPullReport struct {
	Dir      string   `json:"dir"`      // the Kokoro directory hearth speak reads
	Snapshot string   `json:"snapshot"` // the files in the hub cache
	Repo     string   `json:"repo"`
	Commit   string   `json:"commit"`
	Voices   []string `json:"voices"`
	Bytes    int64    `json:"bytes"`
	Fetched  int64    `json:"fetched"` // bytes received by this run; 0 when the cache had everything
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
