package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/model"
	"github.com/hearthstudio/hearth/engine/vision"
)

// apiError is an error with the status and, for OpenAI's format, the
// parameter and code it concerns.
type apiError struct {
	status int
	msg    string
	param  string // the request field at fault, "" for none
	code   string // OpenAI's machine-readable code, "" for none
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 about param.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

// unsupported is a 400 for a feature Hearth does not have yet, so a client
// learns at once instead of getting output that ignored its request.
func unsupported(param, what string) *apiError {
	return &apiError{status: http.StatusBadRequest, param: param, code: "unsupported_parameter", msg: what + " is not supported yet"}
}

// retryAfter is the Retry-After of a 429, in seconds. The queue frees a
// slot when a job ends, which no one can predict; a tiny model's reply
// takes about a second, a large one's several, and a client that waits
// longer than it must loses less than one that hammers a full queue.
const retryAfter = 2

// classify turns an error from decoding or the engine into its response.
func classify(err error) *apiError {
	var ae *apiError
	var tooBig *http.MaxBytesError
	var te *chat.TemplateError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &tooBig):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
			msg: fmt.Sprintf("the request body is larger than this server's limit of %d bytes", tooBig.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &apiError{status: http.StatusRequestTimeout, code: "request_timeout", msg: "the request body did not arrive in time"}
	case errors.Is(err, library.ErrUnknown):
		// The catalogue changed between the request's check and the load.
		return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found", msg: err.Error()}
	case errors.Is(err, app.ErrBusy):
		return &apiError{status: http.StatusTooManyRequests, code: "rate_limit_exceeded",
			msg: "the server is busy: too many requests are waiting for the model; try again shortly"}
	case errors.Is(err, app.ErrTraining):
		return &apiError{status: http.StatusServiceUnavailable, code: "training", msg: err.Error()}
	case errors.Is(err, app.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, code: "server_shutting_down", msg: "the server is shutting down"}
	case errors.Is(err, app.ErrDeviceLost):
		return &apiError{status: http.StatusServiceUnavailable, code: "device_lost", msg: err.Error()}
	case errors.Is(err, model.ErrEmbeddingModel):
		return &apiError{status: http.StatusBadRequest, param: "model", code: "embedding_model",
			msg: err.Error() + "; use /v1/embeddings or /api/embed"}
	case errors.Is(err, model.ErrContextFull):
		return &apiError{status: http.StatusBadRequest, param: "messages", code: "context_length_exceeded", msg: err.Error()}
	case errors.As(err, &te):
		return &apiError{status: http.StatusBadRequest, param: "messages", code: "invalid_conversation", msg: err.Error()}
	case errors.Is(err, app.ErrNoProjector):
		// The catalogue pairs the model with a projector the engine was
		// not given (checkVision passed it).
		return &apiError{status: http.StatusBadRequest, param: "model", code: "vision_not_supported", msg: err.Error()}
	case errors.Is(err, vision.ErrNotImage), errors.Is(err, vision.ErrTooLarge):
		// checkImage reads only headers; the engine decodes the rest.
		return &apiError{status: http.StatusBadRequest, param: "messages", code: "invalid_image", msg: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, msg: err.Error()}
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// openAIErrorOf is e in OpenAI's format, whose type follows the status as
// OpenAI's own errors do.
func openAIErrorOf(e *apiError) openAIError {
	body := openAIErrorBody{Message: e.msg, Type: "invalid_request_error"}
	switch {
	case e.status == http.StatusTooManyRequests:
		body.Type = "requests"
	case e.status >= 500:
		body.Type = "server_error"
	}
	if e.param != "" {
		body.Param = &e.param
	}
	if e.code != "" {
		body.Code = &e.code
	}
	return openAIError{body}
}

// ollamaError is Ollama's error body.
type ollamaError struct {
	Error string `json:"error"`
}

// writeError writes e in a's format.
func writeError(w http.ResponseWriter, a api, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	if a == openAIAPI {
		writeJSON(w, e.status, openAIErrorOf(e))
		return
	}
	writeJSON(w, e.status, ollamaError{e.msg})
}

// writeJSON writes v as the whole response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
