package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app/download"
	"github.com/hearthstudio/hearth/app/settings"
)

// downloadDialog asks for a Hugging Face file (owner/repo:file.gguf or a
// link to it) and downloads it into the Hugging Face cache, with a progress
// bar and a Cancel that stops it; the library is scanned again and the
// model loaded when it is done. A bad name or a failed download is said in
// the dialog, which stays open to try again.
func downloadDialog(st *studio) {
	spec := widget.NewEntry()
	spec.SetPlaceHolder("owner/repo:file.gguf, or a huggingface.co link to the file")
	hint := widget.NewLabel(fmt.Sprintf("The file goes into the Hugging Face cache (%s), where Python tools find it too. "+
		"A download that stops resumes where it left off.", tildePath(download.DefaultCacheDir())))
	hint.Wrapping = fyne.TextWrapWord
	progress := widget.NewProgressBar()
	progress.Hide()
	// The message stays in the layout, empty when there is nothing to
	// say, so that its text wraps to the dialog's width when it comes.
	message := widget.NewLabel("")
	message.Wrapping = fyne.TextWrapWord
	var content *fyne.Container
	say := func(text string, imp widget.Importance) {
		message.Text, message.Importance = text, imp
		message.Refresh()
		content.Refresh()
	}

	var d *dialog.CustomDialog
	var cancel context.CancelFunc // set while a download runs
	start := widget.NewButton("Download", nil)
	start.Importance = widget.HighImportance
	closeButton := widget.NewButton("Close", nil)
	start.OnTapped = func() {
		if strings.TrimSpace(spec.Text) == "" {
			say("Name the file: its repository and file name, such as Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_k_m.gguf, or paste its link from huggingface.co.", widget.MediumImportance)
			return
		}
		s, err := download.ParseSpec(spec.Text)
		if err != nil {
			say(err.Error(), widget.DangerImportance)
			return
		}
		ctx, stop := context.WithCancel(context.Background())
		cancel = stop
		start.Disable()
		spec.Disable()
		closeButton.SetText("Cancel")
		progress.SetValue(0)
		progress.Show()
		say("Asking Hugging Face for "+s.String()+"…", widget.MediumImportance)
		go func() {
			path, err := download.Fetch(ctx, s, download.Options{Progress: func(done, total int64) {
				st.post(func() {
					if total > 0 {
						progress.SetValue(float64(done) / float64(total))
						say(fmt.Sprintf("%s of %s", settings.FormatSize(done), settings.FormatSize(total)), widget.MediumImportance)
					} else {
						say(settings.FormatSize(done)+" so far", widget.MediumImportance)
					}
				})
			}})
			st.post(func() {
				canceled := ctx.Err() != nil
				stop()
				cancel = nil
				start.Enable()
				spec.Enable()
				closeButton.SetText("Close")
				switch {
				case canceled && errors.Is(err, context.Canceled):
					progress.Hide()
					say("Canceled. What was received is kept: downloading the same file again resumes it.", widget.MediumImportance)
				case err != nil:
					progress.Hide()
					say(err.Error(), widget.DangerImportance)
				default:
					d.Hide()
					st.rescan(func() {
						if e, ok := st.entryByPath(path); ok {
							st.loadModel(e)
						}
					})
				}
			})
		}()
	}
	closeButton.OnTapped = func() {
		if cancel != nil {
			cancel()
			return
		}
		d.Hide()
	}
	spec.OnSubmitted = func(string) { start.OnTapped() }

	content = container.NewVBox(spec, hint, progress, message)
	d = dialog.NewCustomWithoutButtons("Download a model from Hugging Face", content, st.win)
	d.SetButtons([]fyne.CanvasObject{closeButton, start})
	d.Resize(fyne.NewSize(640, 280))
	d.Show()
	st.win.Canvas().Focus(spec)
}
