package server

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"net/http"
	"strings"

	// The formats vision.Decode reads, for image.DecodeConfig.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/vision"
)

// Images reach the API inside the JSON body, base64-encoded: OpenAI's
// clients put each in a data URL (a content part of type image_url),
// Ollama's send the bare base64 (a message's images, /api/generate's
// images). Hearth fetches nothing: an image given as a remote URL is
// refused, never downloaded, so no request can make the server reach the
// network or a file.

// imageTypes are the media types a data URL may name: the formats
// vision.Decode reads, Ollama's "image/jpg", and "" (data:;base64,), which
// Ollama's OpenAI layer takes for an image as /api/chat takes bare base64.
// The bytes decide the format either way.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/jpg": true, "image/gif": true, "image/webp": true, "": true}

// imageFormats are the names image.DecodeConfig gives the formats
// vision.Decode reads; another format linked into the binary is refused.
var imageFormats = map[string]bool{"png": true, "jpeg": true, "gif": true, "webp": true}

// badImage is a 400 about the image at param.
func badImage(param, code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, code: code, msg: fmt.Sprintf(format, args...)}
}

// dataURLImage reads the image of a data URL (data:image/png;base64,…)
// given at param.
func dataURLImage(param, url string) (chat.Image, error) {
	lower := strings.ToLower(url[:min(len(url), 8)])
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return chat.Image{}, badImage(param, "invalid_image_url",
			"%s is a remote URL: Hearth fetches nothing from the network; send the image itself in a data URL (data:image/png;base64,…)", param)
	case !strings.HasPrefix(lower, "data:"):
		return chat.Image{}, badImage(param, "invalid_image_url", "%s must be a data URL (data:image/png;base64,…), not %q", param, abbreviate(url))
	}
	meta, data, ok := strings.Cut(url[len("data:"):], ",")
	if !ok {
		return chat.Image{}, badImage(param, "invalid_image_url", "%s is not a data URL: it has no comma before its data", param)
	}
	// RFC 2397: data:[<mediatype>][;param=value]*[;base64],<data>
	fields := strings.Split(meta, ";")
	typ := strings.ToLower(strings.TrimSpace(fields[0]))
	if !imageTypes[typ] {
		return chat.Image{}, badImage(param, "invalid_image_format", "%s is a data URL of type %q: want image/png, image/jpeg, image/gif or image/webp", param, typ)
	}
	if len(fields) < 2 || !strings.EqualFold(strings.TrimSpace(fields[len(fields)-1]), "base64") {
		return chat.Image{}, badImage(param, "invalid_image_url", "%s must be a base64 data URL (data:%s;base64,…)", param, typ)
	}
	return base64Image(param, data)
}

// abbreviate is the start of s, for an error that quotes it.
func abbreviate(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:40] + "…"
}

// base64Image decodes the base64 image given at param and checks that it
// is one the vision encoder reads.
func base64Image(param, b64 string) (chat.Image, error) {
	// Clients pad (Python's base64, JavaScript's btoa) or not, and some
	// break lines at 76 characters as MIME does; the decoder skips the
	// line breaks.
	data, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(b64), "="))
	if err != nil {
		return chat.Image{}, badImage(param, "invalid_image", "%s is not valid base64: %v", param, err)
	}
	if err := checkImage(data); err != nil {
		return chat.Image{}, badImage(param, "invalid_image", "%s: %v", param, err)
	}
	return chat.Image{Data: data}, nil
}

// checkImage reads an image's header, so that a file the vision encoder
// cannot read is refused before the request waits for the model: its
// format and the size vision.Decode allows. Its pixels are decoded once,
// by the engine, one image at a time on its goroutine; the handlers run
// unbounded, and a 50-megapixel image takes 200 MB as RGBA.
func checkImage(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("the image is empty")
	}
	if len(data) > vision.MaxBytes {
		return fmt.Errorf("the image is %d bytes, more than the %d (64 MiB) an image may be", len(data), vision.MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	switch {
	case errors.Is(err, image.ErrFormat) || err == nil && !imageFormats[format]:
		return fmt.Errorf("not a PNG, JPEG, GIF or WebP image (it starts with %q)", data[:min(len(data), 8)])
	case err != nil:
		return fmt.Errorf("not a valid %s image: %v", strings.ToUpper(format), err)
	case cfg.Width <= 0 || cfg.Height <= 0:
		return fmt.Errorf("the image is %dx%d: it has no pixels", cfg.Width, cfg.Height)
	case int64(cfg.Width)*int64(cfg.Height) > vision.MaxPixels:
		return fmt.Errorf("the image is %dx%d (%d pixels), more than the %d an image may have", cfg.Width, cfg.Height, int64(cfg.Width)*int64(cfg.Height), vision.MaxPixels)
	}
	return nil
}

// imageCount is the number of images in msgs.
func imageCount(msgs []chat.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
}

// placeImages checks where a conversation's images stand, and keeps their
// markers only where they say more than the engine's default. Converting a
// request puts chat.ImageMarker in a message's Content where each of its
// images stands; any other marker is the client's text, which would be
// taken for an image, and is refused in a conversation with images. A
// message whose images all stand before its text loses their markers: the
// engine puts images without markers there (chat.Message.Images), and the
// conversation recorded (Options.Record) keeps the text as it was written.
// param names message i as the client wrote it ("messages[2].content").
func placeImages(msgs []chat.Message, param func(i int) string) error {
	if imageCount(msgs) == 0 {
		return nil
	}
	for i := range msgs {
		m := &msgs[i]
		if strings.Count(m.Content, chat.ImageMarker) != len(m.Images) {
			return badRequest(param(i), "%s holds the text %s, which marks an image in Hearth's prompts; remove it from the text of a conversation with images", param(i), chat.ImageMarker)
		}
		if rest, ok := strings.CutPrefix(m.Content, strings.Repeat(chat.ImageMarker, len(m.Images))); ok && len(m.Images) > 0 {
			m.Content = rest
		}
	}
	return nil
}

// checkVision refuses images for a model that reads none, before the
// request waits for the model.
func checkVision(m Model, msgs []chat.Message) error {
	if imageCount(msgs) == 0 || m.Vision {
		return nil
	}
	return &apiError{status: http.StatusBadRequest, param: "model", code: "vision_not_supported",
		msg: fmt.Sprintf("%s reads no images: Hearth found no vision projector (mmproj file) for it; send text alone, or name a model that sees images", m.Name)}
}
