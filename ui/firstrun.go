package ui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/app/settings"
	"github.com/hearthstudio/hearth/internal/units"
)

// sampleQuant is the quantization of the models the first-run screen
// makes: the one most GGUF downloads use, so the speed and memory shown
// are those of a typical model of that shape.
const sampleQuant = "Q4_K_M"

// defaultSample is the preset chosen first: a model small enough to write
// and load in a second on any machine.
const defaultSample = "tiny-llama"

// firstRunView is the Models tab while the library is empty: where Hearth
// looks for models, the ways to add one, and a model it can make itself
// to try the studio without a download.
func firstRunView(st *studio) *fyne.Container {
	heading := headingLabel("Welcome to Hearth")
	intro := widget.NewLabel("Hearth runs GGUF language models on this computer's GPU. It has not found any models here yet: add one of your own, download one, or let Hearth make one to try the studio.")
	intro.Wrapping = fyne.TextWrapWord

	places := container.New(layout.NewFormLayout())
	refreshPlaces := func() {
		r := st.roots()
		folders := "none yet"
		if fs := append(slices.Clone(st.settings.Folders), st.settings.Files...); len(fs) > 0 {
			folders = tildePaths(fs)
		}
		rows := [][2]string{
			{"Ollama", orNone(tildePath(r.Ollama)) + "  (OLLAMA_MODELS)"},
			{"Hugging Face cache", orNone(tildePath(r.HFCache)) + "  (HF_HUB_CACHE, HF_HOME)"},
			{"LM Studio", orNone(tildePaths(r.LMStudio))},
			{"Hearth", tildePaths(r.Hearth)},
			{"Your folders", folders},
		}
		places.Objects = nil
		for _, row := range rows {
			name := widget.NewLabelWithStyle(row[0], fyne.TextAlignTrailing, fyne.TextStyle{Bold: true})
			path := widget.NewLabel(row[1])
			path.Wrapping = fyne.TextWrapWord
			path.Selectable = true
			places.Objects = append(places.Objects, name, path)
		}
		places.Refresh()
	}
	st.onLibrary(refreshPlaces)
	refreshPlaces()

	drop := widget.NewLabel("Drop a .gguf file anywhere on this window to add it and load it.")
	drop.Wrapping = fyne.TextWrapWord
	download := widget.NewButtonWithIcon("Download…", theme.DownloadIcon(), func() { downloadDialog(st) })
	addFolder := widget.NewButtonWithIcon("Add folder…", theme.FolderOpenIcon(), func() { addFolderDialog(st) })
	rescan := widget.NewButtonWithIcon("Look again", theme.ViewRefreshIcon(), func() { st.rescan(nil) })
	add := container.NewVBox(
		container.NewBorder(nil, nil, widget.NewIcon(theme.UploadIcon()), nil, drop),
		container.NewHBox(download, widget.NewLabel("a GGUF file from Hugging Face")),
		container.NewHBox(addFolder, widget.NewLabel("a folder where you keep GGUF files")),
		container.NewHBox(rescan, widget.NewLabel("after a download in another tool")),
	)

	// The two ways to get going side by side, above the fold of a
	// 720-pixel window; where Hearth looks is reference, below them.
	content := container.NewVBox(
		heading, intro,
		container.NewGridWithColumns(2,
			container.NewVBox(section("Add a model"), add),
			container.NewVBox(section("Or try one Hearth makes"), sampleMaker(st)),
		),
		section("Where Hearth looks"), places,
	)
	return container.NewPadded(scrollColumn(content))
}

func section(title string) fyne.CanvasObject {
	l := widget.NewLabelWithStyle(title, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	l.SizeName = theme.SizeNameSubHeadingText
	return container.NewVBox(spacer(theme.Padding()), widget.NewSeparator(), l)
}

// tildePath writes a path in the user's home folder as ~/…: shorter, and
// what the user would type.
func tildePath(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || p == "" {
		return p
	}
	if rel, err := filepath.Rel(home, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if rel == "." {
			return "~"
		}
		return filepath.Join("~", rel)
	}
	return p
}

func tildePaths(ps []string) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = tildePath(p)
	}
	return strings.Join(out, "\n")
}

