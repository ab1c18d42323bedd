package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/structured"
)

// openAIDefaults are the sampling options of an OpenAI request that sets
// none. OpenAI's API defines temperature 1 and top_p 1, and Ollama's OpenAI
// layer sends exactly those two when a client omits them, leaving every
// other knob at the model runner's defaults; Hearth does the same, so the
// rest are its llama.cpp defaults (top-k 40, min-p 0.05, repeat penalty
// off). Top-k and min-p at temperature 1 only cut the long tail of
// near-impossible tokens, which a small quantized model otherwise samples
// now and then.
func openAIDefaults() sample.Options {
	o := sample.Defaults()
	o.Temperature, o.TopP = 1, 1
	return o
}

// sampling checks the request's sampling fields against OpenAI's ranges
// and builds the sampler's options.
func (r openAIRequest) sampling() (sample.Options, error) {
	if err := r.check(2); err != nil {
		return sample.Options{}, err
	}
	var seed *uint64
	if r.Seed != nil {
		// OpenAI's seed is any 64-bit integer; its bits are the seed.
		s := uint64(*r.Seed)
		seed = &s
	}
	o := r.apply(openAIDefaults(), seed)
	return o, checkSampling(o)
}

// openAIRequest are the fields chat and completions share.
type openAIRequest struct {
	Model string `json:"model"`
	samplingParams
	MaxTokens     *int            `json:"max_tokens"`
	Stop          json.RawMessage `json:"stop"`
	N             *int            `json:"n"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	LogitBias map[string]float64 `json:"logit_bias"`
}

// generateOptions checks the shared fields and builds the engine's options.
// limitParam and limit are the field that bounds the reply and its value.
//
// A bound of 10^9 is accepted, not refused: no reply outgrows the context,
// where the engine ends it with finish_reason "length", so a bound past the
// context means "until the end", as llama.cpp's server takes it. A bound
// below 1 is refused, as OpenAI refuses it.
func (r openAIRequest) generateOptions(name, limitParam string, limit *int) (app.GenerateOptions, error) {
	o := app.GenerateOptions{Model: name}
	if r.N != nil && *r.N != 1 {
		return o, badRequest("n", "n = %d: only one choice per request is supported; send n = 1 or leave it out", *r.N)
	}
	if len(r.LogitBias) > 0 {
		return o, unsupported("logit_bias", "logit_bias")
	}
	if r.StreamOptions != nil && !r.Stream {
		return o, badRequest("stream_options", "stream_options is only allowed when stream is true")
	}
	if limit != nil {
		if *limit < 1 {
			return o, badRequest(limitParam, "%s must be at least 1, got %d", limitParam, *limit)
		}
		o.MaxTokens = *limit
	}
	var err error
	if o.Stop, err = parseStop(r.Stop); err != nil {
		return o, err
	}
	o.Sampling, err = r.sampling()
	return o, err
}

// includeUsage reports whether a stream ends with a usage chunk.
func (r openAIRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// usage is OpenAI's token count, straight from the engine's statistics.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(st model.Stats) *usage {
	u := &usage{PromptTokens: st.PromptTokens, CompletionTokens: st.Generated, TotalTokens: st.PromptTokens + st.Generated}
	u.PromptTokensDetails.CachedTokens = st.CachedTokens
	return u
}

// chatRequest is OpenAI's chat completion request.
type chatRequest struct {
	openAIRequest
	Messages            []openAIMessage   `json:"messages"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Logprobs    *bool `json:"logprobs"`
	TopLogprobs *int  `json:"top_logprobs"`
}

