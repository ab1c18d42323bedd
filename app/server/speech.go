package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/vocoder/kokoro"
	"github.com/hearthstudio/hearth/vocoder/phonemes"
)

// maxSpeechInput is OpenAI's limit on a speech's input, in characters.
const maxSpeechInput = 4096

// speechModels are the model names a speech request may give: Kokoro's,
// OpenAI's three, and none. All mean the Kokoro model in the engine's
// Kokoro directory; Hearth has no other voice model.
var speechModels = []string{"kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"}

// openAIVoices maps OpenAI's voice names to stock Kokoro-82M v1.0 packs,
// the first of each list that the Kokoro directory holds. Kokoro ships a
// namesake of five of them (af_alloy, am_echo, bm_fable, am_onyx,
// af_nova), first in their lists; the others, and the second choices for
// a folder holding only some of Kokoro's 54 packs, are a voice of like
// kind, by gender and, for fable and ballad, a British accent. A name
// whose packs are all missing is refused with the voices there are,
// rather than spoken in a voice the client did not choose.
var openAIVoices = map[string][]string{
	"alloy":   {"af_alloy", "af_heart"},
	"ash":     {"am_michael", "am_adam"},
	"ballad":  {"bm_george", "bm_fable"},
	"coral":   {"af_heart"},
	"echo":    {"am_echo", "am_adam"},
	"fable":   {"bm_fable", "bm_george"},
	"onyx":    {"am_onyx", "am_michael"},
	"nova":    {"af_nova", "af_bella"},
	"sage":    {"af_sarah", "af_heart"},
	"shimmer": {"af_sky", "af_bella"},
	"verse":   {"am_liam", "am_michael"},
	"marin":   {"af_kore", "af_heart"},
	"cedar":   {"am_eric", "am_michael"},
}

// speechRequest is OpenAI's text-to-speech request.
type speechRequest struct {
	Model          string          `json:"model"`
	Input          string          `json:"input"`
	Voice          json.RawMessage `json:"voice"` // a name, or OpenAI's custom voice object
	ResponseFormat *string         `json:"response_format"`
	Speed          *float64        `json:"speed"`
	Instructions   string          `json:"instructions"`
	StreamFormat   string          `json:"stream_format"`
}

// speechFormat is an audio encoding the endpoint writes.
type speechFormat struct {
	name        string
	contentType string
	wavHeader   bool
}

var (
	wavFormat = speechFormat{"wav", "audio/wav", true}
	pcmFormat = speechFormat{"pcm", "audio/pcm", false}
)

// format reads response_format. OpenAI's default is mp3, which Hearth
// does not encode; a request that leaves the format out gets wav, named
// in the Content-Type, because the client asked for no format in
// particular, players and browsers read a WAV as readily, and a 400 would
// fail the minimal request every OpenAI example sends. A request that
// names mp3, opus, aac or flac is refused: it would get audio it did not
// ask for.
func (r speechRequest) format() (speechFormat, error) {
	if r.ResponseFormat == nil {
		return wavFormat, nil
	}
	switch f := *r.ResponseFormat; f {
	case "wav":
		return wavFormat, nil
	case "pcm":
		return pcmFormat, nil
	case "mp3", "opus", "aac", "flac":
		return speechFormat{}, &apiError{status: http.StatusBadRequest, param: "response_format", code: "unsupported_parameter",
			msg: "response_format " + f + " is not supported: Hearth writes wav (16-bit PCM, 24 kHz mono) or pcm (raw 16-bit little-endian, 24 kHz mono); ask for one of those"}
	default:
		return speechFormat{}, badRequest("response_format", "response_format %q: want wav or pcm (OpenAI's mp3, opus, aac and flac are not supported)", f)
	}
}

