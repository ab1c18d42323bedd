package server

import (
	"crypto/rand"
	"encoding/json"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/sample"
)

// maxStops bounds the stop strings of a request: every one is searched for
// in the held-back text at each token. OpenAI allows 4; Ollama's clients
// send a model's whole set, rarely more than a handful.
const maxStops = 16

// parseStop reads OpenAI's stop: null, a string, or an array of strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	return checkStops(many)
}

func checkStops(stops []string) ([]string, error) {
	if len(stops) > maxStops {
		return nil, badRequest("stop", "stop has %d strings; at most %d are allowed", len(stops), maxStops)
	}
	return stops, nil
}

// inRange checks an optional number against [lo, hi].
func inRange(param string, v *float64, lo, hi float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < lo || *v > hi {
		if math.IsInf(hi, 1) {
			return badRequest(param, "%s must be at least %g, got %g", param, lo, *v)
		}
		return badRequest(param, "%s must lie in [%g, %g], got %g", param, lo, hi, *v)
	}
	return nil
}

// randomSeed is the seed of a request that sets none, so that two such
// requests differ, as they do on OpenAI's and Ollama's servers.
func randomSeed() uint64 { return mrand.Uint64() }

// newID is a response id: prefix and 24 random letters and digits, the
// shape of OpenAI's ids.
func newID(prefix string) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		// 256 is not a multiple of 62, so the first letters are a little
		// likelier; an id needs to be unique, not uniform.
		b[i] = letters[int(b[i])%len(letters)]
	}
	return prefix + string(b)
}

// finishReason is OpenAI's and Ollama's name for why a reply ended.
func finishReason(st model.Stats) string {
	if st.Stop == "length" {
		return "length"
	}
	return "stop"
}

// run is one generation for a request: it times the request for Ollama's
// statistics and holds the response back until the engine starts on it.
type run struct {
	arrived time.Time
	// prefill is when the engine began evaluating the prompt: the job has
	// left the queue, the model is loaded, and the prompt fits.
	prefill time.Time
	s       *stream // nil for a reply in one piece
}

// newRun starts a generation's response; the handler defers the run's end.
func newRun(w http.ResponseWriter, contentType string, streaming bool) *run {
	r := &run{arrived: time.Now()}
	if streaming {
		r.s = &stream{w: w, rc: http.NewResponseController(w), contentType: contentType}
	}
	return r
}

// end is the end of the handler: a stream's write deadline is cleared.
func (r *run) end() {
	if r.s != nil {
		r.s.end()
	}
}

// progress is the GenerateOptions.Progress of the request. It runs on the
// engine's goroutine while the handler waits for the job (loading), or on
// the handler's own (prefill), so the fields it sets are the handler's to
// read once the job returns.
func (r *run) progress(p app.Progress) {
	if p.Stage != "prefill" || !r.prefill.IsZero() {
		return
	}
	r.prefill = time.Now()
	if r.s != nil {
		// The status line goes out now that no 404, 429 or too-long prompt
		// can follow, so a client sees the stream open while a long
		// prompt is evaluated.
		r.s.begin()
	}
}

// loadDuration is Ollama's load_duration: from the request's arrival to the
// start of prompt evaluation, the time in the queue included, as Ollama
// counts its scheduler's wait.
func (r *run) loadDuration() time.Duration {
	if r.prefill.IsZero() {
		return 0
	}
	return r.prefill.Sub(r.arrived)
}

// streamWriteTimeout bounds each write of a stream. A client that stops
// reading without closing the connection would hold its slot, and the job
// queued for a free one, from the moment the socket buffers fill. A reader
// that is merely slow takes a line of a hundred bytes in far less.
const streamWriteTimeout = 30 * time.Second

// stream is a streamed response: server-sent events or NDJSON lines, each
// flushed to the client as it is written.
type stream struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	contentType string
	// opening is the first message, written with the headers (OpenAI's
	// role chunk); nil for none.
	opening func() []byte
	started bool
	err     error // the first write error; nothing is written after it
}

// begin sends the status and headers, once.
func (s *stream) begin() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", s.contentType)
	h.Set("Cache-Control", "no-cache")
	// Proxies such as nginx buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	if s.opening != nil {
		s.write(s.opening())
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	s.err = s.rc.Flush()
}

// write sends b and flushes it. Its error is the first write's: a client
// that went away stops the generation through the emit that calls it.
func (s *stream) write(b []byte) error {
	s.begin()
	if s.err != nil {
		return s.err
	}
	// Not every ResponseWriter supports deadlines (httptest's recorder).
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, s.err = s.w.Write(b); s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err
}

