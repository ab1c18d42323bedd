// Package server is Hearth's local HTTP API: OpenAI's chat completions,
// completions, models and audio speech endpoints, and Ollama's native API (/api/chat,
// /api/generate, /api/tags, /api/show, /api/ps), both answered by the one
// engine goroutine, so clients written for either run on Hearth's models
// unchanged.
//
// Every generation is a job on the engine's queue: up to the engine's
// Parallel generations run at once, their tokens decoded together, a
// request past the queue's bound is answered 429 at once, and a client
// that goes away cancels its generation at the next token. Models load on first
// use, by name, and only names the Models catalogue lists are accepted: no
// request can make the server open a path of its choosing. Images come
// inside the requests, base64-encoded; the server fetches no URL.
//
// The handler also defends a server on the loopback interface against web
// pages in the user's browser: a Host header that is not a loopback name is
// refused (DNS rebinding), and so is a request from a page of another
// origin unless an API key is required.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
)

// Model is one model a client may name.
type Model struct {
	// Name is how clients name it: an Ollama store tag ("llama3.2:1b"), or
	// the library's name for a file found elsewhere.
	Name     string
	Size     int64 // bytes on disk
	Modified time.Time
	// Digest identifies the file, hex, as Ollama's /api/tags lists it; ""
	// when the catalogue has none.
	Digest  string
	Family  string // general.architecture: "llama", "gemma3"
	Params  uint64 // parameter count
	Quant   string // "Q4_K_M", "Q8_0", "F16"
	Context int    // the context length the model was trained for
	// Vision reports that the model reads images: the catalogue pairs it
	// with a vision projector (mmproj file), which the engine must be
	// given too (app.EngineOptions.Projector). A request with images for
	// a model without is refused.
	Vision bool
	// System and Options are an Ollama store model's own system prompt
	// and parameters (its Modelfile's SYSTEM and PARAMETER lines: a JSON
	// object of Ollama options), "" when it has none. As in Ollama, the
	// system prompt opens a conversation that has none of its own, and the
	// parameters are the defaults of the options a request leaves out.
	System  string
	Options string
}

// Models is the catalogue the server serves: the only models a request can
// name.
type Models interface {
	// List returns every model a client may name.
	List() []Model
	// Resolve returns the file of a name that List returns. The server
	// opens it only to describe the model (/api/show); the engine must be
	// given the same resolver (app.EngineOptions.Resolve) to load it.
	Resolve(name string) (path string, err error)
}

// DefaultMaxBody bounds a request body when Options.MaxBody is 0. A long
// conversation is a few hundred KiB of JSON, but images come in it as
// base64, 4/3 of their size, and a client sends a conversation's every
// image again with each turn: 64 MiB holds a dozen phone photos (3-5 MB
// each as JPEG). A body is held in memory while it is decoded, and its
// images for as long as the request waits and runs.
const DefaultMaxBody = 64 << 20

// Options configure the API handler.
type Options struct {
	// Models are the models requests may name. Required.
	Models Models
	// APIKey, when set, is required of every request except the "/" probe,
	// as "Authorization: Bearer KEY".
	APIKey string
	// MaxBody bounds request bodies; a larger one gets 413. 0 is
	// DefaultMaxBody.
	MaxBody int64
	// IdleUnload is the engine's (app.EngineOptions.IdleUnload), reported
	// as the resident model's expiry by /api/ps; 0 means it stays.
	IdleUnload time.Duration
	// AnyHost accepts requests whatever their Host header names. Leave it
	// false for a server listening on loopback: a web page that makes its
	// own domain resolve to 127.0.0.1 (DNS rebinding) then cannot reach the
	// API. A server listening on a network address needs it set.
	AnyHost bool
	// Adapters are LoRA adapters applied to every generation (hearth serve
	// --lora).
	Adapters []app.AdapterSpec
	// Logger receives one line per request and the engine's notices; nil
	// discards them.
	Logger *slog.Logger
	// Record, when set, is given every chat request answered in full
	// (/v1/chat/completions, /api/chat), on the request's goroutine once
	// the reply is complete, before its last bytes are sent: the studio
	// keeps them as conversations. A request that failed, or whose client
	// left before the reply was complete, is not given.
	Record func(Exchange)
}

