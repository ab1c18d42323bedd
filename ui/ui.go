// Package ui is Hearth's Fyne front end. It talks only to package app and
// engine-level descriptions; it never touches a GPU object itself.
package ui

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/assets"
	"github.com/hearthstudio/hearth/engine/gpu"
)

// ErrNoDisplay is returned by Run on a machine with no graphical session, so
// `make run` or a bare `hearth` over SSH says what is wrong instead of
// crashing inside the windowing library.
var ErrNoDisplay = errors.New("no display: the studio needs a graphical session (DISPLAY or WAYLAND_DISPLAY is unset); the command line still works, see hearth --help, or run under xvfb-run")

// hasDisplay reports whether a window can be opened. Only Linux and the BSDs
// depend on an X11/Wayland session; macOS and Windows always have a desktop.
func hasDisplay() bool {
	switch runtime.GOOS {
	case "darwin", "windows", "android", "ios":
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// Run opens the studio window and returns when it is closed.
func Run() error {
	if !hasDisplay() {
		return ErrNoDisplay
	}
	a := fyneapp.NewWithID("studio.hearth")
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon))
	w := a.NewWindow("Hearth")
	w.SetContent(Studio(adapterStatus()))
	w.Resize(fyne.NewSize(1100, 720))
	w.ShowAndRun()
	return nil
}

// adapterStatus is the status bar's GPU line.
func adapterStatus() string {
	adapters, err := gpu.Adapters(gpu.OptionsFromEnv())
	if err != nil {
		return "GPU: " + err.Error()
	}
	chosen, err := gpu.Choose(adapters, gpu.OptionsFromEnv())
	if err != nil {
		return "GPU: " + err.Error()
	}
	return fmt.Sprintf("GPU: %s (%s, %s)", chosen.Label(), chosen.Type, chosen.Backend)
}

// Studio is the main window's content: the four tabs and a status bar.
func Studio(status string) fyne.CanvasObject {
	tabs := container.NewAppTabs(
		container.NewTabItem("Chat", comingPanel("Chat", "Chat with GGUF models on your GPU. Text generation lands with the model engine.")),
		container.NewTabItem("Voice", comingPanel("Voice", "Read text aloud with Kokoro voices.")),
		container.NewTabItem("Tune", comingPanel("Tune", "Fine-tune a model on your own data with LoRA.")),
		container.NewTabItem("Models", comingPanel("Models", "Models found on this machine, and `hearth inspect` for any GGUF file.")),
	)
	return container.NewBorder(nil, widget.NewLabel(status), nil, nil, tabs)
}

func comingPanel(title, text string) fyne.CanvasObject {
	heading := widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	body := widget.NewLabel(text + "\n\nThis panel is coming in a later release of Hearth.")
	body.Wrapping = fyne.TextWrapWord
	return container.NewVBox(heading, body)
}