// check refuses what the request asks that Kokoro cannot do, and input
// out of OpenAI's bounds, before anything is loaded.
func (r speechRequest) check() error {
	if r.Model != "" && !slices.Contains(speechModels, r.Model) {
		return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
			msg: fmt.Sprintf("the speech model `%s` does not exist: give kokoro, or OpenAI's %s, which all mean Kokoro", r.Model, strings.Join(speechModels[1:], ", "))}
	}
	if r.Input == "" {
		return badRequest("input", "input is required: the text to speak")
	}
	if n := utf8.RuneCountInString(r.Input); n > maxSpeechInput {
		return badRequest("input", "input has %d characters; the limit is %d, as OpenAI's", n, maxSpeechInput)
	}
	switch r.StreamFormat {
	case "", "audio":
	case "sse":
		return unsupported("stream_format", "stream_format sse (the audio itself is streamed: use audio or leave it out)")
	default:
		return badRequest("stream_format", "stream_format %q: want audio", r.StreamFormat)
	}
	if r.Instructions != "" {
		return &apiError{status: http.StatusBadRequest, param: "instructions", code: "unsupported_parameter",
			msg: "instructions are not supported: Kokoro's voices take none; choose the voice and speed instead"}
	}
	return inRange("speed", r.Speed, kokoro.MinSpeed, kokoro.MaxSpeed)
}

// voice is the request's voice spec, unresolved.
func (r speechRequest) voice() (string, error) {
	raw := bytes.TrimSpace(r.Voice)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if raw[0] == '{' {
			return "", unsupported("voice", "a custom voice object (give a voice name)")
		}
		return "", badRequest("voice", "voice must be a string, such as af_heart or alloy")
	}
	return s, nil
}

// resolveVoice turns a request's voice into a spec of the Kokoro packs
// in have: each term of a blend ("af_heart:0.6,alloy:0.4") is a pack's
// name or one of OpenAI's (openAIVoices). Only names in have are
// accepted, never a path, which the engine would open (a request must not
// make the server read a file of its choosing).
func resolveVoice(spec string, have []string) (string, error) {
	list := strings.Join(have, ", ")
	if strings.TrimSpace(spec) == "" {
		return "", badRequest("voice", "voice is required: one of %s, a blend of them such as af_heart:0.6,am_adam:0.4, or one of OpenAI's voices", list)
	}
	terms, err := kokoro.ParseVoiceSpec(spec)
	if err != nil {
		return "", badRequest("voice", "%s", err)
	}
	parts := make([]string, len(terms))
	for i, t := range terms {
		name := t.Name
		if !slices.Contains(have, name) {
			kokoro, ok := openAIVoices[name]
			if !ok {
				return "", badRequest("voice", "unknown voice %q: the voices are %s (or OpenAI's names, spoken by the Kokoro voice most like them)", name, list)
			}
			j := slices.IndexFunc(kokoro, func(k string) bool { return slices.Contains(have, k) })
			if j < 0 {
				return "", badRequest("voice", "voice %q is spoken by Kokoro's %s, which the voices folder lacks: the voices are %s", name, strings.Join(kokoro, " or "), list)
			}
			name = kokoro[j]
		}
		parts[i] = name
		if t.Weight != 1 {
			parts[i] += ":" + strconv.FormatFloat(t.Weight, 'g', -1, 64)
		}
	}
	return strings.Join(parts, ","), nil
}