// end clears the write deadline, so that it does not outlive the
// response on a keep-alive connection and fail the next one's writes.
func (s *stream) end() {
	if s.started {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}

// samplingParams are the sampling fields OpenAI's and Ollama's requests
// share, by the same JSON names; nil where a request set none. TopK, MinP
// and RepeatPenalty are not OpenAI's: llama.cpp's and vLLM's servers take
// them in the same body, and clients written for those send them.
type samplingParams struct {
	Temperature      *float64 `json:"temperature"`
	TopP             *float64 `json:"top_p"`
	MinP             *float64 `json:"min_p"`
	RepeatPenalty    *float64 `json:"repeat_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	TopK             *int     `json:"top_k"`
	// Seed means what each API says it means; the caller reads it.
	Seed *int64 `json:"seed"`
}

// check refuses a value outside its range, by the API's parameter names.
// maxTemperature is the API's bound: OpenAI's 2, none for Ollama.
func (p samplingParams) check(maxTemperature float64) error {
	for _, c := range []struct {
		param  string
		v      *float64
		lo, hi float64
	}{
		{"temperature", p.Temperature, 0, maxTemperature},
		{"top_p", p.TopP, 0, 1},
		{"min_p", p.MinP, 0, 1},
		{"repeat_penalty", p.RepeatPenalty, 0, math.Inf(1)},
		{"frequency_penalty", p.FrequencyPenalty, -2, 2},
		{"presence_penalty", p.PresencePenalty, -2, 2},
	} {
		if err := inRange(c.param, c.v, c.lo, c.hi); err != nil {
			return err
		}
	}
	if p.TopK != nil && *p.TopK < 0 {
		return badRequest("top_k", "top_k must be at least 0 (0 keeps every token), got %d", *p.TopK)
	}
	return nil
}

// apply sets the values p gives on o, which check has passed, and the seed:
// seed, or a random one when it is nil.
// over is p with what it leaves unset taken from d.
func (p samplingParams) over(d samplingParams) samplingParams {
	for _, f := range []struct{ dst, src **float64 }{
		{&p.Temperature, &d.Temperature}, {&p.TopP, &d.TopP}, {&p.MinP, &d.MinP}, {&p.RepeatPenalty, &d.RepeatPenalty},
		{&p.FrequencyPenalty, &d.FrequencyPenalty}, {&p.PresencePenalty, &d.PresencePenalty},
	} {
		if *f.dst == nil {
			*f.dst = *f.src
		}
	}
	if p.TopK == nil {
		p.TopK = d.TopK
	}
	if p.Seed == nil {
		p.Seed = d.Seed
	}
	return p
}

func (p samplingParams) apply(o sample.Options, seed *uint64) sample.Options {
	set := func(dst *float32, v *float64) {
		if v != nil {
			*dst = float32(*v)
		}
	}
	set(&o.Temperature, p.Temperature)
	set(&o.TopP, p.TopP)
	set(&o.MinP, p.MinP)
	set(&o.RepeatPenalty, p.RepeatPenalty)
	set(&o.FrequencyPenalty, p.FrequencyPenalty)
	set(&o.PresencePenalty, p.PresencePenalty)
	if p.TopK != nil {
		o.TopK = *p.TopK
	}
	o.Seed = randomSeed()
	if seed != nil {
		o.Seed = *seed
	}
	return o
}

// checkSampling is the last check of options a request built: a value the
// API's own checks let through but the sampler refuses is still the
// client's error.
func checkSampling(o sample.Options) error {
	if err := o.Validate(); err != nil {
		return badRequest("", "%v", err)
	}
	return nil
}

// finishStream handles the end of a generation that did not succeed. done
// reports that the handler is finished, returning err: the generation
// failed before the response began (err is for the API's error response),
// or the stream carries the error, or the client is gone.
func (s *server) finishStream(run *run, err error, reply app.Reply, a api) (done bool, _ error) {
	if err == nil && reply.Stats.Stop != "canceled" {
		return false, nil
	}
	if err == nil {
		return true, nil // the client went away; nobody reads the end
	}
	if run.s == nil || !run.s.started {
		return true, err
	}
	if run.s.err != nil {
		return true, nil // the write failed: the client went away mid-stream
	}
	// Headers are out: the error becomes the stream's last message, as
	// OpenAI and Ollama send one.
	s.log.Error("generation failed mid-stream", "err", err)
	e := classify(err)
	if a == openAIAPI {
		run.s.write(sseEvent(openAIErrorOf(e)))
	} else {
		run.s.write(ndjsonLine(ollamaError{e.msg}))
	}
	return true, nil
}
