// Package visiontest makes what the image-input tests of several packages
// share: a tiny vision model laid out as a user's download is, and small
// PNGs.
package visiontest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"path/filepath"

	"github.com/hearthstudio/hearth/engine/synth"
)

// Model is the tiny vision model's file name in its folder.
const Model = "tiny-gemma3.gguf"

// Projector is its projector's file name: mmproj-*.gguf beside the model,
// which the library pairs with it.
const Projector = "mmproj-tiny-gemma3-f16.gguf"

// Write writes tiny-gemma3 (F32) and its projector (synth's
// tiny-gemma3-vision) into dir and returns their paths.
func Write(dir string) (model, projector string, err error) {
	model, projector = filepath.Join(dir, Model), filepath.Join(dir, Projector)
	p, _ := synth.PresetByName("tiny-gemma3")
	if err := synth.WriteFile(model, p, synth.Options{Quant: "F32", Seed: 5}); err != nil {
		return "", "", err
	}
	pp, _ := synth.ProjectorPresetByName("tiny-gemma3-vision")
	return model, projector, synth.WriteProjector(projector, pp, 5)
}

// PNG is a w×h PNG whose colours follow (x, y) and seed, so that two seeds
// give two different images.
func PNG(w, h, seed int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x*255/w + seed), uint8(y*255/h + 3*seed), uint8((x*y + seed*40) % 256), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // an in-memory PNG of an RGBA image cannot fail
	}
	return b.Bytes()
}
