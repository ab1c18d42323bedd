package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// bodyTimeout is how long a request body may take to arrive: a request
// with a 5 MB photo in 30 s is 220 KiB/s, slower than any real link to this
// server (DefaultMaxBody's 64 MiB takes 2.2 MB/s), while a client trickling
// its body cannot hold a handler for long.
const bodyTimeout = 30 * time.Second

// decode reads the request's JSON body into v, at most limit bytes. Fields v
// does not have are ignored, as OpenAI's and Ollama's servers ignore them:
// clients send many (user, metadata, store).
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	rc := http.NewResponseController(w)
	// Not every ResponseWriter supports deadlines (httptest's recorder);
	// the size bound still holds there.
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	defer rc.SetReadDeadline(time.Time{})
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return decodeError(err)
		}
		return badRequest("", "the request body has more after its JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig), errors.Is(err, os.ErrDeadlineExceeded):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("", "the request body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body is not valid JSON: it ends too soon")
	case errors.As(err, &syn):
		return badRequest("", "the request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("", "the request body must be a JSON object, not %s", typ.Value)
		}
		field := jsonPath(typ.Field)
		return badRequest(field, "%s must be %s, not %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	}
	return badRequest("", "the request body is not valid: %v", err)
}

// jsonPath is a field path as the client wrote it: encoding/json names the
// Go structs the request types embed (openAIRequest.max_tokens), which are
// not in the JSON.
func jsonPath(field string) string {
	var out []string
	for _, part := range strings.Split(field, ".") {
		switch part {
		case "openAIRequest", "samplingParams", "ollamaRequest":
		default:
			out = append(out, part)
		}
	}
	return strings.Join(out, ".")
}

// jsonKind names a Go kind as JSON does, for errors.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return kind
}