// openAIMessage is a message as OpenAI's clients send it.
type openAIMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []openAIToolUse `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	// ReasoningContent is llama.cpp's and DeepSeek's field for an
	// assistant's thinking, which some templates render.
	ReasoningContent string `json:"reasoning_content"`
}

// openAIToolUse is a call an assistant made, as OpenAI's clients send it
// and get it: the arguments a string holding their JSON; Index places it
// in a stream.
type openAIToolUse struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// messages converts the conversation, refusing what the models cannot
// read (audio, files) instead of dropping it. Images are taken in a message
// of any role, as llama.cpp's server and Ollama's OpenAI layer take them
// (OpenAI's own API takes them only from the user): a tool's screenshot
// comes back in a tool message.
func (r chatRequest) messages() ([]chat.Message, error) {
	if len(r.Messages) == 0 {
		return nil, badRequest("messages", "messages must hold at least one message")
	}
	out := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "developer":
			role = "system" // OpenAI's newer name for the system message
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest(param+".role", "%s.role %q: want system, developer, user, assistant or tool", param, m.Role)
		}
		text, images, err := content(param, m.Content)
		if err != nil {
			return nil, err
		}
		msg := chat.Message{Role: role, Content: text, Images: images, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		for j, tc := range m.ToolCalls {
			call := chat.ToolCall{ID: tc.ID, Type: tc.Type, Function: chat.FunctionCall{Name: tc.Function.Name}}
			// OpenAI sends the arguments as a string holding JSON; the
			// templates want the object.
			if args := strings.TrimSpace(tc.Function.Arguments); args != "" {
				if !json.Valid([]byte(args)) {
					return nil, badRequest(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), "%s.tool_calls[%d].function.arguments is not JSON", param, j)
				}
				call.Function.Arguments = json.RawMessage(args)
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
		out[i] = msg
	}
	if err := placeImages(out, func(i int) string { return fmt.Sprintf("messages[%d].content", i) }); err != nil {
		return nil, err
	}
	return out, nil
}

// contentPart is a part of a message's content as OpenAI's clients send
// it: text, or an image.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// ImageURL is {"url": …, "detail": …}, or, as Ollama's OpenAI layer
	// also takes it, the URL alone. detail is accepted and has no effect:
	// Gemma 3's encoder sees every image at its one size.
	ImageURL json.RawMessage `json:"image_url"`
}

// content reads a message's content: a string, null, or an array of parts.
// As llama.cpp's server joins them, text parts are joined by newlines, and
// an image part stands as chat.ImageMarker where it stands among them, with
// no newline on either side; its bytes are the message's images, in order.
func content(param string, raw json.RawMessage) (string, []chat.Image, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badRequest(param+".content", "%s.content: %v", param, err)
		}
		return s, nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, badRequest(param+".content", "%s.content must be a string or an array of content parts", param)
	}
	var b strings.Builder
	var images []chat.Image
	lastText := false
	for j, p := range parts {
		part := fmt.Sprintf("%s.content[%d]", param, j)
		switch p.Type {
		case "text":
			if lastText {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
			lastText = true
		case "image_url":
			url, err := imageURL(part, p.ImageURL)
			if err != nil {
				return "", nil, err
			}
			im, err := dataURLImage(part+".image_url.url", url)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(chat.ImageMarker)
			images = append(images, im)
			lastText = false
		default:
			return "", nil, unsupported(part, fmt.Sprintf("content of type %q (only text and image_url)", p.Type))
		}
	}
	return b.String(), images, nil
}

// imageURL is the URL of an image_url part.
func imageURL(part string, raw json.RawMessage) (string, error) {
	var url string
	if json.Unmarshal(raw, &url) == nil {
		return url, nil
	}
	var obj struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.URL == "" {
		return "", badRequest(part+".image_url", "%s.image_url must be {\"url\": \"data:image/png;base64,…\"}", part)
	}
	return obj.URL, nil
}

// chatCompletion is OpenAI's reply in one piece.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      *chatMessageOut `json:"message,omitempty"`
	Delta        *chatMessageOut `json:"delta,omitempty"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chatMessageOut struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []openAIToolUse `json:"tool_calls,omitempty"`
}

// openAIToolCalls converts a reply's calls (chatCompletions has given
// each an ID); streamed ones carry their index.
func openAIToolCalls(calls []chat.ToolCall, stream bool) []openAIToolUse {
	var out []openAIToolUse
	for i, c := range calls {
		o := openAIToolUse{ID: c.ID, Type: "function"}
		if stream {
			o.Index = &i
		}
		o.Function.Name, o.Function.Arguments = c.Function.Name, string(c.Function.Arguments)
		out = append(out, o)
	}
	return out
}

// chatChunk is one server-sent event of a streamed chat reply.
type chatChunk struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion.chunk"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