// Exchange is one chat request the server answered, for Options.Record.
type Exchange struct {
	API string // "OpenAI" or "Ollama"
	// Messages are the conversation the model answered, the model's own
	// system prompt first where the request had none, each with its images
	// (chat.Message.Images, decoded from the request's base64). Images
	// stand before the text unless an OpenAI client put one after some of
	// it: chat.ImageMarker then marks each in Content.
	Messages []chat.Message
	// Reply is the answer: its text, its tool calls with the IDs the
	// client was given, and its statistics.
	Reply app.Reply
}

// record gives Options.Record the exchange, if it is set.
func (s *server) record(api string, msgs []chat.Message, reply app.Reply) {
	if s.o.Record != nil {
		s.o.Record(Exchange{API: api, Messages: msgs, Reply: reply})
	}
}

// server is the handler New returns.
type server struct {
	engine *app.Engine
	o      Options
	mux    *http.ServeMux
	keySum [sha256.Size]byte // of o.APIKey, for a constant-time compare
	log    *slog.Logger
	// lastUsed is when the server's last generation ended (Unix ns): the
	// engine's idle timer starts then, so /api/ps can say when the model
	// will be unloaded.
	lastUsed atomic.Int64
}

// New returns the API's handler, running every generation on e. The engine
// must resolve model names with o.Models.Resolve (app.EngineOptions.Resolve)
// so that it loads only the catalogue's files.
func New(e *app.Engine, o Options) http.Handler {
	if o.Models == nil {
		panic("server: New without Options.Models")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	s := &server{engine: e, o: o, mux: http.NewServeMux(), log: o.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.APIKey != "" {
		s.keySum = sha256.Sum256([]byte(o.APIKey))
	}
	s.routes()
	return s
}

// HTTPServer is an http.Server for h with the timeouts a streaming API
// needs: headers must arrive within 10 s (a client that trickles them holds
// a connection), idle keep-alive connections close after 2 minutes, and
// there is no WriteTimeout or ReadTimeout, which would cut a long stream
// (net/http cancels a request's context when a read deadline passes while
// it waits for the client to go away). Bodies get their own deadline as
// they are read.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// api is which API a path belongs to, which decides the error format.
type api int

const (
	ollamaAPI api = iota
	openAIAPI
)

func apiOf(path string) api {
	if strings.HasPrefix(path, "/v1/") || path == "/v1" {
		return openAIAPI
	}
	return ollamaAPI
}

func (s *server) routes() {
	s.handle("/{$}", ollamaAPI, http.MethodGet, s.running)
	s.handle("/api/version", ollamaAPI, http.MethodGet, s.version)
	s.handle("/api/tags", ollamaAPI, http.MethodGet, s.tags)
	s.handle("/api/ps", ollamaAPI, http.MethodGet, s.ps)
	s.handle("/api/show", ollamaAPI, http.MethodPost, s.show)
	s.handle("/api/chat", ollamaAPI, http.MethodPost, s.ollamaChat)
	s.handle("/api/generate", ollamaAPI, http.MethodPost, s.ollamaGenerate)
	s.handle("/api/embed", ollamaAPI, http.MethodPost, s.ollamaEmbed)
	s.handle("/api/embeddings", ollamaAPI, http.MethodPost, s.ollamaEmbeddings)

	s.handle("/v1/models", openAIAPI, http.MethodGet, s.listModels)
	s.handle("/v1/models/{model...}", openAIAPI, http.MethodGet, s.getModel)
	s.handle("/v1/chat/completions", openAIAPI, http.MethodPost, s.chatCompletions)
	s.handle("/v1/completions", openAIAPI, http.MethodPost, s.completions)
	s.handle("/v1/embeddings", openAIAPI, http.MethodPost, s.embeddings)
	s.handle("/v1/audio/speech", openAIAPI, http.MethodPost, s.audioSpeech)

	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiOf(r.URL.Path), &apiError{status: http.StatusNotFound,
			msg: "no such endpoint: " + r.Method + " " + r.URL.Path, code: "not_found"})
	})
}

