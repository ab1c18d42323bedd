package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/internal/atomicfile"
	"github.com/hearthstudio/hearth/vocoder/audio"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
)

// speakReport is hearth speak's --json shape.
type speakReport struct {
	Chunks           int         `json:"chunks"`
	AudioSeconds     float64     `json:"audio_seconds"`
	SynthesisSeconds float64     `json:"synthesis_seconds"`
	Output           string      `json:"output,omitempty"`
	Words            string      `json:"words,omitempty"`
	Played           bool        `json:"played"`
	Note             string      `json:"note,omitempty"`
	Timeline         []wordsJSON `json:"-"`
}

// wordsJSON is one chunk in the --words JSON file: its text, where it
// starts and ends, and its words, in seconds from the start of the speech.
type wordsJSON struct {
	Text  string     `json:"text"`
	Start float64    `json:"start"`
	End   float64    `json:"end"`
	Words []wordJSON `json:"words"`
}

type wordJSON struct {
	Text  string  `json:"text"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

func newSpeakCmd() *cobra.Command {
	var (
		text, file, voice, out, words, modelDir, backend string
		speed                                            float64
		float, play, list, asJSON                        bool
	)
	cmd := &cobra.Command{
		Use:   "speak -t TEXT | -f FILE --voice NAME [-o out.wav] [--play]",
		Short: "Say text with a Kokoro voice: write a WAV, play it, or both",
		Long: `Say English text with Kokoro-82M. The text is phonemized with espeak-ng and
synthesised sentence by sentence: with --play the first sentence plays while
the rest is made. -o writes a 24 kHz mono WAV (16-bit, or 32-bit float with
--float); --words writes when each word is heard, as WebVTT (FILE.vtt, one
cue per word) or JSON (any other name: chunks with their words, in seconds).

--voice is a voice pack's name (hearth speak --list-voices) or a blend of
several, "af_heart:0.6,am_adam:0.4". Voices starting with b are read with
British English phonemes.

The model is the Kokoro directory: --model DIR, by default kokoro/ in
Hearth's folder (` + defaultKokoroHint() + `), holding config.json,
kokoro-v1_0.pth (or .safetensors) and voices/*.pt from hexgrad/Kokoro-82M:
hearth pull hexgrad/Kokoro-82M puts them there.`,
		Example: `  hearth speak -t "Hello there. How are you?" --voice af_heart -o hello.wav
  hearth speak -f chapter.txt --voice af_heart:0.6,am_adam:0.4 --speed 1.1 --play
  echo "Read from stdin." | hearth speak -f - --voice bf_emma -o out.wav --words out.vtt
  hearth speak --list-voices`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e := app.NewEngine(app.EngineOptions{Backend: backend, GPU: app.GPUOptionsFromEnv(), Kokoro: modelDir})
			defer e.Close()
			stdout, log := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if list {
				names, err := e.Voices()
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(stdout).Encode(map[string][]string{"voices": names})
				}
				fmt.Fprintln(stdout, strings.Join(names, "\n"))
				return nil
			}

			flags := cmd.Flags()
			switch {
			case flags.Changed("text") && flags.Changed("file"):
				return errors.New("give the text with -t or -f, not both")
			case !flags.Changed("text") && !flags.Changed("file"):
				return errors.New("no text: give -t TEXT, or -f FILE (- for standard input)")
			case out == "" && !play && words == "":
				return errors.New("nothing to do with the speech: give -o FILE.wav, --play, or both")
			}
			if flags.Changed("file") {
				var data []byte
				var err error
				if file == "-" {
					data, err = io.ReadAll(cmd.InOrStdin())
				} else {
					data, err = os.ReadFile(file)
				}
				if err != nil {
					return err
				}
				text = string(data)
			}
			if err := kokoro.CheckSpeed(speed); err != nil {
				return fmt.Errorf("--speed: %w", err)
			}

			rep := speakReport{Output: out, Words: words}
			var player *app.Player
			if play {
				p, err := app.NewPlayer()
				switch {
				case errors.Is(err, app.ErrNoAudioDevice):
					rep.Note = fmt.Sprintf("not playing: %v", err)
					if out != "" {
						rep.Note += "; the speech is still written to " + out
					}
					fmt.Fprintln(log, "note: "+rep.Note)
					if out == "" && words == "" {
						return fmt.Errorf("--play: %w, and no -o to write the speech to instead", err)
					}
				case err != nil:
					return err
				default:
					player = p
					defer p.Close()
				}
			}

			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			var audioLen int64
			// speak runs the synthesis, handing each chunk to the player,
			// the WAV (when w is not nil) and the timeline.
			speak := func(w *audio.WAVWriter) error {
				return e.Speak(ctx, app.SpeakRequest{Text: text, Voice: voice, Speed: speed}, func(c app.SpeechChunk) error {
					if player != nil {
						player.Enqueue(c.Audio)
					}
					if w != nil {
						if err := w.Write(c.Audio); err != nil {
							return err
						}
					}
					audioLen += int64(len(c.Audio))
					end := c.Start + samplesDuration(len(c.Audio))
					rep.Chunks++
					rep.Timeline = append(rep.Timeline, timelineEntry(c, end))
					if !asJSON {
						fmt.Fprintf(log, "[%d] %5.1fs  %s\n", rep.Chunks, end.Seconds(), excerpt(c.Text))
					}
					return nil
				})
			}
			var err error
			if out != "" {
				// Streamed to a temporary file beside out and renamed at the
				// end: memory stays one chunk however long the text, and a
				// failure (or Ctrl-C) leaves what was at out.
				format := audio.PCM16
				if float {
					format = audio.Float32
				}
				var speakErr error
				err = atomicfile.WriteFrom(out, 0o644, func(f io.Writer) error {
					w, err := audio.NewWAVWriter(f, app.SampleRate, format, -1)
					if err != nil {
						return err
					}
					if speakErr = speak(w); speakErr != nil {
						return speakErr
					}
					return w.Close()
				})
				if speakErr != nil {
					err = speakErr // the speech's own error, not one of writing out
				}
			} else {
				err = speak(nil)
			}
			if err != nil {
				if player != nil {
					player.Stop()
				}
				if ctx.Err() != nil && out != "" {
					return fmt.Errorf("%w: interrupted; %s was not written", err, out)
				}
				return err
			}
			rep.SynthesisSeconds = time.Since(start).Seconds()
			rep.AudioSeconds = samplesDuration(int(audioLen)).Seconds()
			if words != "" {
				if err := writeWords(words, rep.Timeline); err != nil {
					return err
				}
			}
			if !asJSON {
				fmt.Fprintf(log, "%.1f s of speech in %.1f s (%.1f× real time)", rep.AudioSeconds, rep.SynthesisSeconds, rep.AudioSeconds/max(rep.SynthesisSeconds, 1e-9))
				if out != "" {
					fmt.Fprintf(log, "; wrote %s", out)
				}
				if words != "" {
					fmt.Fprintf(log, "; words in %s", words)
				}
				fmt.Fprintln(log)
			}
			if player != nil {
				if err := player.Wait(ctx); err != nil {
					player.Stop()
					return err
				}
				rep.Played = true
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(rep)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&text, "text", "t", "", "the text to say")
	f.StringVarP(&file, "file", "f", "", "read the text from FILE (- for standard input)")
	f.StringVar(&voice, "voice", "af_heart", "a voice pack's name, or a blend such as af_heart:0.6,am_adam:0.4")
	f.Float64Var(&speed, "speed", 1, fmt.Sprintf("speaking rate, %g to %g", kokoro.MinSpeed, kokoro.MaxSpeed))
	f.StringVarP(&out, "out", "o", "", "write the speech to FILE.wav (24 kHz mono)")
	f.BoolVar(&float, "float", false, "write 32-bit float samples instead of 16-bit PCM")
	f.BoolVar(&play, "play", false, "play the speech as it is made")
	f.StringVar(&words, "words", "", "write word timestamps to FILE: WebVTT for .vtt, else JSON")
	f.StringVar(&modelDir, "model", "", "the Kokoro directory (config.json, kokoro-v1_0.pth, voices/); default kokoro/ in Hearth's folder")
	f.StringVar(&backend, "backend", "auto", backendFlagHelp)
	f.BoolVar(&list, "list-voices", false, "list the voice packs in the Kokoro directory")
	f.BoolVar(&asJSON, "json", false, "print a report (or the voice list) as JSON")
	return cmd
}

func defaultKokoroHint() string {
	if d, err := app.DefaultKokoroDir(); err == nil {
		return d
	}
	return "~/.config/hearth/kokoro on Linux"
}

func samplesDuration(n int) time.Duration { return time.Duration(n) * time.Second / app.SampleRate }

func timelineEntry(c app.SpeechChunk, end time.Duration) wordsJSON {
	e := wordsJSON{Text: c.Text, Start: c.Start.Seconds(), End: end.Seconds(), Words: []wordJSON{}}
	for _, w := range c.Words {
		e.Words = append(e.Words, wordJSON{Text: w.Text, Start: w.Start.Seconds(), End: w.End.Seconds()})
	}
	return e
}

// excerpt shortens a chunk's text for a progress line.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return s
}

// writeWords writes the timeline to path: WebVTT, one cue per word, for a
// .vtt name; JSON otherwise.
func writeWords(path string, timeline []wordsJSON) error {
	if strings.EqualFold(filepath.Ext(path), ".vtt") {
		var b strings.Builder
		b.WriteString("WEBVTT\n")
		for _, c := range timeline {
			for _, w := range c.Words {
				fmt.Fprintf(&b, "\n%s --> %s\n%s\n", vttTime(w.Start), vttTime(w.End), vttEscape.Replace(w.Text))
			}
		}
		return atomicfile.Write(path, []byte(b.String()), 0o644)
	}
	if timeline == nil {
		timeline = []wordsJSON{}
	}
	data, err := json.MarshalIndent(map[string]any{"chunks": timeline}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// vttEscape escapes what WebVTT cue text reserves.
var vttEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// vttTime is WebVTT's hh:mm:ss.ttt.
func vttTime(sec float64) string {
	ms := int64(sec*1000 + 0.5)
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
