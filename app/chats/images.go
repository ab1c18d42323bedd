package chats

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/draw"

	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/vision"
	"github.com/hearthstudio/hearth/internal/atomicfile"
)

// Image is an image of a message. The store keeps it in its images folder
// as a file named by Ref: the SHA-256 of its bytes in hex and its format's
// extension ("9f86d081…b0f00a08.png"), so an image shown in many chats, or
// attached twice, is one file. A chat file holds the name alone.
type Image struct {
	Ref string
	// Data is the image's bytes while they are in memory: an image just
	// attached, until the store has written it (Save writes it before the
	// chat file that names it). An image loaded with its chat has none;
	// Store.ReadImages reads it when a reply needs it.
	Data []byte
	// Missing is set by Load when the store has no file for Ref (deleted
	// by hand, or a chat file copied without its images): the message
	// keeps its text, says the image is missing, and the model reads the
	// message without it.
	Missing bool
}

// MarshalJSON writes the image as its name: its bytes are in their own file.
func (im Image) MarshalJSON() ([]byte, error) { return json.Marshal(im.Ref) }

// UnmarshalJSON reads an image's name.
func (im *Image) UnmarshalJSON(data []byte) error {
	var ref string
	if err := json.Unmarshal(data, &ref); err != nil {
		return fmt.Errorf("an image is named by a string: %w", err)
	}
	*im = Image{Ref: ref}
	return nil
}

// imagesDir is the folder, inside the store's, that holds the images.
const imagesDir = "images"

// imageExts are the extensions of the formats the engine reads (vision.Decode),
// by the name Ref gives them; "bin" names the bytes of an image an API
// client sent in a format that no signature tells (the engine would have
// refused it, so a kept chat rarely has one).
var imageExts = []string{"png", "jpg", "gif", "webp", "bin"}

// imageExt is the extension of the format whose signature starts data,
// told apart as vision.Decode tells them; "bin" for none of them.
func imageExt(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "jpg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "webp"
	}
	return "bin"
}

// RefOf is the name the store gives the image whose bytes are data.
func RefOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) + "." + imageExt(data)
}