func orNone(s string) string {
	if s == "" {
		return "not set"
	}
	return s
}

// sampleMaker lists the shapes `hearth synth` can make, with their sizes,
// and makes the chosen one into the studio's models folder and loads it.
func sampleMaker(st *studio) fyne.CanvasObject {
	about := widget.NewLabel("Hearth can write a model with random weights and the exact shapes of a real one. " +
		"It answers with noise, but it shows how the studio works and how fast this machine runs a model of that size. " +
		"The tiny ones take a second; the others are the size of the real model.")
	about.Wrapping = fyne.TextWrapWord

	presets := app.SampleModels()
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.Name
	}
	choose := widget.NewSelect(names, nil)
	detail := widget.NewLabel("")
	detail.Wrapping = fyne.TextWrapWord
	chosen := func() (app.SampleModel, bool) {
		i := choose.SelectedIndex()
		if i < 0 || i >= len(presets) {
			return app.SampleModel{}, false
		}
		return presets[i], true
	}
	choose.OnChanged = func(string) {
		p, ok := chosen()
		if !ok {
			return
		}
		what := "The shapes of " + p.Model
		if rest, test := strings.CutPrefix(p.Model, "test model: "); test {
			what = "A tiny test model: " + rest
		}
		detail.SetText(fmt.Sprintf("%s. Written as %s into %s.", what, sampleQuant, tildePath(filepath.Join(st.dir, "models"))))
	}
	choose.SetSelectedIndex(slices.Index(names, defaultSample))

	progress := widget.NewProgressBar()
	progress.Hide()
	message := widget.NewLabel("")
	message.Wrapping = fyne.TextWrapWord
	message.Importance = widget.DangerImportance
	message.Hide()
	var makeButton *widget.Button
	makeButton = widget.NewButtonWithIcon("Make and load", theme.ContentAddIcon(), func() {
		p, ok := chosen()
		if !ok {
			return
		}
		makeButton.Disable()
		progress.SetValue(0)
		progress.Show()
		message.Hide()
		st.makeSample(p, func(done, total int64) {
			if total > 0 {
				progress.SetValue(float64(done) / float64(total))
			}
		}, func(err error) {
			makeButton.Enable()
			progress.Hide()
			if err != nil {
				message.SetText(err.Error())
				message.Show()
			}
		})
	})
	makeButton.Importance = widget.HighImportance

	// Planning a preset builds its vocabulary: a few tenths of a second
	// for all of them, too long for the UI goroutine. The options keep
	// the presets' order, so an index names a preset before and after.
	go func() {
		texts := make([]string, len(presets))
		for i, p := range presets {
			texts[i] = p.Name
			if params, size, err := app.SampleModelSize(p, sampleQuant); err == nil {
				texts[i] = fmt.Sprintf("%s · %s parameters · %s", p.Name, units.Count(params), settings.FormatSize(size))
			}
		}
		st.post(func() {
			i := choose.SelectedIndex()
			choose.Options = texts
			choose.SetSelectedIndex(i)
		})
	}()

	return container.NewVBox(about,
		container.NewBorder(nil, nil, nil, makeButton, choose),
		detail, progress, message)
}

// makeSample writes preset p (at sampleQuant) into the studio's models
// folder, unless it is there already, and loads the model. The folder is a
// root of every library, the command line's too. progress and done run on the UI goroutine.
func (st *studio) makeSample(p app.SampleModel, progress func(done, total int64), done func(error)) {
	dir := library.HearthFolders(st.dir)[0]
	path := filepath.Join(dir, p.Name+"-"+sampleQuant+".gguf")
	go func() {
		err := os.MkdirAll(dir, 0o755)
		if _, serr := os.Stat(path); err == nil && errors.Is(serr, fs.ErrNotExist) {
			err = app.WriteSampleModel(context.Background(), path, p, sampleQuant, func(done, total int64) {
				st.post(func() { progress(done, total) })
			})
		}
		st.post(func() {
			if err != nil {
				done(fmt.Errorf("the model could not be written: %w", err))
				return
			}
			done(nil)
			st.rescan(func() {
				if e, ok := st.entryByPath(path); ok {
					st.loadModel(e)
				}
			})
		})
	}()
}
