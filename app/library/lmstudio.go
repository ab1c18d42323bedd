package library

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// scanLMStudio lists the models of an LM Studio models folder:
// PUBLISHER/REPO/FILE.gguf, exactly two folders deep. Links are followed,
// since moving a publisher's folder to another disk and linking it back is
// how LM Studio users free space.
func scanLMStudio(root string) []Entry {
	if root == "" {
		return nil
	}
	if _, err := os.Stat(root); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return []Entry{unreadable(SourceLMStudio, root, err)}
	}
	var entries []Entry
	w := walker{
		maxDepth: 2,
		follow:   true,
		file: func(path, rel string) {
			if strings.Count(rel, "/") != 2 {
				return
			}
			if e, ok := modelFile(path, rel, SourceLMStudio); ok {
				entries = append(entries, e)
			}
		},
		fail: func(dir string, err error) {
			entries = append(entries, unreadable(SourceLMStudio, dir, err))
		},
	}
	w.walk(root)
	return entries
}
