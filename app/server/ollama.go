package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/structured"
)

// ollamaDefaults are the sampling options of an Ollama request that sets
// none: Hearth's (llama.cpp's) defaults, the ones its command line and
// studio use, so a model answers a prompt alike everywhere in Hearth.
// Ollama's own differ in top_p (0.9), min_p (0) and repeat_penalty (1.1);
// sample.Defaults says why Hearth keeps llama.cpp's, and a client that
// wants Ollama's sends them in options.
func ollamaDefaults() sample.Options { return sample.Defaults() }

// ollamaOptions are the options Hearth honours, by Ollama's names. The
// others Ollama documents are accepted and ignored: the ones about memory
// and threads (num_gpu, num_thread, use_mmap …) have no meaning here, and
// num_ctx cannot resize a loaded model's context (the server's --ctx sets
// it). Unknown keys are ignored, as Ollama ignores them.
type ollamaOptions struct {
	samplingParams
	RepeatLastN *int     `json:"repeat_last_n"`
	NumPredict  *int     `json:"num_predict"`
	Stop        []string `json:"stop"`
	NumCtx      *int     `json:"num_ctx"`
}

// over is o with what it leaves unset taken from d: a request's options
// over its model's Modelfile parameters.
func (o ollamaOptions) over(d ollamaOptions) ollamaOptions {
	o.samplingParams = o.samplingParams.over(d.samplingParams)
	for _, p := range []struct{ dst, src **int }{
		{&o.RepeatLastN, &d.RepeatLastN}, {&o.NumPredict, &d.NumPredict}, {&o.NumCtx, &d.NumCtx},
	} {
		if *p.dst == nil {
			*p.dst = *p.src
		}
	}
	if o.Stop == nil {
		o.Stop = d.Stop
	}
	return o
}

// modelParams are m's Modelfile parameters as options; a parameters layer
// that does not read as Ollama's options (a hand-edited store) gives none,
// with a line in the log, rather than failing every request.
func (s *server) modelParams(m Model) ollamaOptions {
	var o ollamaOptions
	if strings.TrimSpace(m.Options) == "" {
		return o
	}
	if err := json.Unmarshal([]byte(m.Options), &o); err != nil {
		s.log.Warn("the model's Modelfile parameters are not Ollama options; ignoring them", "model", m.Name, "err", err)
		return ollamaOptions{}
	}
	return o
}

// withSystem is msgs opened by m's own system prompt when they have none.
func withSystem(m Model, msgs []chat.Message) []chat.Message {
	if m.System == "" || (len(msgs) > 0 && msgs[0].Role == "system") {
		return msgs
	}
	return append([]chat.Message{{Role: "system", Content: m.System}}, msgs...)
}

// generateOptions checks the options and builds the engine's.
func (o ollamaOptions) generateOptions(name string) (app.GenerateOptions, error) {
	g := app.GenerateOptions{Model: name}
	if err := o.check(math.Inf(1)); err != nil {
		return g, err
	}
	if o.RepeatLastN != nil && *o.RepeatLastN < -1 {
		return g, badRequest("repeat_last_n", "repeat_last_n must be at least -1 (-1 is the whole context), got %d", *o.RepeatLastN)
	}
	if o.NumCtx != nil && *o.NumCtx < 0 {
		return g, badRequest("num_ctx", "num_ctx must not be negative, got %d", *o.NumCtx)
	}
	var seed *uint64
	if o.Seed != nil && *o.Seed >= 0 {
		// A negative seed is Ollama's (and llama.cpp's) "pick one at random".
		s := uint64(*o.Seed)
		seed = &s
	}
	g.Sampling = o.apply(ollamaDefaults(), seed)
	if o.RepeatLastN != nil {
		g.Sampling.RepeatLastN = *o.RepeatLastN
	}
	if err := checkSampling(g.Sampling); err != nil {
		return g, err
	}
	// num_predict -1 is Ollama's "no limit" and -2 "until the context is
	// full"; the engine stops at the context's end either way.
	if o.NumPredict != nil && *o.NumPredict > 0 {
		g.MaxTokens = *o.NumPredict
	}
	var err error
	g.Stop, err = checkStops(o.Stop)
	return g, err
}

