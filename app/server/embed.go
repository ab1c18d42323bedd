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
// share: the model, and no dimensions. It returns the input texts, which
// Ollama's older endpoint (input false) takes from its prompt instead.
func (s *server) readEmbed(w http.ResponseWriter, r *http.Request, a api, req embedBody, input bool) (Model, []string, error) {
	if err := decode(w, r, s.o.MaxBody, req); err != nil {
		return Model{}, nil, err
	}
	c := req.common()
	m, err := s.find(a, c.Model)
	if err != nil {
		return Model{}, nil, err
	}
	if c.Dimensions != nil {
		return Model{}, nil, unsupported("dimensions", "dimensions (the model's vectors have the width it was trained with)")
	}
	if !input {
		return m, nil, nil
	}
	inputs, err := textInputs(c.Input, "input")
	return m, inputs, err
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
