package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/hearthstudio/hearth/app"
)

// textInputs reads an embedding request's input: a string or a list of
// strings. Token-id arrays, which OpenAI also takes, are refused.
func textInputs(raw json.RawMessage, param string) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	var ids []json.RawMessage
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return nil, unsupported(param, param+" as token ids (send the text)")
	}
	return nil, badRequest(param, "%s must be a string or a non-empty list of strings", param)
}

// embedCommon are the fields the embedding endpoints share.
type embedCommon struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions *int            `json:"dimensions"`
}

func (c *embedCommon) common() *embedCommon { return c }

type embedBody interface{ common() *embedCommon }

// readEmbed decodes an embedding request and checks what the endpoints
// share: the model, and dimensions, which only the endpoints of unit
// vectors take. It returns the input texts, which Ollama's older endpoint
// (input false) takes from its prompt instead.
func (s *server) readEmbed(w http.ResponseWriter, r *http.Request, a api, req embedBody, input bool) (Model, []string, error) {
	if err := decode(w, r, s.o.MaxBody, req); err != nil {
		return Model{}, nil, err
	}
	c := req.common()
	m, err := s.find(a, c.Model)
	if err != nil {
		return Model{}, nil, err
	}
	if !input {
		// Ollama's older endpoint has no dimensions, and its vectors are
		// not unit length, which shortening keeps them.
		if c.Dimensions != nil {
			return Model{}, nil, unsupported("dimensions", "dimensions on /api/embeddings (use /api/embed)")
		}
		return m, nil, nil
	}
	if c.Dimensions != nil && *c.Dimensions < 1 {
		return Model{}, nil, badRequest("dimensions", "dimensions %d must be at least 1", *c.Dimensions)
	}
	inputs, err := textInputs(c.Input, "input")
	return m, inputs, err
}

// shorten cuts each unit vector to its first dims values and scales it back
// to unit length, as Ollama does for dimensions (and as OpenAI's
// text-embedding-3 models, trained for it, are shortened): the leading
// values of a Matryoshka-trained model keep its meaning, any other model's
// lose some. A width at or past the vector's leaves it whole, as Ollama
// does; nil dims leaves every vector.
func shorten(vectors [][]float32, dims *int) {
	if dims == nil {
		return
	}
	for i, v := range vectors {
		if *dims >= len(v) {
			continue
		}
		v = v[:*dims]
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if ss > 0 {
			inv := 1 / math.Sqrt(ss)
			for j, x := range v {
				v[j] = float32(float64(x) * inv)
			}
		}
		vectors[i] = v
	}
}

type embeddingsRequest struct {
	embedCommon
	EncodingFormat string `json:"encoding_format"`
	User           string `json:"user"`
}

type embeddingData struct {
	Object    string `json:"object"` // "embedding"
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or base64 of little-endian float32s
}

// embeddings is OpenAI's /v1/embeddings.
func (s *server) embeddings(w http.ResponseWriter, r *http.Request) error {
	var req embeddingsRequest
	m, inputs, err := s.readEmbed(w, r, openAIAPI, &req, true)
	if err != nil {
		return err
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return badRequest("encoding_format", "encoding_format %q: want float or base64", req.EncodingFormat)
	}
	reply, err := s.engine.Embed(r.Context(), app.EmbedRequest{Model: m.Name, Inputs: inputs, Adapters: s.o.Adapters})
	s.touch()
	if err != nil {
		return err
	}
	shorten(reply.Vectors, req.Dimensions)
	data := make([]embeddingData, len(reply.Vectors))
	for i, v := range reply.Vectors {
		data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.Name,
		"usage": map[string]int{"prompt_tokens": reply.Tokens, "total_tokens": reply.Tokens}})
}

type ollamaEmbedRequest struct {
	embedCommon
	Prompt   *string `json:"prompt"` // /api/embeddings
	Truncate *bool   `json:"truncate"`
}

// ollamaEmbed is Ollama's /api/embed: unit vectors, inputs longer than the
// context cut unless truncate is false.
func (s *server) ollamaEmbed(w http.ResponseWriter, r *http.Request) error {
	var req ollamaEmbedRequest
	m, inputs, err := s.readEmbed(w, r, ollamaAPI, &req, true)
	if err != nil {
		return err
	}
	start := time.Now()
	reply, err := s.engine.Embed(r.Context(), app.EmbedRequest{Model: m.Name, Inputs: inputs, Truncate: req.Truncate == nil || *req.Truncate,
		Adapters: s.o.Adapters})
	s.touch()
	if err != nil {
		return err
	}
	shorten(reply.Vectors, req.Dimensions)
	return writeJSON(w, http.StatusOK, map[string]any{"model": m.Name, "embeddings": reply.Vectors,
		"total_duration": time.Since(start).Nanoseconds(), "prompt_eval_count": reply.Tokens})
}

// ollamaEmbeddings is Ollama's older /api/embeddings: one prompt, its
// vector as pooled (not scaled to unit length, as Ollama returns it).
func (s *server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) error {
	var req ollamaEmbedRequest
	m, _, err := s.readEmbed(w, r, ollamaAPI, &req, false)
	if err != nil {
		return err
	}
	if req.Prompt == nil || *req.Prompt == "" {
		return badRequest("prompt", "prompt is required")
	}
	reply, err := s.engine.Embed(r.Context(), app.EmbedRequest{Model: m.Name, Inputs: []string{*req.Prompt}, Truncate: true,
		Adapters: s.o.Adapters, Unnormalized: true})
	s.touch()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"embedding": reply.Vectors[0]})
}
