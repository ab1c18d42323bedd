package cli

import (
	"bufio"
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
)

// defaultReplyTokens bounds a chat reply when -n is not given. A model
// ends its turn well before it (a long answer is a few hundred tokens), but
// one that never does, such as a synthetic test model or a base model with
// no chat training, would otherwise run to the end of an 8192-token context.
const defaultReplyTokens = 1024

func newChatCmd() *cobra.Command {
	var mf modelFlags
	var sf samplingFlags
	var prompt, system, schemaFile string
	var n int
	var shift, asJSON bool
	cmd := &cobra.Command{
		Use:   "chat -m MODEL [-p PROMPT]",
		Short: "Chat with a model through its chat template; interactive without -p",
		Long: "With -p, answer one message and exit. Without it, read messages from standard input,\n" +
			"one per line (end a line with \\ to continue it), keeping the conversation and the KV cache\n" +
			"between turns. /reset starts over, /exit (or end of input) leaves; Ctrl+C stops a reply.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := mf.open(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			c := &chatLoop{l: l, sampling: sf, n: n, shift: shift, out: cmd.OutOrStdout(), log: cmd.ErrOrStderr(),
				session: model.NewSession(l.Runner)}
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
			c.session.Reset()
			fmt.Fprintln(c.log, "(conversation reset)")
		default:
			if err := c.turn(cmd, text); err != nil {
				return err
			}
		}
		prompt()
	}
	return sc.Err()
}

// turn answers one user message, streaming the reply.
func (c *chatLoop) turn(cmd *cobra.Command, text string) error {
	m := c.l.Model
	msgs := append(c.history, chat.Message{Role: "user", Content: text})
	p, err := m.Chat.Render(chat.Request{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		return err
	}
	if p.Notice != "" {
		fmt.Fprintln(c.log, "note:", p.Notice)
	}
	req := c.request(p.Text)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
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
