package ui

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/hearthstudio/hearth/app/chats"
)

// This file is the Chat tab's images: those attached to the message being
// written, by the attach button or dropped on the window, and the
// thumbnails of the images a chat's messages show. Reading, checking and
// shrinking an image runs off the UI goroutine. Fyne's clipboard holds
// text only, so an image cannot be pasted.

const (
	// thumbSize is a thumbnail's side on screen, in Fyne's units.
	thumbSize = 96
	// thumbPixels is a thumbnail's side in pixels: twice thumbSize, so it
	// stays sharp on a screen of scale 2.
	thumbPixels = 2 * thumbSize
	// thumbWorkers bounds the thumbnails made at once: a 50-megapixel
	// photo (vision.MaxPixels) decodes to 200 MB, and a chat may show many.
	thumbWorkers = 2
)

// imageExts are the extensions of the images the engine reads, for the
// file dialog's filter and to tell an image dropped on the window.
var imageExts = []string{".png", ".jpg", ".jpeg", ".gif", ".webp"}

func isImageName(path string) bool {
	return slices.Contains(imageExts, strings.ToLower(filepath.Ext(path)))
}

// attachment is an image attached to the message being written.
type attachment struct {
	image chats.Image // with its bytes, until the store has them
	name  string      // the file's name
	thumb image.Image
}

// draft is a message as the composer sent it, given back to the composer
// when the engine refuses its images (the model has no projector).
type draft struct {
	text     string
	attached []attachment
}

// chooseImage attaches an image file the user picks.
func (cv *chatView) chooseImage() {
	cv.st.openFile(imageExts, "", func(path string) { cv.attachFiles([]string{path}) })
}

// attachFiles reads and checks the image files at paths, as the engine
// will read them, off the UI goroutine, and attaches the good ones to the
// message being written; each one that is not an image it can read (not
// PNG, JPEG, GIF or WebP, damaged, over 64 MiB or 50 megapixels) is
// reported and left out.
func (cv *chatView) attachFiles(paths []string) {
	go func() {
		var good []attachment
		var bad []error
		for _, p := range paths {
			name := filepath.Base(p)
			im, img, err := chats.ImageFile(p)
			if err != nil {
				bad = append(bad, fmt.Errorf("the file %s was not attached: %w", name, err))
				continue
			}
			good = append(good, attachment{image: im, name: name, thumb: chats.Thumbnail(img, thumbPixels)})
		}
		cv.st.post(func() {
			if len(bad) > 0 {
				cv.st.showError(errors.Join(bad...))
			}
			for _, a := range good {
				cv.attach(a)
			}
		})
	}()
}

// attach adds a to the message being written, once.
func (cv *chatView) attach(a attachment) {
	cv.thumbs[a.image.Ref] = a.thumb
	if slices.ContainsFunc(cv.attached, func(b attachment) bool { return b.image.Ref == a.image.Ref }) {
		return
	}
	cv.attached = append(cv.attached, a)
	cv.showAttachments()
}

// detach removes the image ref from the message being written.
func (cv *chatView) detach(ref string) {
	cv.attached = slices.DeleteFunc(cv.attached, func(a attachment) bool { return a.image.Ref == ref })
	cv.showAttachments()
}

// showAttachments shows the message's images under the entry, each with
// its name and a button that removes it.
func (cv *chatView) showAttachments() {
	var tiles []fyne.CanvasObject
	for _, a := range cv.attached {
		remove := widget.NewButtonWithIcon("", theme.CancelIcon(), func() { cv.detach(a.image.Ref) })
		remove.Importance = widget.LowImportance
		name := widget.NewLabel(a.name)
		name.Truncation = fyne.TextTruncateEllipsis
		pic := thumbImage(a.thumb)
		corner := container.NewVBox(container.NewHBox(layout.NewSpacer(), remove))
		tiles = append(tiles, container.NewBorder(nil, name, nil, nil, container.NewStack(pic, corner)))
	}
	cv.attachRow.Objects = tiles
	cv.attachRow.Refresh()
	if len(tiles) == 0 {
		cv.attachments.Hide()
	} else {
		cv.attachments.Show()
	}
}

// thumbImage shows img (nil until it is made) in a thumbnail's box.
func thumbImage(img image.Image) *canvas.Image {
	pic := canvas.NewImageFromImage(img)
	pic.FillMode = canvas.ImageFillContain
	pic.SetMinSize(fyne.NewSize(thumbSize, thumbSize))
	return pic
}

// imageStrip is a message's images in the transcript: a thumbnail of
// each, or a note that says it is missing.
func (cv *chatView) imageStrip(ims []chats.Image) fyne.CanvasObject {
	row := container.NewHBox()
	for _, im := range ims {
		if im.Missing {
			row.Add(imageNote("Image missing", im.Ref))
			continue
		}
		pic := thumbImage(nil)
		tile := container.NewStack(pic)
		cv.thumbnail(im, func(img image.Image, err error) {
			if err != nil {
				tile.Objects = []fyne.CanvasObject{imageNote("Image cannot be shown", err.Error())}
				tile.Refresh()
				return
			}
			pic.Image = img
			pic.Refresh()
		})
		row.Add(tile)
	}
	return container.NewHScroll(row)
}

// imageNote stands in a thumbnail's place for an image that cannot be
// shown: what is wrong, and the image's name or the reason in small print.
func imageNote(text, detail string) fyne.CanvasObject {
	box := canvas.NewRectangle(color.Transparent)
	box.SetMinSize(fyne.NewSize(thumbSize, thumbSize))
	label := widget.NewLabel(text)
	label.Wrapping = fyne.TextWrapWord
	label.Importance = widget.WarningImportance
	hint := newHintLabel(detail)
	hint.Truncation = fyne.TextTruncateEllipsis
	return container.NewStack(box, container.NewBorder(label, hint, nil, nil))
}

// thumbnail calls show on the UI goroutine with im's thumbnail: at once
// when it was made before, else once it is made from the bytes im holds
// or the store's file. Each image is decoded once, however many rows wait
// for it.
func (cv *chatView) thumbnail(im chats.Image, show func(image.Image, error)) {
	if img, ok := cv.thumbs[im.Ref]; ok {
		show(img, nil)
		return
	}
	waiting, started := cv.thumbWaiting[im.Ref]
	cv.thumbWaiting[im.Ref] = append(waiting, show)
	if started {
		return
	}
	store := cv.store
	go func() {
		cv.thumbSem <- struct{}{}
		defer func() { <-cv.thumbSem }()
		data, err := im.Data, error(nil)
		if data == nil && store != nil {
			data, err = store.ImageData(im.Ref)
		}
		var img image.Image
		if err == nil {
			img, err = chats.ThumbnailOf(data, im.Ref, thumbPixels)
		}
		cv.st.post(func() {
			if err == nil {
				cv.thumbs[im.Ref] = img
			}
			shows := cv.thumbWaiting[im.Ref]
			delete(cv.thumbWaiting, im.Ref)
			for _, f := range shows {
				f(img, err)
			}
		})
	}()
}
