package chats

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hearthstudio/hearth/internal/atomicfile"
)

// Store is a folder of conversations, one ID.json file each, and of their
// images, in images/ (Image).
type Store struct {
	dir string
}

// Open returns the store in dir, creating the folder.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chats: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's folder.
func (s *Store) Dir() string { return s.dir }

// BadFileError reports a conversation file that could not be loaded.
type BadFileError struct {
	Path string
	// Moved is where the file was set aside so that it is reported once
	// and kept for the user; "" when it stayed where it was (it could not
	// be read at all, or the rename failed).
	Moved string
	Err   error
}

func (e *BadFileError) Error() string {
	if e.Moved != "" {
		return fmt.Sprintf("chats: %s could not be loaded (%v); it was kept as %s", e.Path, e.Err, filepath.Base(e.Moved))
	}
	return fmt.Sprintf("chats: %s could not be loaded: %v", e.Path, e.Err)
}

func (e *BadFileError) Unwrap() error { return e.Err }

// badSuffix marks a file set aside by Load; Load skips such files.
const badSuffix = ".bad"

// Load reads every conversation, newest change first. A file that cannot
// be read or parsed is skipped and reported in bad, each a *BadFileError;
// one that cannot be parsed is renamed to NAME.json.bad, never deleted. err
// is set only when the folder itself cannot be read.
func (s *Store) Load() (convs []*Conversation, bad []error, err error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("chats: %w", err)
	}
	for _, ent := range ents {
		name := ent.Name()
		// Dot files are atomicfile's temporary files, left by a crash in
		// the middle of a write; the file they were replacing is intact.
		if ent.IsDir() || strings.HasPrefix(name, ".") || filepath.Ext(name) != ".json" {
			continue
		}
		path := filepath.Join(s.dir, name)
		c, err := readConversation(path)
		if err == nil {
			s.markMissing(c)
			convs = append(convs, c)
			continue
		}
		bf := &BadFileError{Path: path, Err: err}
		var pe *parseError
		if errors.As(err, &pe) {
			if moved, err := setAside(path); err == nil {
				bf.Moved = moved
			}
		}
		bad = append(bad, bf)
	}
	slices.SortFunc(convs, func(a, b *Conversation) int {
		return cmp.Or(b.Updated.Compare(a.Updated), strings.Compare(b.ID, a.ID))
	})
	return convs, bad, nil
}

// parseError is a file that was read but is not a conversation: the only
// kind Load renames, since a file it could not read may be fine tomorrow.
type parseError struct{ err error }

func (e *parseError) Error() string { return e.err.Error() }
func (e *parseError) Unwrap() error { return e.err }

func readConversation(path string) (*Conversation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Conversation
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return nil, &parseError{err}
	}
	if dec.More() {
		return nil, &parseError{errors.New("text after the conversation")}
	}
	for i, m := range c.Messages {
		if !slices.Contains(roles, m.Role) {
			return nil, &parseError{fmt.Errorf("message %d: role %q, want one of %q", i, m.Role, roles)}
		}
	}
	// The file's name is what Save and Delete use, whatever the ID inside
	// says (a file copied under another name must not overwrite the
	// original when it is saved).
	c.ID = strings.TrimSuffix(filepath.Base(path), ".json")
	if c.Created.IsZero() {
		c.Created = c.Updated
	}
	return &c, nil
}

// setAside renames path to path.bad, or path.N.bad when that is taken, so
// an earlier bad file is never overwritten.
func setAside(path string) (string, error) {
	to := path + badSuffix
	for n := 2; ; n++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = path + "." + strconv.Itoa(n) + badSuffix
	}
	return to, os.Rename(path, to)
}

func (s *Store) path(id string) (string, error) {
	if !validID(id) {
		return "", fmt.Errorf("chats: %q is not a conversation ID", id)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// Save writes c atomically: after a crash or a failed write (a full disk)
// the file holds either the previous state or this one. The images it
// holds in memory are written first, each once (Image).
func (s *Store) Save(c *Conversation) error {
	path, err := s.path(c.ID)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("chats: %s: %w", c.ID, err)
	}
	if err := s.saveImages(c); err != nil {
		return fmt.Errorf("chats: saving %q: %w", c.Title, err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("chats: saving %q: %w", c.Title, err)
	}
	return nil
}

// Delete removes the conversation's file, and the images no other file
// of the store names (dropUnused). Deleting one that was never saved is
// not an error.
func (s *Store) Delete(id string) error {
	path, err := s.path(id)
	if err != nil {
		return err
	}
	// A file that cannot be read names no images to drop: they stay.
	data, _ := os.ReadFile(path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("chats: %w", err)
	}
	if err := s.dropUnused(imageRefs(data)); err != nil {
		return fmt.Errorf("chats: the images of a deleted chat: %w", err)
	}
	return nil
}
