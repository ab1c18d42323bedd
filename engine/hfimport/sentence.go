package hfimport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hearthstudio/hearth/safetensors"
)

// sentenceModules are the parts of a sentence-transformers folder that an
// embedding model's GGUF carries (EmbeddingGemma's, as llama.cpp's
// converter writes them with --sentence-transformers-dense-modules): how
// the tokens are pooled and the dense layers after.
type sentenceModules struct {
	pooling int           // ARCH.pooling_type: 1 mean, 2 cls, 3 last
	dense   []denseModule // dense_2, then dense_3
}

// denseModule is one sentence_transformers.models.Dense: its folder, the
// GGUF name it takes and its widths.
type denseModule struct {
	dir, name string
	in, out   int
}

// parseSentenceModules reads dir/modules.json and the configs of its
// Pooling and Dense modules. A folder without modules.json has none: mean
// pooling and no dense layers, as llama.cpp's converter assumes.
func parseSentenceModules(dir string, hidden int) (*sentenceModules, error) {
	st := &sentenceModules{pooling: 1}
	path := filepath.Join(dir, "modules.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hfimport: %w", err)
	}
	list, err := readArray(path, data)
	if err != nil {
		return nil, err
	}
	for i, mod := range list {
		typ, err := mod.str("type", "")
		if err != nil {
			return nil, err
		}
		sub, err := mod.str("path", "")
		if err != nil {
			return nil, err
		}
		if filepath.Base(sub) != sub && sub != "" {
			return nil, fmt.Errorf("hfimport: %s: module %d's path %q is not a folder of the model's", path, i, sub)
		}
		switch typ {
		case "sentence_transformers.models.Transformer", "sentence_transformers.models.Normalize":
			// The model itself; unit length, which the embeddings end with.
		case "sentence_transformers.models.Pooling":
			if st.pooling, err = poolingMode(filepath.Join(dir, sub, "config.json")); err != nil {
				return nil, err
			}
		case "sentence_transformers.models.Dense":
			d, err := denseConfig(dir, sub)
			if err != nil {
				return nil, err
			}
			st.dense = append(st.dense, d)
		default:
			return nil, fmt.Errorf("hfimport: %s: module %d is a %s, which Hearth does not run (Transformer, Pooling, Dense and Normalize are)", path, i, typ)
		}
	}
	switch len(st.dense) {
	case 0:
		return st, nil
	case 2:
	default:
		return nil, fmt.Errorf("hfimport: %s: %d Dense modules; an embedding GGUF holds none or two (dense_2, dense_3)", path, len(st.dense))
	}
	st.dense[0].name, st.dense[1].name = "dense_2", "dense_3"
	if a, b := st.dense[0], st.dense[1]; a.in != hidden || b.in != a.out || b.out != hidden {
		return nil, fmt.Errorf("hfimport: %s: the Dense modules map %d→%d and %d→%d; want the embedding's %d in and out, one's output the other's input", path, a.in, a.out, b.in, b.out, hidden)
	}
	return st, nil
}

// poolingMode is a Pooling module's mode as llama.cpp numbers it.
func poolingMode(path string) (int, error) {
	c, err := readObject(path)
	if err != nil {
		return 0, err
	}
	modes := []struct {
		key  string
		code int
	}{{"pooling_mode_mean_tokens", 1}, {"pooling_mode_cls_token", 2}, {"pooling_mode_lasttoken", 3}}
	for _, m := range modes {
		on, err := c.bool(m.key, false)
		if err != nil {
			return 0, err
		}
		if on {
			return m.code, nil
		}
	}
	return 0, fmt.Errorf("hfimport: %s: no pooling mode Hearth runs is on (mean_tokens, cls_token, lasttoken)", path)
}

// denseConfig reads dir/sub's Dense module: no bias and no activation,
// as EmbeddingGemma's; its weights in dir/sub/model.safetensors.
func denseConfig(dir, sub string) (denseModule, error) {
	path := filepath.Join(dir, sub, "config.json")
	c, err := readObject(path)
	if err != nil {
		return denseModule{}, err
	}
	d := denseModule{dir: sub}
	if d.in, err = c.int("in_features", 0); err != nil {
		return d, err
	}
	if d.out, err = c.int("out_features", 0); err != nil {
		return d, err
	}
	if d.in <= 0 || d.out <= 0 {
		return d, fmt.Errorf("hfimport: %s: in_features %d and out_features %d must be positive", path, d.in, d.out)
	}
	if bias, err := c.bool("bias", true); err != nil || bias {
		return d, fmt.Errorf("hfimport: %s: a Dense layer with a bias is not supported (EmbeddingGemma's have none)", path)
	}
	if act, _ := c.str("activation_function", ""); act != "" && act != "torch.nn.modules.linear.Identity" {
		return d, fmt.Errorf("hfimport: %s: activation %q is not supported (Identity is)", path, act)
	}
	return d, nil
}

// addDense opens the dense layers' weights into w, named
// "FOLDER/linear.weight".
func (w *weights) addDense(dir string, st *sentenceModules) error {
	for _, d := range st.dense {
		f, err := safetensors.Open(filepath.Join(dir, d.dir, "model.safetensors"))
		if err != nil {
			return fmt.Errorf("hfimport: the %s layer: %w", d.dir, err)
		}
		w.files = append(w.files, f)
		for _, t := range f.Tensors {
			w.tensors[d.dir+"/"+t.Name] = t
		}
	}
	return nil
}