// validRef reports whether ref is a name RefOf gives: 64 lowercase hex
// digits and a known extension. Anything else, from a chat file edited by
// hand, could reach outside the images folder.
func validRef(ref string) bool {
	hash, ext, ok := strings.Cut(ref, ".")
	if !ok || len(hash) != 2*sha256.Size || !slices.Contains(imageExts, ext) {
		return false
	}
	for _, r := range hash {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// NewImage checks that data is an image the engine can read, as it will
// read it (vision.Decode: PNG, JPEG, GIF or WebP, within its size bounds),
// and returns it named, with its decoded pixels for a thumbnail. name (a
// file's name) is only for errors.
func NewImage(data []byte, name string) (Image, image.Image, error) {
	img, err := vision.Decode(data, name)
	if err != nil {
		return Image{}, nil, err
	}
	return Image{Ref: RefOf(data), Data: data}, img, nil
}

// ImageFile reads the image file at path, as NewImage checks bytes. A file
// over vision.MaxBytes is refused before it is read.
func ImageFile(path string) (Image, image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return Image{}, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Image{}, nil, err
	}
	switch {
	case st.IsDir():
		return Image{}, nil, fmt.Errorf("%s is a folder, not an image", path)
	case !st.Mode().IsRegular():
		return Image{}, nil, fmt.Errorf("%s is not a regular file", path)
	case st.Size() > vision.MaxBytes:
		return Image{}, nil, fmt.Errorf("%s: the file is %d bytes, more than the %d (64 MiB) an image may be: %w", path, st.Size(), vision.MaxBytes, vision.ErrTooLarge)
	}
	// One byte past the limit tells a file that grew since Stat.
	data, err := io.ReadAll(io.LimitReader(f, vision.MaxBytes+1))
	if err != nil {
		return Image{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return NewImage(data, path)
}

// Thumbnail is img scaled to fit a box of side pixels, its proportions
// kept. BiLinear widens its kernel as it shrinks, so a photo scaled down
// forty times is averaged rather than sampled into noise.
func Thumbnail(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= side && h <= side {
		return img
	}
	tw, th := side, max(1, h*side/w)
	if h > w {
		tw, th = max(1, w*side/h), side
	}
	out := image.NewRGBA(image.Rect(0, 0, tw, th))
	draw.BiLinear.Scale(out, out.Bounds(), img, b, draw.Src, nil)
	return out
}

// ThumbnailOf decodes data, an image called name, into a thumbnail of
// side pixels.
func ThumbnailOf(data []byte, name string, side int) (image.Image, error) {
	img, err := vision.Decode(data, name)
	if err != nil {
		return nil, err
	}
	return Thumbnail(img, side), nil
}

// imagePath is the file of the image ref.
func (s *Store) imagePath(ref string) (string, error) {
	if !validRef(ref) {
		return "", fmt.Errorf("chats: %q is not an image's name", ref)
	}
	return filepath.Join(s.dir, imagesDir, ref), nil
}

// ImageData reads the bytes of the image ref. An image the store lacks
// gives an error that wraps fs.ErrNotExist.
func (s *Store) ImageData(ref string) ([]byte, error) {
	path, err := s.imagePath(ref)
	if err != nil {
		// A name no image has is an image the store does not have.
		return nil, fmt.Errorf("chats: no image is named %q: %w", ref, fs.ErrNotExist)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chats: image %s: %w", ref, err)
	}
	return data, nil
}

// ReadImages returns msgs (Conversation.Chat's) with the bytes of each
// image that has none read from the store: what a reply needs. It reads
// files, so it runs off the UI goroutine. An image the store no longer has
// is left out, as Chat leaves out those Load found missing; any other
// failure is returned.
func (s *Store) ReadImages(msgs []chat.Message) ([]chat.Message, error) {
	out := slices.Clone(msgs)
	for i, m := range out {
		if len(m.Images) == 0 {
			continue
		}
		var ims []chat.Image
		for _, im := range m.Images {
			if im.Data == nil {
				data, err := s.ImageData(im.Ref)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				im.Data = data
			}
			ims = append(ims, im)
		}
		out[i].Images = ims
	}
	return out, nil
}

// saveImages writes the images of c that are in memory and not yet in the
// store. Save calls it before it writes the chat file, so a chat file
// never names an image that was not written; a crash between the two
// leaves an image no chat names, which costs only its space.
func (s *Store) saveImages(c *Conversation) error {
	made := false
	for _, m := range c.Messages {
		for _, im := range m.Images {
			if im.Data == nil {
				continue // loaded with the chat: the store has it, or it is missing
			}
			path, err := s.imagePath(im.Ref)
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); err == nil {
				continue // the same bytes, from this chat or another
			}
			if RefOf(im.Data) != im.Ref {
				return fmt.Errorf("image %s: its bytes are another image's (%s)", im.Ref, RefOf(im.Data))
			}
			if !made {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					return err
				}
				made = true
			}
			if err := atomicfile.Write(path, im.Data, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// markMissing sets Missing on each image of c the store has no file for.
func (s *Store) markMissing(c *Conversation) {
	for i := range c.Messages {
		for j := range c.Messages[i].Images {
			im := &c.Messages[i].Images[j]
			path, err := s.imagePath(im.Ref)
			if err == nil {
				_, err = os.Stat(path)
			}
			im.Missing = err != nil
		}
	}
}

// dropUnused removes the images of refs that no file left in the store's
// folder names: deleting a chat frees the images only it showed. Every
// file is searched for the name as text, chat files and the bad files
// Load set aside alike, so an image stays while anything might still
// need it, even a chat file that no longer parses.
func (s *Store) dropUnused(refs []string) error {
	if len(refs) == 0 {
		return nil
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if ent.IsDir() || len(refs) == 0 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, ent.Name()))
		if err != nil {
			return err // unreadable now: keep every image rather than guess
		}
		refs = slices.DeleteFunc(refs, func(ref string) bool { return bytes.Contains(data, []byte(ref)) })
	}
	var errs []error
	for _, ref := range refs {
		path, err := s.imagePath(ref)
		if err != nil {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// imageRefs are the names of the images a chat file names; none when the
// file is not a conversation.
func imageRefs(data []byte) []string {
	var c Conversation
	if json.Unmarshal(data, &c) != nil {
		return nil
	}
	var refs []string
	for _, m := range c.Messages {
		for _, im := range m.Images {
			if validRef(im.Ref) && !slices.Contains(refs, im.Ref) {
				refs = append(refs, im.Ref)
			}
		}
	}
	return refs
}

// imagesOf are images an API client sent, in the file's form.
func imagesOf(ims []chat.Image) []Image {
	var out []Image
	for _, im := range ims {
		if len(im.Data) > 0 {
			out = append(out, Image{Ref: RefOf(im.Data), Data: im.Data})
		}
	}
	return out
}
