package library

import (
	"os"
	"path/filepath"
)

// folderMaxDepth is how many folders below a user folder are searched: deep
// enough for models/vendor/family/quant/FILE.gguf, shallow enough that adding
// a home folder does not walk the whole disk.
const folderMaxDepth = 4

// scanFolder lists the GGUF files and PEFT adapter folders under a folder
// the user added. Each is named by its base name without .gguf;
// disambiguateFolders lengthens the names that collide.
func scanFolder(root string) []Entry { return scanFolderAs(root, SourceFolder) }

// scanHearth lists one of Hearth's own folders. Unlike a user's folder, it
// is missing until the studio or training first writes into it, which is
// not worth a report.
func scanHearth(root string) []Entry {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	return scanFolderAs(root, SourceHearth)
}

func scanFolderAs(root, source string) []Entry {
	if root == "" {
		return nil
	}
	st, err := os.Stat(root)
	if err != nil {
		// A folder the user chose that is gone (an unplugged disk) is worth
		// saying, unlike a tool that is not installed.
		return []Entry{unreadable(source, root, err)}
	}
	var entries []Entry
	if !st.IsDir() {
		// A file added as a folder is listed as itself.
		name, _ := folderName(root, 0)
		if e, ok := modelFile(root, name, source); ok {
			entries = append(entries, e)
		}
		return entries
	}

	w := walker{
		maxDepth: folderMaxDepth,
		follow:   true,
		file: func(path, rel string) {
			if filepath.Base(path) == peftConfig {
				// A PEFT adapter is a folder; its config marks it.
				dir := filepath.Dir(path)
				entries = append(entries, peftEntry(dir, filepath.Base(dir), source))
				return
			}
			name, _ := folderName(path, 0)
			if e, ok := modelFile(path, name, source); ok {
				entries = append(entries, e)
			}
		},
		fail: func(dir string, err error) {
			entries = append(entries, unreadable(source, dir, err))
		},
	}
	w.walk(root)
	return entries
}
