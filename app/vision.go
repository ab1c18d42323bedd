package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/tokenizer"
	"github.com/hearthstudio/hearth/engine/vision"
)

// ErrNoProjector is the error of a chat with images on a model that has no
// vision projector.
var ErrNoProjector = errors.New("the model has no vision projector (mmproj) to read images with")

// Vision reads a model's images: its projector's tower, on the GPU when
// the model's runner is there, else the reference encoder on the CPU.
type Vision struct {
	tower *vision.Tower
	gpu   *vision.GPUTower // nil: the CPU
}

// OpenVision opens the projector file path for m, which r runs, checking
// that it fits m. imageTokens, when not 0, is the most tokens an image
// becomes (Gemma 4's budget, vision.Tower.SetBudget). Close it before r.
func OpenVision(path string, m *model.Model, r model.Runner, imageTokens int) (*Vision, error) {
	t, err := vision.Open(path)
	if err != nil {
		return nil, err
	}
	if imageTokens != 0 {
		if err := t.SetBudget(imageTokens); err != nil {
			t.Close()
			return nil, err
		}
	}
	c := &m.Config
	arch := vision.ProjectorArch(t.Config.Projector)
	switch {
	case arch != c.Arch:
		t.Close()
		return nil, fmt.Errorf("%s: %s is a %s model: only %s models read images through a %s projector", path, m.Path, c.Arch, arch, t.Config.Projector)
	case t.Config.TextHidden != c.Hidden:
		t.Close()
		return nil, fmt.Errorf("%s: the projector's tokens are %d wide, and %s takes %d (another %s model's projector?)", path, t.Config.TextHidden, m.Path, c.Hidden, arch)
	}
	v := &Vision{tower: t}
	if g, ok := r.(*model.GPU); ok {
		if v.gpu, err = vision.NewGPUTower(g.Device(), t); err != nil {
			t.Close()
			return nil, err
		}
	}
	return v, nil
}

// NoProjector is ErrNoProjector for m, called name, with what else to do
// (how to name a projector). It says so when m's own file holds a vision
// tower, as the models Ollama converts itself do (<arch>.vision.* keys and
// v.* tensors in the one blob), a layout Hearth does not read.
func NoProjector(m *model.Model, name, other string) error {
	if n, err := m.File.IntOr(m.Config.Arch+".vision.block_count", 0); err == nil && n > 0 {
		return fmt.Errorf("%s: %w: its file holds its vision tower in Ollama's own layout (%s.vision.*), which Hearth does not read; a llama.cpp GGUF of the model with its mmproj-*.gguf reads images", name, ErrNoProjector, m.Config.Arch)
	}
	return fmt.Errorf("%s: %w (put its mmproj-*.gguf beside it, or %s)", name, ErrNoProjector, other)
}

// Path is the projector's file.
func (v *Vision) Path() string { return v.tower.Path }

// Close releases the tower.
func (v *Vision) Close() {
	if v.gpu != nil {
		v.gpu.Release()
	}
	v.tower.Close()
}

// encode runs an image's pixels of grid g through the tower.
func (v *Vision) encode(pixels []float32, g vision.Grid) ([]float32, error) {
	if v.gpu != nil {
		return v.gpu.Encode(pixels, g)
	}
	return v.tower.EncodeCPU(pixels, g)
}

// vision returns r's vision tower for the projector file path ("": the
// one EngineOptions.Projector pairs with the model), opening it on first
// use.
func (e *Engine) vision(r *resident, path string) (*Vision, error) {
	if path == "" && e.o.Projector != nil {
		var err error
		if path, err = e.o.Projector(r.info.Name, r.info.Path); err != nil {
			return nil, err
		}
	}
	if path == "" {
		return nil, NoProjector(r.m, r.info.Name, "name one")
	}
	if r.vision != nil && r.vision.Path() == path {
		return r.vision, nil
	}
	if r.vision != nil {
		r.vision.Close()
		r.vision = nil
	}
	v, err := OpenVision(path, r.m, r.runner, e.o.ImageTokens)
	if err != nil {
		return nil, err
	}
	r.vision = v
	return v, nil
}

// ImagePrompt is a rendered chat with its images in place: the prompt's
// tokens and each image's span (Images: its key set, its rows encoded by
// Vision.Encode) and file, in prompt order.
type ImagePrompt struct {
	Tokens []int32
	Images []model.Image
	files  []chat.Image
	grids  []vision.Grid // each image's patch grid
}

// WithImageMarkers returns msgs with every image's marker in its content
// (where the client put one, or before the text), for the template to
// render, and the images in the order their markers stand (Splice's files).
func WithImageMarkers(msgs []chat.Message) ([]chat.Message, []chat.Image, error) {
	out := make([]chat.Message, len(msgs))
	var files []chat.Image
	for i, m := range msgs {
		out[i] = m
		if len(m.Images) == 0 {
			continue
		}
		switch k := strings.Count(m.Content, chat.ImageMarker); k {
		case 0:
			out[i].Content = strings.Repeat(chat.ImageMarker, len(m.Images)) + m.Content
		case len(m.Images):
		default:
			return nil, nil, fmt.Errorf("app: message %d has %d images but %d image markers in its text", i+1, len(m.Images), k)
		}
		files = append(files, m.Images...)
	}
	return out, files, nil
}

