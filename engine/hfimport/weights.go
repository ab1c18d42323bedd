package hfimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hearthstudio/hearth/safetensors"
)

// weights is every tensor of a model's safetensors files by name.
type weights struct {
	files   []*safetensors.File
	tensors map[string]*safetensors.Tensor
}

func (w *weights) Close() error {
	var first error
	for _, f := range w.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// openWeights opens dir/model.safetensors, or the shards that
// dir/model.safetensors.index.json lists, and checks that every tensor the
// index names is in the shard it names and that no name is in two files.
func openWeights(dir string) (*weights, error) {
	w := &weights{tensors: map[string]*safetensors.Tensor{}}
	add := func(path string) (*safetensors.File, error) {
		st, err := safetensors.Open(path)
		if err != nil {
			return nil, err
		}
		w.files = append(w.files, st)
		for _, t := range st.Tensors {
			if prev, dup := w.tensors[t.Name]; dup {
				return nil, fmt.Errorf("hfimport: tensor %q is in both %s and %s", t.Name, prev.File(), path)
			}
			w.tensors[t.Name] = t
		}
		return st, nil
	}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	single := filepath.Join(dir, "model.safetensors")
	data, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		var index struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &index); err != nil {
			return nil, fmt.Errorf("hfimport: %s: %w", indexPath, err)
		}
		if len(index.WeightMap) == 0 {
			return nil, fmt.Errorf("hfimport: %s: weight_map is empty", indexPath)
		}
		var shards []string
		for _, file := range index.WeightMap {
			if filepath.Base(file) != file {
				return nil, fmt.Errorf("hfimport: %s: shard %q is not a file name in the folder", indexPath, file)
			}
			shards = append(shards, file)
		}
		slices.Sort(shards)
		opened := map[string]*safetensors.File{}
		for _, file := range slices.Compact(shards) {
			st, err := add(filepath.Join(dir, file))
			if err != nil {
				w.Close()
				return nil, err
			}
			opened[file] = st
		}
		for name, file := range index.WeightMap {
			t, ok := w.tensors[name]
			if !ok || t.File() != opened[file].Path() {
				w.Close()
				return nil, fmt.Errorf("hfimport: %s: tensor %q is not in %s", indexPath, name, file)
			}
		}
	case errors.Is(err, os.ErrNotExist):
		if _, err := add(single); err != nil {
			w.Close()
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("hfimport: %s has neither model.safetensors nor model.safetensors.index.json", dir)
			}
			return nil, err
		}
	default:
		return nil, fmt.Errorf("hfimport: %w", err)
	}
	return w, nil
}
