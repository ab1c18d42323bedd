package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/server"
	"github.com/hearthstudio/hearth/app/settings"
)

// shutdownGrace is how long replies in progress may run on after SIGINT or
// SIGTERM. Then their connections close, which stops their generations at
// the next token: a user pressing Ctrl+C waits seconds, not a whole reply.
const shutdownGrace = 5 * time.Second

// maxParallel bounds --parallel: a decode of every slot is one batch, and
// 64 sequences at once is past what one GPU serves well.
const maxParallel = 64

// serveFlags are hearth serve's own flags.
type serveFlags struct {
	addr, apiKey, maxBody string
	queue, parallel       int
	imageTokens           int
	idle                  time.Duration
	folders               []string
}

func newServeCmd() *cobra.Command {
	var mf modelFlags
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:11435] [--api-key KEY] [-m MODEL]",
		Short: "OpenAI- and Ollama-compatible API for the models on this machine",
		Long: `Serve the models hearth models lists over HTTP, in OpenAI's API (/v1/chat/completions,
/v1/completions, /v1/models) and Ollama's (/api/chat, /api/generate, /api/tags,
/api/show, /api/ps), so existing clients work unchanged. Requests name models as
hearth models lists them (gemma3:1b); a model loads on first use and is unloaded
after --idle without requests. Up to --parallel chat and completion requests
run at once, their tokens decoded together (each takes a KV cache of the
context's size); up to --queue more wait, and more than that are answered 429.
A model paired with a vision projector (an mmproj file beside it, or in its
Ollama manifest) reads the images requests carry: data URLs in OpenAI's
image_url parts, base64 in Ollama's images. The server fetches no URL.

The server listens on loopback unless --addr names another address. With
--api-key (or $HEARTH_API_KEY, which keeps the key out of the process list)
every request but the "/" probe needs "Authorization: Bearer KEY". Ctrl+C lets
replies in progress finish for a few seconds, then stops them.`,
		Example: `  hearth serve
  hearth serve -m gemma3:1b --idle 30m
  hearth serve -m llama3.2:1b --parallel 8 -c 4096
  HEARTH_API_KEY=secret hearth serve --addr 0.0.0.0:11435`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), &mf, &sf, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	mf.register(cmd)
	cmd.Flags().Lookup("model").Usage = "a model to load at start: a name hearth models lists, or a .gguf file (served under its file name)"
	fl := cmd.Flags()
	fl.StringVar(&sf.addr, "addr", "127.0.0.1:11435", "address to listen on; a non-loopback one is reachable from other machines")
	fl.StringVar(&sf.apiKey, "api-key", os.Getenv("HEARTH_API_KEY"), "require this bearer token of every request (default $HEARTH_API_KEY)")
	fl.IntVar(&sf.queue, "queue", 8, "requests that may wait behind the running ones; more are answered 429")
	fl.IntVar(&sf.parallel, "parallel", 1, "chat and completion requests served at once, each with a KV cache of the context's size")
	fl.DurationVar(&sf.idle, "idle", 5*time.Minute, "unload the model after this long without requests; 0 keeps it")
	fl.StringVar(&sf.maxBody, "max-body", "64MiB", "largest request body (images come in it as base64); a larger one is answered 413")
	imageTokensFlag(cmd, &sf.imageTokens)
	fl.StringArrayVar(&sf.folders, "folder", nil, "also serve the models in `DIR` and the folders in it (repeatable)")
	return cmd
}