// imageFrame is the text around an image's tokens and the token its
// positions hold.
type imageFrame struct {
	open, close string
	place       int32
}

// frame is how m's processor frames an image. Gemma 3's:
// "\n\n<start_of_image>", the image's tokens, "<end_of_image>\n\n"
// (transformers' Gemma3Processor; llama.cpp's mtmd leaves out the blank
// lines), the positions holding <image_soft_token> (or <start_of_image>
// where the vocabulary has none), which only the cache's bookkeeping reads.
// Gemma 4's: "<|image>", as many <|image|> as the image has tokens,
// "<image|>" (Gemma4Processor and mtmd alike).
func (v *Vision) frame(m *model.Model) (imageFrame, error) {
	tok := m.Tokenizer
	need := func(s string) (int32, error) {
		id, ok := tok.ID(s)
		if !ok {
			return 0, fmt.Errorf("app: %s's vocabulary has no %s token to frame an image with", m.Config.Arch, s)
		}
		return id, nil
	}
	if v.tower.Config.Projector == "gemma4v" {
		f := imageFrame{open: "<|image>", close: "<image|>"}
		for _, s := range []string{f.open, f.close} {
			if _, err := need(s); err != nil {
				return f, err
			}
		}
		var err error
		f.place, err = need("<|image|>")
		return f, err
	}
	f := imageFrame{open: "\n\n<start_of_image>", close: "<end_of_image>\n\n"}
	place, ok := tok.ID("<image_soft_token>")
	if !ok {
		var err error
		if place, err = need("<start_of_image>"); err != nil {
			return f, err
		}
	}
	f.place = place
	return f, nil
}

// Splice tokenizes a rendered prompt whose images (files, in order) stand
// as chat.ImageMarker, putting in each one's place the text and tokens the
// model's processor does (frame), as many tokens as the tower makes of the
// image's size. A file that is not an image, or too large, is refused
// here, from its header, before anything is encoded.
func (v *Vision) Splice(m *model.Model, text string, files []chat.Image) (ImagePrompt, error) {
	t := v.tower
	pieces := strings.Split(text, chat.ImageMarker)
	if len(pieces)-1 != len(files) {
		return ImagePrompt{}, fmt.Errorf("app: the prompt holds %d image markers for %d images (a chat template that drops or repeats a message's content, or %s written in the text)", len(pieces)-1, len(files), chat.ImageMarker)
	}
	f, err := v.frame(m)
	if err != nil {
		return ImagePrompt{}, err
	}
	tok := m.Tokenizer
	key := func(f chat.Image) string {
		sum := sha256.Sum256(f.Data)
		return hex.EncodeToString(sum[:]) + "@" + t.Path
	}
	var p ImagePrompt
	for i, file := range files {
		w, h, err := vision.DecodeSize(file.Data, imageName(file, i))
		if err != nil {
			return ImagePrompt{}, err
		}
		g, err := t.Config.GridFor(w, h)
		if err != nil {
			return ImagePrompt{}, fmt.Errorf("%s: %w", imageName(file, i), err)
		}
		p.grids = append(p.grids, g)
	}
	for i, piece := range pieces {
		if i > 0 {
			piece = f.close + piece
		}
		if i < len(files) {
			piece += f.open
		}
		if i == 0 {
			p.Tokens = m.Chat.Tokenize(piece)
		} else {
			p.Tokens = append(p.Tokens, tok.Encode(piece, tokenizer.EncodeOptions{ParseSpecial: true})...)
		}
		if i < len(files) {
			n := t.Config.TokensFor(p.grids[i])
			p.Images = append(p.Images, model.Image{Pos: len(p.Tokens), Len: n, Key: key(files[i])})
			for range n {
				p.Tokens = append(p.Tokens, f.place)
			}
		}
	}
	p.files = files
	return p, nil
}

// Fits says whether p fits a context of n positions with room for a
// reply, as a generation will check (a prompt with images is never
// shifted); call it before Encode, so that no image is read for a prompt
// that is then refused.
func (p ImagePrompt) Fits(n int) error {
	if len(p.Tokens) >= n {
		return fmt.Errorf("%w: %d tokens with %d images, context %d (each image takes its tokens; choose a bigger context or fewer images)", model.ErrContextFull, len(p.Tokens), len(p.Images), n)
	}
	return nil
}

// Encode encodes the images of p from position from on (those before it
// the session's cache holds: Session.Reuse), setting their rows: each
// decoded, preprocessed as the tower wants and run through it. It stops
// with ctx's error between images.
func (v *Vision) Encode(ctx context.Context, p ImagePrompt, from int) error {
	c := v.tower.Config
	for i := range p.Images {
		s := &p.Images[i]
		if s.Pos+s.Len <= from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := imageName(p.files[i], i)
		img, err := vision.Decode(p.files[i].Data, name)
		if err != nil {
			return err
		}
		g := p.grids[i]
		px, err := c.PreprocessFor(g).Pixels(img)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if s.Embeds, err = v.encode(px, g); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// imageName names image i of a prompt in errors: its file, or its place.
func imageName(f chat.Image, i int) string {
	if f.Ref != "" {
		return f.Ref
	}
	return fmt.Sprintf("image %d", i+1)
}