// audioSpeech is OpenAI's POST /v1/audio/speech, spoken by Kokoro
// (Engine.Speak). The audio is streamed: each chunk the engine makes (the
// first sentence, then the rest) is written and flushed as it comes, so a
// player starts on the first sentence while the others are made.
//
// wav is 16-bit PCM, SampleRate Hz mono; pcm is the same samples without
// a header, as OpenAI's pcm is. A WAV's header states its length before
// the samples, and a response cannot seek back: the header says
// 0xFFFFFFFF for the RIFF and data sizes, the "length unknown" that
// streaming servers write and that streaming readers (ffmpeg, browsers)
// read to the end of the stream. Buffering instead would hold back the
// first sound until the last sentence is made: a 4096-character input is
// minutes of speech. A request without response_format gets wav (see
// speechRequest.format).
//
// Errors before the first chunk are the API's: a missing Kokoro model is
// 404 model_not_found (not a 5xx, which OpenAI's clients retry in vain)
// saying where to put the files. A client that goes away cancels the
// speech through the request's context, between chunks.
func (s *server) audioSpeech(w http.ResponseWriter, r *http.Request) error {
	var req speechRequest
	if err := decode(w, r, s.o.MaxBody, &req); err != nil {
		return err
	}
	spec, err := req.voice()
	if err != nil {
		return err
	}
	format, err := req.format()
	if err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	have, err := s.engine.Voices()
	if err != nil {
		return speechError(err)
	}
	if spec, err = resolveVoice(spec, have); err != nil {
		return err
	}
	speed := 1.0
	if req.Speed != nil {
		speed = *req.Speed
	}

	run := newRun(w, format.contentType, true)
	defer run.end()
	var buf []byte
	err = s.engine.Speak(r.Context(), app.SpeakRequest{Text: req.Input, Voice: spec, Speed: speed}, func(c app.SpeechChunk) error {
		buf = buf[:0]
		if format.wavHeader && !run.s.started {
			buf = appendStreamingWAVHeader(buf)
		}
		return run.s.write(appendPCM16(buf, c.Audio))
	})
	switch {
	case err == nil:
		if !run.s.started && format.wavHeader {
			return run.s.write(appendStreamingWAVHeader(nil)) // no audio at all: still a WAV
		}
		run.s.begin()
		return nil
	case !run.s.started:
		return speechError(err)
	case run.s.err != nil || r.Context().Err() != nil:
		return nil // the client went away mid-stream
	}
	// Audio is out with a 200 and there is no error message in a WAV:
	// abort the response, so that the client sees a broken transfer
	// rather than a short speech that looks whole.
	s.log.Error("speech failed mid-stream", "err", err)
	panic(http.ErrAbortHandler)
}

// speechError maps the speech job's errors; the rest are classify's.
func speechError(err error) error {
	switch {
	case errors.Is(err, app.ErrNoVoiceModel):
		return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found", msg: err.Error()}
	case errors.Is(err, phonemes.ErrNothingToSay):
		return badRequest("input", "%s", err)
	}
	return err
}

// unknownSize is a streamed WAV's RIFF and data size: the length is not
// known when the header is sent.
const unknownSize = math.MaxUint32

// appendStreamingWAVHeader appends the 44-byte header of a 16-bit PCM
// mono WAV at app.SampleRate Hz whose sizes are unknownSize.
func appendStreamingWAVHeader(b []byte) []byte {
	le := binary.LittleEndian
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, unknownSize)
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16) // the fmt chunk of WAVE_FORMAT_PCM
	b = le.AppendUint16(b, 1)  // WAVE_FORMAT_PCM
	b = le.AppendUint16(b, 1)  // mono
	b = le.AppendUint32(b, app.SampleRate)
	b = le.AppendUint32(b, 2*app.SampleRate) // bytes per second
	b = le.AppendUint16(b, 2)                // bytes per frame
	b = le.AppendUint16(b, 16)               // bits per sample
	b = append(b, "data"...)
	return le.AppendUint32(b, unknownSize)
}

// appendPCM16 appends samples in [-1, 1] as 16-bit little-endian PCM,
// scaled by 32767, rounded, and clipped as audio's WAV writer does; NaN
// is silence.
func appendPCM16(b []byte, samples []float32) []byte {
	for _, x := range samples {
		var v int16
		switch {
		case x != x:
		case x >= 1:
			v = math.MaxInt16
		case x <= -1:
			v = -math.MaxInt16
		default:
			v = int16(math.Round(float64(x) * math.MaxInt16))
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}