func (s *server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := decode(w, r, s.o.MaxBody, &req); err != nil {
		return err
	}
	m, err := s.find(openAIAPI, req.Model)
	if err != nil {
		return err
	}
	limitParam, limit := "max_completion_tokens", req.MaxCompletionTokens
	if limit == nil {
		limitParam, limit = "max_tokens", req.MaxTokens
	}
	// The model's Modelfile parameters are the defaults, but for
	// temperature and top_p, whose defaults are OpenAI's (as in Ollama's
	// OpenAI layer).
	params := s.modelParams(m)
	params.Temperature, params.TopP = nil, nil
	req.samplingParams = req.samplingParams.over(params.samplingParams)
	opts, err := req.generateOptions(m.Name, limitParam, limit)
	if err != nil {
		return err
	}
	if len(opts.Stop) == 0 && params.Stop != nil {
		if opts.Stop, err = checkStops(params.Stop); err != nil {
			return err
		}
	}
	if params.RepeatLastN != nil {
		opts.Sampling.RepeatLastN = *params.RepeatLastN
	}
	opts.Adapters = s.o.Adapters
	if rf := req.ResponseFormat; rf != nil {
		switch t := rf.Type; t {
		case "", "text":
		case "json_object":
			opts.Format = structured.AnyObject()
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return badRequest("response_format.json_schema.schema", "response_format json_schema needs json_schema.schema")
			}
			if opts.Format, err = structured.Compile(rf.JSONSchema.Schema); err != nil {
				return badRequest("response_format.json_schema.schema", "%v", err)
			}
		default:
			return badRequest("response_format", "response_format type %q: want text, json_object or json_schema", t)
		}
	}
	if req.Logprobs != nil && *req.Logprobs || req.TopLogprobs != nil {
		return unsupported("logprobs", "logprobs")
	}
	tools, require, name, err := toolsFor(req.Tools, req.ToolChoice)
	if err != nil {
		return err
	}
	msgs, err := req.messages()
	if err != nil {
		return err
	}
	if err := checkVision(m, msgs); err != nil {
		return err
	}
	// The messages hold the images decoded; their base64 in the request
	// is not kept for the length of the reply.
	req.Messages = nil

	id, created := newID("chatcmpl-"), time.Now().Unix()
	run := newRun(w, "text/event-stream", req.Stream)
	defer run.end()
	opts.Progress = run.progress
	msgs = withSystem(m, msgs)
	creq := app.ChatRequest{GenerateOptions: opts, Messages: msgs, Tools: tools, RequireCall: require, CallName: name}
	chunk := func(delta chatMessageOut, finish *string) []byte {
		return sseEvent(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name,
			Choices: []chatChoice{{Delta: &delta, FinishReason: finish}}})
	}
	var emit func(model.Token) error
	if req.Stream {
		empty := ""
		run.s.opening = func() []byte { return chunk(chatMessageOut{Role: "assistant", Content: &empty}, nil) }
		emit = func(t model.Token) error {
			if t.Text == "" {
				return nil // the decoder holds back part of a character or a stop string
			}
			return run.s.write(chunk(chatMessageOut{Content: &t.Text}, nil))
		}
	}
	reply, err := s.engine.Chat(r.Context(), creq, emit)
	s.touch()
	if done, err := s.finishStream(run, err, reply, openAIAPI); done {
		return err
	}
	finish := finishReason(reply.Stats)
	if reply.ToolCalls != nil {
		finish = "tool_calls"
	}
	// The calls' IDs, made once so the record holds the ones the client
	// answers with.
	for i := range reply.ToolCalls {
		if reply.ToolCalls[i].ID == "" {
			reply.ToolCalls[i].ID = newID("call_")
		}
	}
	s.record("OpenAI", msgs, reply)
	if !req.Stream {
		msg := &chatMessageOut{Role: "assistant", Content: &reply.Text, ToolCalls: openAIToolCalls(reply.ToolCalls, false)}
		if reply.ToolCalls != nil && reply.Text == "" {
			msg.Content = nil
		}
		return writeJSON(w, http.StatusOK, chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: m.Name,
			Choices: []chatChoice{{Message: msg, FinishReason: &finish}},
			Usage:   usageOf(reply.Stats)})
	}
	if reply.ToolCalls != nil {
		run.s.write(chunk(chatMessageOut{ToolCalls: openAIToolCalls(reply.ToolCalls, true)}, nil))
	}
	run.s.write(chunk(chatMessageOut{}, &finish))
	if req.includeUsage() {
		run.s.write(sseEvent(chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: m.Name,
			Choices: []chatChoice{}, Usage: usageOf(reply.Stats)}))
	}
	run.s.write([]byte("data: [DONE]\n\n"))
	return nil
}

