package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/structured"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/engine/vision"
)

// defaultReplyTokens bounds a chat reply when -n is not given. A model
// ends its turn well before it (a long answer is a few hundred tokens), but
// one that never does, such as a synthetic test model or a base model with
// no chat training, would otherwise run to the end of an 8192-token context.
const defaultReplyTokens = 1024

func newChatCmd() *cobra.Command {
	var mf modelFlags
	var sf samplingFlags
	var prompt, system, schemaFile, mmproj string
	var images []string
	var n, imageTokens int
	var shift, asJSON bool
	cmd := &cobra.Command{
		Use:   "chat -m MODEL [-p PROMPT] [--image FILE]",
		Short: "Chat with a model through its chat template; interactive without -p",
		Long: "With -p, answer one message and exit. Without it, read messages from standard input,\n" +
			"one per line (end a line with \\ to continue it), keeping the conversation and the KV cache\n" +
			"between turns. /reset starts over, /exit (or end of input) leaves; Ctrl+C stops a reply.\n" +
			"--image (or /image FILE before a message) shows the model an image with the next message:\n" +
			"a vision model reads it with the mmproj file beside it, or the one --mmproj names.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			c := &chatLoop{l: l, sampling: sf, n: n, shift: shift, out: cmd.OutOrStdout(), log: cmd.ErrOrStderr(),
				session: model.NewSession(l.Runner), mmproj: mmproj, paired: mf.projector, imageTokens: imageTokens}
			defer c.closeVision()
			for _, f := range images {
				if err := c.attach(f); err != nil {
					return err
				}
			}
			if c.format, err = replyFormat(asJSON, schemaFile); err != nil {
				return err
			}
			if system != "" {
				c.history = append(c.history, chat.Message{Role: "system", Content: system})
			}
			c.system = len(c.history)
			if c.system > 0 {
				if p, err := l.Model.Chat.Render(chat.Request{Messages: c.history}); err == nil {
					c.keep = len(l.Model.Chat.Tokenize(p.Text))
				}
			}
			if cmd.Flags().Changed("prompt") {
				return c.turn(cmd, prompt)
			}
			return c.interactive(cmd, cmd.InOrStdin())
		},
	}
	mf.register(cmd)
	sf.register(cmd)
	cmd.Flags().StringVarP(&prompt, "prompt", "p", "", "one message to answer (non-interactive)")
	cmd.Flags().StringVar(&system, "system", "", "system prompt")
	cmd.Flags().IntVarP(&n, "n", "n", defaultReplyTokens, "most tokens per reply; a reply ends sooner at the model's end of turn; 0 is no limit but the context")
	cmd.Flags().BoolVar(&shift, "shift", false, "when the context fills, drop the oldest half of it instead of stopping")
	cmd.Flags().BoolVar(&asJSON, "json", false, "hold every reply to a JSON object (constrained decoding)")
	cmd.Flags().StringVar(&schemaFile, "schema", "", "hold every reply to JSON that validates against the JSON schema in this file")
	cmd.Flags().StringArrayVar(&images, "image", nil, "show the model this image (PNG, JPEG, GIF or WebP) with the first message (repeatable)")
	cmd.Flags().StringVar(&mmproj, "mmproj", "", "the vision projector (mmproj GGUF) that reads images (default: the one beside the model)")
	imageTokensFlag(cmd, &imageTokens)
	cmd.MarkFlagsMutuallyExclusive("json", "schema")
	return cmd
}

// replyFormat is the structured output the flags ask for, nil for none.
func replyFormat(asJSON bool, schemaFile string) (*structured.Schema, error) {
	switch {
	case asJSON:
		return structured.AnyObject(), nil
	case schemaFile != "":
		raw, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, err
		}
		s, err := structured.Compile(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", schemaFile, err)
		}
		return s, nil
	}
	return nil, nil
}

// chatLoop is one conversation on the command line.
type chatLoop struct {
	l        *app.LoadedModel
	session  *model.Session
	history  []chat.Message
	system   int // leading messages /reset keeps
	sampling samplingFlags
	n        int
	shift    bool
	format   *structured.Schema // each reply's, nil for free text
	// keep is how many leading tokens a context shift keeps: those of the
	// system prompt as the template renders it.
	keep     int
	out, log io.Writer
	// mmproj is --mmproj; vision reads the images, opened by the first;
	// pending are the images the next message shows.
	mmproj      string
	paired      string // the library's projector for the model
	imageTokens int    // --image-tokens
	vision      *app.Vision
	pending     []chat.Image
}

// attach reads an image file for the next message.
func (c *chatLoop) attach(path string) error {
	im, err := readImages([]string{path})
	c.pending = append(c.pending, im...)
	return err
}

// openVision opens the projector for the conversation's images, once.
func (c *chatLoop) openVision() (*app.Vision, error) {
	if c.vision != nil {
		return c.vision, nil
	}
	v, err := openProjector(c.l, c.mmproj, c.paired, c.imageTokens)
	c.vision = v
	return v, err
}

// openProjector opens the projector that reads l's images: mmproj
// (--mmproj), or paired, the one the library paired with the model when
// it resolved its name (modelFlags.projector), with imageTokens
// (--image-tokens).
func openProjector(l *app.LoadedModel, mmproj, paired string, imageTokens int) (*app.Vision, error) {
	path := cmp.Or(mmproj, paired)
	if path == "" {
		return nil, app.NoProjector(l.Model, l.Model.Path, "give --mmproj")
	}
	return app.OpenVision(path, l.Model, l.Runner, imageTokens)
}

