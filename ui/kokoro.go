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

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/download"
	"github.com/hearthstudio/hearth/app/settings"
)

// downloadKokoroLabel is the Voice tab's button that gets the voice model;
// the tab's notice and the chat's read-aloud name it.
const downloadKokoroLabel = "Download Kokoro-82M"

// The voice sets the download offers, in the order shown.
var (
	kokoroFewVoices     = "A few voices: " + strings.Join(app.DefaultKokoroVoices, ", ")
	kokoroEnglishVoices = "Every English voice, American and British"
	kokoroAllVoices     = "Every voice, other languages' too"
)

// kokoroDownload is the dialog that downloads Kokoro-82M into the Kokoro
// directory: a choice of voices, a progress bar, and Cancel.
type kokoroDownload struct {
	voices   *widget.RadioGroup
	progress *widget.ProgressBar
	message  *widget.Label
	start    *widget.Button
	close    *widget.Button
	dialog   *dialog.CustomDialog
	cancel   context.CancelFunc // set while a download runs
}

// downloadKokoro opens the download dialog. When the download is done the
// dialog closes and the tab lists the voices again, which finds them.
func (vv *voiceView) downloadKokoro() {
	dir, err := vv.engine().KokoroDir()
	if err != nil {
		vv.showFailure(err)
		return
	}
	kd := &kokoroDownload{}
	vv.pulling = kd
	intro := widget.NewLabel(fmt.Sprintf("Kokoro-82M comes from %s on Hugging Face: its weights are 327 MB, and each voice about half a megabyte. "+
		"The files go into the Hugging Face cache (%s) and are linked into %s, where Hearth speaks from. "+
		"A download that stops resumes where it left off.",
		app.KokoroRepo, tildePath(download.DefaultCacheDir()), tildePath(dir)))
	intro.Wrapping = fyne.TextWrapWord
	kd.voices = widget.NewRadioGroup([]string{kokoroFewVoices, kokoroEnglishVoices, kokoroAllVoices}, nil)
	kd.voices.Required = true
	kd.voices.SetSelected(kokoroFewVoices)
	kd.progress = widget.NewProgressBar()
	kd.progress.Hide()
	kd.message = widget.NewLabel("")
	kd.message.Wrapping = fyne.TextWrapWord
	var content *fyne.Container
	say := func(text string, imp widget.Importance) {
		kd.message.Text, kd.message.Importance = text, imp
		kd.message.Refresh()
		content.Refresh()
	}

	kd.start = widget.NewButton("Download", nil)
	kd.start.Importance = widget.HighImportance
	kd.close = widget.NewButton("Close", nil)
	kd.start.OnTapped = func() {
		ctx, stop := context.WithCancel(context.Background())
		kd.cancel = stop
		kd.start.Disable()
		kd.voices.Disable()
		kd.close.SetText("Cancel")
		kd.progress.SetValue(0)
		kd.progress.Show()
		say("Asking Hugging Face for "+app.KokoroRepo+"…", widget.MediumImportance)
		// Retries as hearth pull makes them: 327 MB over a home link meets
		// a dropped connection now and then, and each retry resumes.
		opts := app.KokoroPullOptions{Dir: dir, Voices: []string{kokoroVoiceChoice(kd.voices.Selected)}, Download: download.Options{Retries: 5}}
		opts.Progress = func(p app.KokoroProgress) {
			vv.st.post(func() {
				if p.Total > 0 {
					kd.progress.SetValue(float64(p.Done) / float64(p.Total))
				}
				say(fmt.Sprintf("%s of %s (%s)", settings.FormatSize(p.Done), settings.FormatSize(p.Total), p.File), widget.MediumImportance)
			})
		}
		pull := vv.pullKokoro
		go func() {
			res, err := pull(ctx, opts)
			vv.st.post(func() {
				canceled := ctx.Err() != nil
				stop()
				kd.cancel = nil
				kd.start.Enable()
				kd.voices.Enable()
				kd.close.SetText("Close")
				switch {
				case canceled && errors.Is(err, context.Canceled):
					kd.progress.Hide()
					say("Canceled. What was received is kept: downloading again resumes it.", widget.MediumImportance)
				case err != nil:
					kd.progress.Hide()
					say(err.Error(), widget.DangerImportance)
				default:
					kd.dialog.Hide()
					vv.pulling = nil
					vv.showNotice(fmt.Sprintf("Kokoro-82M is ready, with %d voices.", len(res.Voices)), widget.SuccessImportance, false)
					vv.listVoices()
				}
			})
		}()
	}
	kd.close.OnTapped = func() {
		if kd.cancel != nil {
			kd.cancel()
			return
		}
		kd.dialog.Hide()
		vv.pulling = nil
	}

	content = container.NewVBox(intro, widget.NewLabel("Voices"), kd.voices, kd.progress, kd.message)
	kd.dialog = dialog.NewCustomWithoutButtons(downloadKokoroLabel, content, vv.st.win)
	kd.dialog.SetButtons([]fyne.CanvasObject{kd.close, kd.start})
	kd.dialog.Resize(fyne.NewSize(640, 400))
	kd.dialog.Show()
}

// kokoroVoiceChoice is the pull's voices for a choice of the dialog.
func kokoroVoiceChoice(choice string) string {
	switch choice {
	case kokoroEnglishVoices:
		return app.EnglishVoices
	case kokoroAllVoices:
		return app.AllVoices
	}
	return strings.Join(app.DefaultKokoroVoices, ",")
}

// noVoiceModelText is the Voice tab's no-model notice: what is missing,
// then the two ways to get it, whose buttons are beside the notice.
func noVoiceModelText(err error) string {
	missing, dir := missingModel(err)
	where := "the Kokoro folder"
	if dir != "" {
		where = dir
	}
	return "No Kokoro voice model was found, so Hearth cannot speak yet: " + missing + ". Press " + downloadKokoroLabel +
		" to get it from Hugging Face (327 MB and the voices you choose), or put the files in " + where + " and press Look again."
}

// readAloudNoModelText is the chat's: the button is on the Voice tab.
func readAloudNoModelText(err error) string {
	missing, _ := missingModel(err)
	return "The reply cannot be read aloud, as no Kokoro voice model was found: " + missing + ". Open the Voice tab and press " +
		downloadKokoroLabel + " there to get it from Hugging Face; then read the reply aloud again."
}

// missingModel is what a no-model error says is missing, without the
// command-line remedy that the error's own text ends with, and the Kokoro
// directory when the error names it.
func missingModel(err error) (missing, dir string) {
	var nm *app.NoVoiceModelError
	if errors.As(err, &nm) {
		return strings.TrimSuffix(nm.Missing.Error(), "."), nm.Dir
	}
	return strings.TrimSuffix(err.Error(), "."), ""
}