// toolsFor reads a request's tool_choice: the tools its template renders
// (none for "none"), and whether a call is required ("required", or a
// named function: name), checked here so that a function whose parameters
// cannot be enforced is the client's error. "auto" lets the model decide.
func toolsFor(tools []json.RawMessage, raw json.RawMessage) (_ []json.RawMessage, require bool, name string, _ error) {
	if len(raw) == 0 || string(raw) == "null" {
		return tools, false, "", nil
	}
	var choice string
	if json.Unmarshal(raw, &choice) != nil {
		var fn struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &fn) != nil || fn.Type != "function" || fn.Function.Name == "" {
			return nil, false, "", badRequest("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}, got %s", raw)
		}
		name = fn.Function.Name
	} else if choice != "auto" && choice != "none" && choice != "required" {
		return nil, false, "", badRequest("tool_choice", "tool_choice %q: want auto, none, required or a function", choice)
	}
	switch {
	case choice == "auto":
		return tools, false, "", nil
	case choice == "none":
		return nil, false, "", nil
	}
	// Any syntax will do for the check: the schema's arguments are the same.
	if _, err := chat.ToolsJSON.Forced(tools, name); err != nil {
		return nil, false, "", badRequest("tool_choice", "%v", err)
	}
	return tools, true, name, nil
}

// sseEvent is v as one server-sent event.
func sseEvent(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value streamed is a struct of strings and numbers.
		panic(fmt.Sprintf("server: marshal %T: %v", v, err))
	}
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// completionRequest is OpenAI's (legacy) completion request: raw text in,
// no chat template.
type completionRequest struct {
	openAIRequest
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
	Logprobs *int            `json:"logprobs"`
	BestOf   *int            `json:"best_of"`
}

// prompt reads the prompt: a string, or an array of one string. Token
// arrays and batches of prompts are refused.
func (r completionRequest) prompt() (string, error) {
	raw := bytes.TrimSpace(r.Prompt)
	if len(raw) == 0 || string(raw) == "null" {
		return "", badRequest("prompt", "prompt is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err == nil {
		if len(many) != 1 {
			return "", badRequest("prompt", "prompt holds %d strings: one prompt per request is supported", len(many))
		}
		return many[0], nil
	}
	return "", unsupported("prompt", "a prompt of token ids")
}

type completionChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// completion is OpenAI's completion, whole or as a streamed chunk (both
// have object "text_completion").
type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

// completions continues the prompt as raw text. Special tokens written in
// the prompt are parsed, as llama.cpp's server parses them, so a client can
// send a conversation it templated itself.
func (s *server) completions(w http.ResponseWriter, r *http.Request) error {
	var req completionRequest
	if err := decode(w, r, s.o.MaxBody, &req); err != nil {
		return err
	}
	m, err := s.find(openAIAPI, req.Model)
	if err != nil {
		return err
	}
	opts, err := req.generateOptions(m.Name, "max_tokens", req.MaxTokens)
	if err != nil {
		return err
	}
	opts.Adapters = s.o.Adapters
	switch {
	case req.Echo:
		return unsupported("echo", "echo")
	case req.Suffix != nil && *req.Suffix != "":
		return unsupported("suffix", "suffix (fill-in-the-middle)")
	case req.Logprobs != nil:
		return unsupported("logprobs", "logprobs")
	case req.BestOf != nil && *req.BestOf != 1:
		return badRequest("best_of", "best_of = %d: only 1 is supported", *req.BestOf)
	}
	prompt, err := req.prompt()
	if err != nil {
		return err
	}

	id, created := newID("cmpl-"), time.Now().Unix()
	run := newRun(w, "text/event-stream", req.Stream)
	defer run.end()
	opts.Progress = run.progress
	chunk := func(text string, finish *string, u *usage) []byte {
		choices := []completionChoice{{Text: text, FinishReason: finish}}
		if u != nil {
			choices = []completionChoice{}
		}
		return sseEvent(completion{ID: id, Object: "text_completion", Created: created, Model: m.Name, Choices: choices, Usage: u})
	}
	var emit func(model.Token) error
	if req.Stream {
		emit = func(t model.Token) error {
			if t.Text == "" {
				return nil
			}
			return run.s.write(chunk(t.Text, nil, nil))
		}
	}
	reply, err := s.engine.Complete(r.Context(), app.CompleteRequest{GenerateOptions: opts, Prompt: prompt, Special: true}, emit)
	s.touch()
	if done, err := s.finishStream(run, err, reply, openAIAPI); done {
		return err
	}
	finish := finishReason(reply.Stats)
	if !req.Stream {
		return writeJSON(w, http.StatusOK, completion{ID: id, Object: "text_completion", Created: created, Model: m.Name,
			Choices: []completionChoice{{Text: reply.Text, FinishReason: &finish}}, Usage: usageOf(reply.Stats)})
	}
	run.s.write(chunk("", &finish, nil))
	if req.includeUsage() {
		run.s.write(chunk("", nil, usageOf(reply.Stats)))
	}
	run.s.write([]byte("data: [DONE]\n\n"))
	return nil
}