func serve(ctx context.Context, mf *modelFlags, sf *serveFlags, out, log io.Writer) error {
	if sf.queue < 1 {
		return fmt.Errorf("--queue %d: want at least 1", sf.queue)
	}
	if sf.parallel < 1 || sf.parallel > maxParallel {
		return fmt.Errorf("--parallel %d: want 1 to %d", sf.parallel, maxParallel)
	}
	if sf.idle < 0 {
		return fmt.Errorf("--idle %s: want a positive duration, or 0 to keep the model", sf.idle)
	}
	maxBody, err := settings.ParseSize(sf.maxBody)
	if err != nil {
		return fmt.Errorf("--max-body: %w", err)
	}
	var budget uint64
	if mf.gpuMemory != "" {
		if budget, err = settings.ParseSize(mf.gpuMemory); err != nil {
			return fmt.Errorf("--gpu-memory: %w", err)
		}
	}
	roots := libraryRoots(sf.folders...)
	if st, err := os.Stat(mf.path); err == nil && !st.IsDir() {
		// A file named on the command line is the operator's choice, so
		// it joins the catalogue; requests still name only catalogue models.
		roots.Folders = append(roots.Folders, mf.path)
	}
	lib := library.New(roots)
	models := server.Library(lib)
	var adapters []app.AdapterSpec
	for _, spec := range mf.loras {
		path, scale, err := resolveLoRA(lib, spec)
		if err != nil {
			return err
		}
		adapters = append(adapters, app.AdapterSpec{Path: path, Scale: scale})
	}

	logger := slog.New(slog.NewTextHandler(log, nil))
	engine := app.NewEngine(app.EngineOptions{
		Backend: mf.backend, GPU: app.GPUOptionsFromEnv(), Context: mf.ctx, Batch: mf.batch, GPUMemory: budget, F32Activations: mf.f32,
		Queue: sf.queue, Parallel: sf.parallel, IdleUnload: sf.idle, Resolve: models.Resolve, OnStatus: noteLogger(logger),
		ImageTokens: sf.imageTokens,
		// By name, as Resolve: the projector is the catalogue's, never
		// found from a path.
		Projector: func(name, _ string) (string, error) { return models.Projector(name) },
	})
	defer engine.Close()

	loopback := server.LoopbackAddr(sf.addr)
	if !loopback {
		fmt.Fprintf(log, "warning: %s is reachable from other machines: whoever reaches it can run models on this one\n", sf.addr)
		if sf.apiKey == "" {
			fmt.Fprintln(log, "warning: no API key: anyone on the network can use this server; set HEARTH_API_KEY or --api-key")
		}
	}
	ln, err := net.Listen("tcp", sf.addr)
	if err != nil {
		return err
	}
	defer ln.Close()

	if mf.path != "" {
		name, err := catalogueName(lib, mf.path)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "loading %s\n", name)
		info, err := engine.Load(ctx, name, nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "loaded %s (%s, context %d, %d at once)\n", name, info.Backend, info.Context, info.Slots)
		if info.Backend == "cpu" && !strings.EqualFold(mf.backend, "cpu") {
			fmt.Fprintf(log, "running on the CPU: %s\n", info.BackendReason)
		}
	}

	srv := server.HTTPServer(server.New(engine, server.Options{Models: models, APIKey: sf.apiKey, MaxBody: int64(maxBody),
		IdleUnload: sf.idle, AnyHost: !loopback, Logger: logger, Adapters: adapters}))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "Hearth API listening on http://%s (OpenAI: /v1, Ollama: /api)\n", ln.Addr())

	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-served:
		return err
	case <-sigCtx.Done():
	}
	stop() // a second Ctrl+C ends the process at once
	fmt.Fprintln(log, "shutting down")
	graceCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(graceCtx); err != nil {
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// catalogueName is the name requests use for the model -m names: a file's
// entry in the catalogue, or a name as the library resolves it.
func catalogueName(lib *library.Library, arg string) (string, error) {
	if want, err := os.Stat(arg); err == nil && !want.IsDir() {
		for _, e := range lib.Scan() {
			if st, err := os.Stat(e.Path); err == nil && os.SameFile(st, want) {
				if e.Err != "" {
					return "", fmt.Errorf("model %s: %s", e.Name, e.Err)
				}
				return e.Name, nil
			}
		}
		return "", fmt.Errorf("%s is not a model file hearth can serve (want a .gguf language model)", arg)
	}
	e, err := lib.ResolveName(arg)
	if err != nil {
		return "", err
	}
	return e.Name, nil
}

// noteLogger logs the engine's notes (an idle unload, a lost device) as
// they change. The engine may call it from several goroutines.
func noteLogger(log *slog.Logger) func(app.Status) {
	var mu sync.Mutex
	last := ""
	return func(s app.Status) {
		mu.Lock()
		defer mu.Unlock()
		if s.Note != "" && s.Note != last {
			log.Info(s.Note)
		}
		last = s.Note
	}
}