// imageTokensFlag adds --image-tokens to cmd.
func imageTokensFlag(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "image-tokens", 0, "most tokens an image becomes, for models whose projector takes a budget (Gemma 4: 70, 140, 280, 560 or 1120; default its 280)")
}

// readImages reads image files for a message, each checked to decode.
func readImages(paths []string) ([]chat.Image, error) {
	var out []chat.Image
	for _, path := range paths {
		data, _, err := vision.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Image{Data: data, Ref: path})
	}
	return out, nil
}

// images puts files, rendered as markers in text, into req: their tokens
// in the prompt, and the rows of those the cache does not hold.
func (c *chatLoop) images(ctx context.Context, req *model.Request, files []chat.Image, text string) error {
	v, err := c.openVision()
	if err != nil {
		return err
	}
	ip, err := v.Splice(c.l.Model, text, files)
	if err != nil {
		return err
	}
	if err := ip.Fits(c.l.Runner.Context()); err != nil {
		return err
	}
	req.Prompt, req.Images = ip.Tokens, ip.Images
	return v.Encode(ctx, ip, c.session.Reuse(ip.Tokens, ip.Images))
}

// imageError is a turn's error from its images: the interactive chat says
// it and goes on without them.
type imageError struct{ err error }

func (e *imageError) Error() string { return e.err.Error() }
func (e *imageError) Unwrap() error { return e.err }

func (c *chatLoop) closeVision() {
	if c.vision != nil {
		c.vision.Close()
	}
}

func (c *chatLoop) interactive(cmd *cobra.Command, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	prompt := func() { fmt.Fprint(c.log, "> ") }
	prompt()
	var msg strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, `\`) {
			msg.WriteString(strings.TrimSuffix(line, `\`) + "\n")
			continue
		}
		msg.WriteString(line)
		text := strings.TrimSpace(msg.String())
		msg.Reset()
		switch text {
		case "":
		case "/exit", "/quit":
			return nil
		case "/reset":
			c.history = c.history[:c.system]
			c.pending = nil
			c.session.Reset()
			fmt.Fprintln(c.log, "(conversation reset)")
		default:
			if f, ok := strings.CutPrefix(text, "/image "); ok {
				if err := c.attach(strings.TrimSpace(f)); err != nil {
					fmt.Fprintln(c.log, "error:", err)
				} else {
					fmt.Fprintf(c.log, "(%d image(s) go with the next message)\n", len(c.pending))
				}
				break
			}
			if err := c.turn(cmd, text); err != nil {
				var bad *imageError
				if !errors.As(err, &bad) {
					return err
				}
				// The message is not sent; the conversation goes on.
				fmt.Fprintln(c.log, "error:", err)
			}
		}
		prompt()
	}
	return sc.Err()
}

// turn answers one user message, streaming the reply.
func (c *chatLoop) turn(cmd *cobra.Command, text string) error {
	m := c.l.Model
	msgs := append(c.history, chat.Message{Role: "user", Content: text, Images: c.pending})
	marked, files, err := app.WithImageMarkers(msgs)
	if err != nil {
		return err
	}
	p, err := m.Chat.Render(chat.Request{Messages: marked, AddGenerationPrompt: true})
	if err != nil {
		return err
	}
	if p.Notice != "" {
		fmt.Fprintln(c.log, "note:", p.Notice)
	}
	req := c.request(p.Text)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	if len(files) > 0 {
		if err := c.images(ctx, &req, files, p.Text); err != nil {
			c.pending = nil
			return &imageError{err}
		}
	}
	c.pending = nil
	var reply strings.Builder
	st, err := c.session.Generate(ctx, req, func(t model.Token) error {
		reply.WriteString(t.Text)
		_, err := fmt.Fprint(c.out, t.Text)
		return err
	})
	fmt.Fprintln(c.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "[%d+%d tokens, %.1f tokens/s; %s]\n", st.PromptTokens, st.Generated, st.DecodeRate(), st.Stop)
	if st.Stop == "length" && c.n > 0 && st.Generated >= c.n {
		fmt.Fprintf(c.log, "(the reply was cut at %d tokens; -n sets the limit, 0 for none)\n", c.n)
	}
	c.history = append(msgs, chat.Message{Role: "assistant", Content: strings.TrimSpace(reply.String())})
	return nil
}

// request is the generation of one reply to the rendered prompt: it ends at
// the template's end-of-turn tokens and strings, or after -n tokens.
func (c *chatLoop) request(prompt string) model.Request {
	m := c.l.Model
	req := model.Request{
		Prompt: m.Chat.Tokenize(prompt), MaxTokens: c.n, Sampling: c.sampling.o,
		StopIDs: m.Chat.StopIDs, StopStrings: m.Chat.StopStrings,
		Decoder: m.Tokenizer.NewDecoder(tokenizer.DecodeOptions{}),
		Keep:    c.keep,
	}
	if c.shift {
		req.Overflow = model.OverflowShift
	}
	if c.format != nil {
		req.Constraint = structured.NewConstraint(c.format, m.Tokenizer, req.StopIDs)
	}
	return req
}
