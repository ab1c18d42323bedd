package library

import "os"

// folderMaxDepth is how many folders below a user folder are searched: deep
// enough for models/vendor/family/quant/FILE.gguf, shallow enough that adding
// a home folder does not walk the whole disk.
const folderMaxDepth = 4

// scanFolder lists the GGUF files under a folder the user added. Each is
// named by its base name without .gguf; disambiguateFolders lengthens the
// names that collide.
func scanFolder(root string) []Entry {
	if root == "" {
		return nil
	}
	st, err := os.Stat(root)
	if err != nil {
		// A folder the user chose that is gone (an unplugged disk) is worth
		// saying, unlike a tool that is not installed.
		return []Entry{unreadable(SourceFolder, root, err)}
	}
	var entries []Entry
	if !st.IsDir() {
		// A file added as a folder is listed as itself.
		name, _ := folderName(root, 0)
		if e, ok := modelFile(root, name, SourceFolder); ok {
			entries = append(entries, e)
		}
		return entries
	}
	w := walker{
		maxDepth: folderMaxDepth,
		follow:   true,
		file: func(path, rel string) {
			name, _ := folderName(path, 0)
			if e, ok := modelFile(path, name, SourceFolder); ok {
				entries = append(entries, e)
			}
		},
		fail: func(dir string, err error) {
			entries = append(entries, unreadable(SourceFolder, dir, err))
		},
	}
	w.walk(root)
	return entries
}