// ollamaRequest are the fields /api/chat and /api/generate share.
type ollamaRequest struct {
	Model     string          `json:"model"`
	Format    json.RawMessage `json:"format"`
	Options   ollamaOptions   `json:"options"`
	Stream    *bool           `json:"stream"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Think     json.RawMessage `json:"think"`
}

// format is the request's structured output: "json" for any object, a
// JSON schema, or nil for none.
func (r ollamaRequest) format() (*structured.Schema, error) {
	f := bytes.TrimSpace(r.Format)
	switch string(f) {
	case "", "null", `""`:
		return nil, nil
	case `"json"`:
		return structured.AnyObject(), nil
	}
	if f[0] != '{' {
		return nil, badRequest("format", "format must be \"json\" or a JSON schema, got %s", f)
	}
	s, err := structured.Compile(json.RawMessage(f))
	if err != nil {
		return nil, badRequest("format", "%v", err)
	}
	return s, nil
}

// check refuses what Hearth cannot do yet: thinking.
func (r ollamaRequest) check() error {
	if t := bytes.TrimSpace(r.Think); len(t) > 0 && string(t) != "null" && string(t) != "false" {
		return unsupported("think", "think")
	}
	_, err := r.keepAliveZero()
	return err
}

// streaming is Ollama's default: a stream unless "stream": false.
func (r ollamaRequest) streaming() bool { return r.Stream == nil || *r.Stream }

// keepAliveZero reports whether keep_alive asks to unload the model after
// the request (0). Ollama takes a duration ("5m") or a number of seconds;
// other values are checked but the server's --idle governs, since the
// engine has one idle timer for the one resident model.
func (r ollamaRequest) keepAliveZero() (bool, error) {
	raw := bytes.TrimSpace(r.KeepAlive)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err == nil {
		return secs == 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return d == 0, nil
		}
	}
	return false, badRequest("keep_alive", "keep_alive %s: want a duration such as \"5m\" or a number of seconds", raw)
}

// ollamaMessage is a message as Ollama's clients send it.
type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Thinking  string           `json:"thinking"`
	Images    []string         `json:"images"`
	ToolCalls []ollamaToolCall `json:"tool_calls"`
	ToolName  string           `json:"tool_name"`
}

// ollamaToolCall is a call an assistant made, as Ollama's clients send it
// and get it: the arguments an object.
type ollamaToolCall struct {
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaMessageOut is the assistant's message in a response.
type ollamaMessageOut struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
}

func ollamaToolCalls(calls []chat.ToolCall) []ollamaToolCall {
	var out []ollamaToolCall
	for i, c := range calls {
		var o ollamaToolCall
		o.Function.Index, o.Function.Name, o.Function.Arguments = &i, c.Function.Name, c.Function.Arguments
		out = append(out, o)
	}
	return out
}

// ollamaMetrics are the statistics of a final response, in nanoseconds.
type ollamaMetrics struct {
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
}

func metricsOf(run *run, st model.Stats) *ollamaMetrics {
	return &ollamaMetrics{
		TotalDuration:      int64(time.Since(run.arrived)),
		LoadDuration:       int64(run.loadDuration()),
		PromptEvalCount:    st.PromptTokens,
		PromptEvalDuration: int64(st.Prefill),
		EvalCount:          st.Generated,
		EvalDuration:       int64(st.Decode),
	}
}

// ollamaResponse is one object of /api/chat's (Message) or /api/generate's
// (Response) answer; the last has Done and the metrics.
type ollamaResponse struct {
	Model      string            `json:"model"`
	CreatedAt  time.Time         `json:"created_at"`
	Message    *ollamaMessageOut `json:"message,omitempty"`
	Response   *string           `json:"response,omitempty"`
	Done       bool              `json:"done"`
	DoneReason string            `json:"done_reason,omitempty"`
	*ollamaMetrics
}

// ndjsonLine is v as one line of a newline-delimited JSON stream.
func ndjsonLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("server: marshal %T: %v", v, err))
	}
	return append(b, '\n')
}

type ollamaChatRequest struct {
	ollamaRequest
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

func (r ollamaChatRequest) messages() ([]chat.Message, error) {
	out := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest("messages", "messages[%d].role %q: want system, user, assistant or tool", i, m.Role)
		}
		images, err := ollamaImages(fmt.Sprintf("messages[%d].images", i), m.Images)
		if err != nil {
			return nil, err
		}
		msg := chat.Message{Role: m.Role, Content: withMarkers(m.Content, len(images)), Images: images,
			ReasoningContent: m.Thinking, Name: m.ToolName}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{Type: "function",
				Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		out[i] = msg
	}
	if err := placeImages(out, func(i int) string { return fmt.Sprintf("messages[%d].content", i) }); err != nil {
		return nil, err
	}
	return out, nil
}

// ollamaImages reads the images of a message or a prompt, given at param:
// base64 strings, as Ollama takes them. A data URL is taken too, as
// Ollama's OpenAI layer takes one, since clients send one here by mistake.
func ollamaImages(param string, images []string) ([]chat.Image, error) {
	var out []chat.Image
	for j, s := range images {
		p := fmt.Sprintf("%s[%d]", param, j)
		var im chat.Image
		var err error
		// No base64 holds a colon; a URL does.
		if strings.Contains(s[:min(len(s), 10)], ":") {
			im, err = dataURLImage(p, s)
		} else {
			im, err = base64Image(p, s)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, nil
}

// withMarkers is text with n images marked before it, where Ollama puts a
// message's images (placeImages then tells these marks from any in the
// client's text, and drops them).
func withMarkers(text string, n int) string {
	return strings.Repeat(chat.ImageMarker, n) + text
}

// ollamaBody is an /api/chat or /api/generate request: readOllama reads
// what they share.
type ollamaBody interface{ common() *ollamaRequest }

func (r *ollamaRequest) common() *ollamaRequest { return r }

// readOllama decodes the body into req, finds the model it names, refuses
// what Hearth cannot do and builds the engine's options.
func (s *server) readOllama(w http.ResponseWriter, r *http.Request, req ollamaBody) (Model, app.GenerateOptions, error) {
	if err := decode(w, r, s.o.MaxBody, req); err != nil {
		return Model{}, app.GenerateOptions{}, err
	}
	c := req.common()
	m, err := s.find(ollamaAPI, c.Model)
	if err != nil {
		return Model{}, app.GenerateOptions{}, err
	}
	if err := c.check(); err != nil {
		return Model{}, app.GenerateOptions{}, err
	}
	opts, err := c.Options.over(s.modelParams(m)).generateOptions(m.Name)
	if err != nil {
		return m, opts, err
	}
	opts.Adapters = s.o.Adapters
	opts.Format, err = c.format()
	return m, opts, err
}

// ollamaEmit streams each token's text as one NDJSON line, the object chunk
// makes of it; nil when the answer is not streamed.
func ollamaEmit(run *run, chunk func(text string) ollamaResponse) func(model.Token) error {
	if run.s == nil {
		return nil
	}
	return func(t model.Token) error {
		if t.Text == "" {
			return nil
		}
		return run.s.write(ndjsonLine(chunk(t.Text)))
	}
}

// ollamaFinish sends the final object: the whole answer, or the stream's
// last line.
func ollamaFinish(w http.ResponseWriter, run *run, final ollamaResponse) error {
	if run.s == nil {
		return writeJSON(w, http.StatusOK, final)
	}
	run.s.write(ndjsonLine(final))
	return nil
}

func (s *server) ollamaChat(w http.ResponseWriter, r *http.Request) error {
	var req ollamaChatRequest
	m, opts, err := s.readOllama(w, r, &req)
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
	unload, _ := req.keepAliveZero()
	if len(msgs) == 0 {
		// No messages: load the model, or unload it with keep_alive 0.
		return s.loadOrUnload(w, r, m.Name, unload, &ollamaMessageOut{Role: "assistant"}, nil)
	}
	if unload {
		defer s.unloadAfter(m.Name)
	}

	run := newRun(w, "application/x-ndjson", req.streaming())
	defer run.end()
	opts.Progress = run.progress
	emit := ollamaEmit(run, func(text string) ollamaResponse {
		return ollamaResponse{Model: m.Name, CreatedAt: time.Now().UTC(), Message: &ollamaMessageOut{Role: "assistant", Content: text}}
	})
	msgs = withSystem(m, msgs)
	reply, err := s.engine.Chat(r.Context(), app.ChatRequest{GenerateOptions: opts, Messages: msgs, Tools: req.Tools}, emit)
	s.touch()
	if done, err := s.finishStream(run, err, reply, ollamaAPI); done {
		return err
	}
	s.record("Ollama", msgs, reply)
	final := ollamaResponse{Model: m.Name, CreatedAt: time.Now().UTC(), Message: &ollamaMessageOut{Role: "assistant"},
		Done: true, DoneReason: finishReason(reply.Stats), ollamaMetrics: metricsOf(run, reply.Stats)}
	calls := ollamaToolCalls(reply.ToolCalls)
	switch {
	case run.s == nil:
		final.Message.Content, final.Message.ToolCalls = reply.Text, calls
	case calls != nil:
		// Ollama streams the calls in a line of their own before the last.
		run.s.write(ndjsonLine(ollamaResponse{Model: m.Name, CreatedAt: time.Now().UTC(),
			Message: &ollamaMessageOut{Role: "assistant", ToolCalls: calls}}))
	}
	return ollamaFinish(w, run, final)
}

type ollamaGenerateRequest struct {
	ollamaRequest
	Prompt   string   `json:"prompt"`
	System   string   `json:"system"`
	Raw      bool     `json:"raw"`
	Suffix   string   `json:"suffix"`
	Template string   `json:"template"`
	Context  []int    `json:"context"`
	Images   []string `json:"images"`
}

// ollamaGenerate answers /api/generate: the prompt as the user's message
// through the model's chat template, its images with it (before its text,
// as Ollama puts them), or with "raw" as text to continue (special tokens
// in it parsed, since a raw prompt is one the client templated itself).
func (s *server) ollamaGenerate(w http.ResponseWriter, r *http.Request) error {
	var req ollamaGenerateRequest
	m, opts, err := s.readOllama(w, r, &req)
	if err != nil {
		return err
	}
	switch {
	case req.Suffix != "":
		return unsupported("suffix", "suffix (fill-in-the-middle)")
	case req.Template != "":
		return unsupported("template", "a template override")
	case len(req.Context) > 0:
		return unsupported("context", "context (send the conversation to /api/chat instead)")
	case len(req.Images) > 0 && req.Raw:
		// Hearth puts an image's tokens where the chat template renders
		// it; a raw prompt has no template.
		return badRequest("images", "images with a raw prompt are not supported; leave raw off, or send the conversation to /api/chat")
	}
	images, err := ollamaImages("images", req.Images)
	if err != nil {
		return err
	}
	// The conversation the prompt makes, unless it is raw, and how the
	// request names each message.
	var msgs []chat.Message
	var params []string
	if req.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: req.System})
		params = append(params, "system")
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: withMarkers(req.Prompt, len(images)), Images: images})
	params = append(params, "prompt")
	if err := placeImages(msgs, func(i int) string { return params[i] }); err != nil {
		return err
	}
	if err := checkVision(m, msgs); err != nil {
		return err
	}
	req.Images = nil
	unload, _ := req.keepAliveZero()
	if req.Prompt == "" && req.System == "" {
		empty := ""
		return s.loadOrUnload(w, r, m.Name, unload, nil, &empty)
	}
	if unload {
		defer s.unloadAfter(m.Name)
	}

	run := newRun(w, "application/x-ndjson", req.streaming())
	defer run.end()
	opts.Progress = run.progress
	emit := ollamaEmit(run, func(text string) ollamaResponse {
		return ollamaResponse{Model: m.Name, CreatedAt: time.Now().UTC(), Response: &text}
	})
	var reply app.Reply
	if req.Raw {
		reply, err = s.engine.Complete(r.Context(), app.CompleteRequest{GenerateOptions: opts, Prompt: req.Prompt, Special: true}, emit)
	} else {
		reply, err = s.engine.Chat(r.Context(), app.ChatRequest{GenerateOptions: opts, Messages: withSystem(m, msgs)}, emit)
	}
	s.touch()
	if done, err := s.finishStream(run, err, reply, ollamaAPI); done {
		return err
	}
	text := ""
	if run.s == nil {
		text = reply.Text
	}
	final := ollamaResponse{Model: m.Name, CreatedAt: time.Now().UTC(), Response: &text,
		Done: true, DoneReason: finishReason(reply.Stats), ollamaMetrics: metricsOf(run, reply.Stats)}
	return ollamaFinish(w, run, final)
}

// loadOrUnload answers a request with nothing to generate, which Ollama's
// clients send to load a model ahead of use or, with keep_alive 0, to free
// it: one object with done_reason "load" or "unload".
func (s *server) loadOrUnload(w http.ResponseWriter, r *http.Request, name string, unload bool, msg *ollamaMessageOut, response *string) error {
	reason := "load"
	if unload {
		reason = "unload"
		s.unloadAfter(name)
	} else {
		if _, err := s.engine.Load(r.Context(), name, nil); err != nil {
			return err
		}
		s.touch()
	}
	return writeJSON(w, http.StatusOK, ollamaResponse{Model: name, CreatedAt: time.Now().UTC(), Message: msg, Response: response,
		Done: true, DoneReason: reason})
}