// handlerFunc is an endpoint: an error it returns becomes the API's error
// response, unless the client is gone or the response has begun.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers h for method on path, answering other methods with 405
// in the API's own error format (the mux's would be plain text). A GET
// endpoint also answers HEAD.
func (s *server) handle(path string, a api, method string, h handlerFunc) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			allow := method
			if method == http.MethodGet {
				allow += ", " + http.MethodHead
			}
			w.Header().Set("Allow", allow)
			writeError(w, a, &apiError{status: http.StatusMethodNotAllowed,
				msg: r.Method + " " + r.URL.Path + ": method not allowed; use " + method, code: "method_not_allowed"})
			return
		}
		if err := h(w, r); err != nil {
			if r.Context().Err() != nil {
				return // the client is gone: nobody reads an error
			}
			e := classify(err)
			if e.status >= http.StatusInternalServerError && e.status != http.StatusNotImplemented {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, a, e)
		}
	})
}

// ServeHTTP guards the API (host, origin, key) and routes the request.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"duration", time.Since(start).Round(time.Millisecond))
	}()
	a := apiOf(r.URL.Path)
	if !s.o.AnyHost && !loopbackHost(r.Host) {
		writeError(rec, a, &apiError{status: http.StatusForbidden, code: "host_not_allowed",
			msg: "host " + r.Host + " is not allowed: this server answers only requests addressed to localhost"})
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !loopbackOrigin(origin) && s.o.APIKey == "" {
			// A page of another site in the user's browser could otherwise
			// run generations on this machine.
			writeError(rec, a, &apiError{status: http.StatusForbidden, code: "origin_not_allowed",
				msg: "requests from web pages of " + origin + " are not allowed; start the server with an API key to allow them"})
			return
		}
		h := rec.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			// A preflight carries no credentials; the request that
			// follows it is checked.
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "600")
			rec.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if s.o.APIKey != "" && !(r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead)) {
		if !s.authorized(r) {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="hearth"`)
			writeError(rec, a, &apiError{status: http.StatusUnauthorized, code: "invalid_api_key",
				msg: "missing or wrong API key: send it as Authorization: Bearer KEY"})
			return
		}
	}
	s.mux.ServeHTTP(rec, r)
}

// authorized compares the request's bearer token with the key in constant
// time. Both sides are hashed first, so not even the key's length leaks
// through the time a wrong guess takes.
func (s *server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) < len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(auth[len(prefix):])))
	return subtle.ConstantTimeCompare(sum[:], s.keySum[:]) == 1
}

// loopbackHost reports whether a Host header names this machine's loopback
// interface: localhost (or a name under .localhost, which resolvers must
// keep on loopback, RFC 6761) or a loopback IP.
func loopbackHost(hostport string) bool {
	if hostport == "" {
		return true // HTTP/1.0 sends none; it cannot have been rebound
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackAddr reports whether a listen address (host:port) stays on this
// machine: localhost or a loopback IP (an empty host listens on every
// interface). `hearth serve` warns past it; the studio refuses the rest.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOrigin reports whether an Origin header is a page served from
// this machine's loopback interface.
func loopbackOrigin(origin string) bool {
	rest, ok := strings.CutPrefix(origin, "http://")
	if !ok {
		if rest, ok = strings.CutPrefix(origin, "https://"); !ok {
			return false // "null" (a sandboxed frame, a file://) and the like
		}
	}
	return loopbackHost(rest)
}

// recorder remembers the status for the request log. Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// running answers the probe Ollama clients send before anything else.
func (s *server) running(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := w.Write([]byte("Ollama is running"))
	return err
}

// touch records the end of a generation for /api/ps's expiry.
func (s *server) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// unloadAfter frees the model when a request asked for keep_alive 0. It runs
// as a job of its own after the request's, on a context of its own: the
// client may already be gone, and its wish still holds.
func (s *server) unloadAfter(name string) {
	if st := s.engine.Status(); st.Model == nil || st.Model.Name != name {
		return
	}
	if err := s.engine.Unload(context.Background()); err != nil {
		s.log.Warn("keep_alive 0: unload failed", "model", name, "err", err)
	}
}
