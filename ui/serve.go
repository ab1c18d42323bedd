package ui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app/server"
)

// apiServer is `hearth serve` inside the studio: the same OpenAI- and
// Ollama-compatible API, on the studio's own engine, so an editor plugin
// and the Chat tab share the loaded model and take turns on the GPU.
type apiServer struct {
	st *studio
	// handler is the API on the current engine; the Models tab's adapter
	// choice replaces the engine, and rebind swaps the handler under the
	// running listener.
	handler atomic.Pointer[http.Handler]
	// The running server, its listener and its URL; nil and "" while it
	// is off. The UI goroutine's.
	srv *http.Server
	ln  net.Listener
	url string
}

// studioModels is the server's catalogue: the names the studio's library
// lists now, resolved by name only, so a request can never name a path.
type studioModels struct{ st *studio }

func (m studioModels) List() []server.Model                { return m.st.models().List() }
func (m studioModels) Resolve(name string) (string, error) { return m.st.resolve(name) }

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*a.handler.Load()).ServeHTTP(w, r)
}

// rebind points the API at the studio's current engine. The chats its
// clients hold are kept in the Chat tab, tool calls and all.
func (a *apiServer) rebind() {
	st := a.st
	record := func(x server.Exchange) {
		st.post(func() {
			if st.chat != nil {
				st.chat.recordAPI(x)
			}
		})
	}
	h := server.New(st.engine, server.Options{Models: studioModels{st}, Record: record})
	a.handler.Store(&h)
}

// start listens on addr, which must be a loopback address: the studio has
// no API key setting, and `hearth serve --api-key` is the way to serve a
// network.
func (a *apiServer) start(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("API server address %q: %w", addr, err)
	}
	if !server.LoopbackAddr(addr) {
		return fmt.Errorf("API server address %q: the studio serves only this computer (127.0.0.1); use `hearth serve --addr %s --api-key KEY` to serve a network", addr, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("API server: %w", err)
	}
	a.rebind()
	srv := server.HTTPServer(a)
	a.srv, a.ln = srv, ln
	a.url = "http://" + ln.Addr().String()
	go func() {
		// stop closes the listener itself before Shutdown may begin, so
		// Serve can end with net.ErrClosed as well as ErrServerClosed.
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			a.st.showError(fmt.Errorf("API server stopped: %w", err))
		}
	}()
	return nil
}

// stop closes the listener at once, so no new request is taken and the
// port is free again, and lets replies in progress finish for a few
// seconds; past that their clients are cut off. wait says whether stop
// waits for those replies (the studio closing) or leaves them to finish in
// the background (the switch, on the UI goroutine, which must not freeze
// while a long reply streams).
func (a *apiServer) stop(wait bool) {
	if a.srv == nil {
		return
	}
	srv, ln := a.srv, a.ln
	a.srv, a.ln, a.url = nil, nil, ""
	ln.Close()
	// Idle keep-alive connections close now too, so no client is answered
	// once the switch is off; Shutdown would close them, but later.
	srv.SetKeepAlivesEnabled(false)
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		// Shutdown also reports the listener closed above; only a reply
		// still running at the deadline calls for Close.
		if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			srv.Close()
		}
	}
	if wait {
		shutdown()
	} else {
		go shutdown()
	}
}

// serverControl is the status bar's switch for the API server, with the
// address it listens on; the choice is kept in the settings and the
// server starts with the studio when it was on.
func serverControl(st *studio) fyne.CanvasObject {
	a := &apiServer{st: st}
	st.api = a
	st.onClose(func() { a.stop(true) })
	label := widget.NewLabel("")
	var check *widget.Check
	check = widget.NewCheck("API server", func(on bool) {
		if on == (a.srv != nil) {
			return
		}
		if on {
			if err := a.start(st.settings.ServerAddr); err != nil {
				st.showError(err)
				check.SetChecked(false)
				return
			}
			label.SetText(a.url + "/v1 · /api")
		} else {
			a.stop(false)
			label.SetText("")
		}
		if st.settings.Serve != on {
			st.settings.Serve = on
			st.saveSettings()
		}
	})
	if st.settings.Serve {
		check.SetChecked(true)
	}
	return container.NewHBox(check, label)
}
