package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/internal/kokorotest"
)

// audioRecorder is a ResponseWriter that notes the body's length at each
// Flush, and calls onWrite after each Write.
type audioRecorder struct {
	*httptest.ResponseRecorder
	flushed []int
	writes  int
	onWrite func()
}

func (a *audioRecorder) Flush() {
	a.flushed = append(a.flushed, a.Body.Len())
	a.ResponseRecorder.Flush()
}

func (a *audioRecorder) Write(b []byte) (int, error) {
	n, err := a.ResponseRecorder.Write(b)
	a.writes++
	if a.onWrite != nil {
		a.onWrite()
	}
	return n, err
}

// serveSpeech sends body to h's /v1/audio/speech directly, so that the
// test sees each write and flush.
func serveSpeech(ctx context.Context, h http.Handler, w http.ResponseWriter, body string) {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/audio/speech", strings.NewReader(body))
	r.Host = "localhost"
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
}

// wavData checks a streamed WAV's header: 16-bit PCM, SampleRate Hz mono,
// the RIFF and data sizes 0xFFFFFFFF (unknown). It returns the samples'
// bytes.
func wavData(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 44 {
		t.Fatalf("a WAV of %d bytes", len(b))
	}
	le := binary.LittleEndian
	for _, f := range []struct {
		name      string
		got, want uint32
	}{
		{"RIFF size", le.Uint32(b[4:]), math.MaxUint32},
		{"fmt size", le.Uint32(b[16:]), 16},
		{"format", uint32(le.Uint16(b[20:])), 1},
		{"channels", uint32(le.Uint16(b[22:])), 1},
		{"sample rate", le.Uint32(b[24:]), app.SampleRate},
		{"byte rate", le.Uint32(b[28:]), 2 * app.SampleRate},
		{"block align", uint32(le.Uint16(b[32:])), 2},
		{"bits", uint32(le.Uint16(b[34:])), 16},
		{"data size", le.Uint32(b[40:]), math.MaxUint32},
	} {
		if f.got != f.want {
			t.Errorf("WAV header: %s %d, want %d", f.name, f.got, f.want)
		}
	}
	if string(b[0:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("WAV header % x", b[:44])
	}
	return b[44:]
}

// checkSpeechAudio checks 16-bit samples: whole, some, at most a few
// seconds of a short sentence, and not silence.
func checkSpeechAudio(t *testing.T, pcm []byte) {
	t.Helper()
	if len(pcm)%2 != 0 {
		t.Fatalf("%d bytes of 16-bit samples", len(pcm))
	}
	d := time.Duration(len(pcm)/2) * time.Second / app.SampleRate
	if len(pcm) == 0 || d > 5*time.Second {
		t.Errorf("%d bytes of audio last %v", len(pcm), d)
	}
	var loud bool
	for i := 0; i+1 < len(pcm); i += 2 {
		loud = loud || int16(binary.LittleEndian.Uint16(pcm[i:])) != 0
	}
	if !loud {
		t.Error("the audio is silence")
	}
}

// TestSpeech speaks through /v1/audio/speech with the small fixture
// model on the CPU, one engine for every case: a wav, a pcm stream whose
// first sentence is flushed before the second is made, a client that
// goes away after the first sentence, and bad requests refused in
// OpenAI's error format. Each synthesis is a second or two, so the
// sentences are short and spoken at speed 4.
func TestSpeech(t *testing.T) {
	dir := kokorotest.WriteDir(t, t.TempDir())
	ts := newTestServer(t, app.EngineOptions{Kokoro: dir}, Options{})

	t.Run("wav", func(t *testing.T) {
		resp, data := ts.do(t, "POST", "/v1/audio/speech", map[string]any{
			"model": "tts-1", "input": "Hi there.", "voice": "alloy", "response_format": "wav", "speed": 4})
		if resp.StatusCode != 200 {
			t.Fatalf("status %s: %s", resp.Status, data)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "audio/wav" {
			t.Errorf("Content-Type %q", ct)
		}
		pcm := wavData(t, data)
		checkSpeechAudio(t, pcm)
		// The fixture model's durations are its random weights', so the
		// length to expect is the engine's for the same request: alloy is
		// af_heart in a folder without af_alloy.
		var want int
		err := ts.engine.Speak(context.Background(), app.SpeakRequest{Text: "Hi there.", Voice: "af_heart", Speed: 4}, func(c app.SpeechChunk) error {
			want += len(c.Audio)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(pcm) != 2*want {
			t.Errorf("%d bytes of samples; the engine made %d samples", len(pcm), want)
		}
	})

	h := New(ts.engine, Options{Models: Library(library.New(library.Roots{Folders: []string{modelsDir}}))})

	t.Run("pcm streams each sentence", func(t *testing.T) {
		w := &audioRecorder{ResponseRecorder: httptest.NewRecorder()}
		serveSpeech(context.Background(), h, w,
			`{"model": "kokoro", "input": "Hi there. Go on.", "voice": "af_heart:0.6,am_adam:0.4", "response_format": "pcm", "speed": 4}`)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "audio/pcm" {
			t.Errorf("Content-Type %q", ct)
		}
		pcm := w.Body.Bytes()
		checkSpeechAudio(t, pcm)
		// The first sentence was flushed alone: some audio, and not all.
		var sizes []int
		for _, n := range w.flushed {
			if n > 0 && (len(sizes) == 0 || n > sizes[len(sizes)-1]) {
				sizes = append(sizes, n)
			}
		}
		if len(sizes) < 2 || sizes[0]%2 != 0 || sizes[len(sizes)-1] != len(pcm) {
			t.Errorf("flushed at %v bytes of %d: want the first sentence, then the rest", w.flushed, len(pcm))
		}
	})

	t.Run("a client that goes away stops the speech", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &audioRecorder{ResponseRecorder: httptest.NewRecorder(), onWrite: cancel}
		// No response_format: wav, OpenAI's mp3 being beyond Hearth.
		serveSpeech(ctx, h, w, `{"input": "Hi there. Go on. Come back.", "voice": "am_adam", "speed": 4}`)
		if w.writes != 1 || w.Code != 200 {
			t.Fatalf("status %d, %d writes after the client left at the first: want the first sentence only", w.Code, w.writes)
		}
		if ct := w.Header().Get("Content-Type"); ct != "audio/wav" {
			t.Errorf("Content-Type %q: a request without response_format gets wav", ct)
		}
		checkSpeechAudio(t, wavData(t, w.Body.Bytes()))
	})

	// Bad requests, against the loaded model. Only "nothing to say"
	// reaches the engine, which refuses it before synthesis.
	speak := func(over map[string]any) map[string]any {
		req := map[string]any{"model": "tts-1", "input": "Hello.", "voice": "af_heart"}
		for k, v := range over {
			if v == nil {
				delete(req, k)
			} else {
				req[k] = v
			}
		}
		return req
	}
	const voices = "af_heart, am_adam, bf_emma"
	for _, tt := range []struct {
		name        string
		body        any
		status      int
		code, param string
		msg         []string
	}{
		{"not JSON", `{"input": `, 400, "", "", []string{"not valid JSON"}},
		{"unknown model", speak(map[string]any{"model": "whisper-1"}), 404, "model_not_found", "model", []string{"whisper-1", "kokoro", "tts-1-hd"}},
		{"no input", speak(map[string]any{"input": nil}), 400, "", "input", []string{"input is required"}},
		{"input not a string", speak(map[string]any{"input": 7}), 400, "", "input", []string{"input must be a string"}},
		{"input too long", speak(map[string]any{"input": strings.Repeat("é", 4097)}), 400, "", "input", []string{"4097 characters", "limit is 4096"}},
		{"nothing to say", speak(map[string]any{"input": "?! ... ,"}), 400, "", "input", []string{"nothing to speak"}},
		{"blank input", speak(map[string]any{"input": "  \n"}), 400, "", "input", []string{"nothing to speak"}},
		{"no voice", speak(map[string]any{"voice": nil}), 400, "", "voice", []string{"voice is required", voices}},
		{"unknown voice", speak(map[string]any{"voice": "zz_nobody"}), 400, "", "voice", []string{`"zz_nobody"`, voices}},
		{"openai voice not here", speak(map[string]any{"voice": "onyx"}), 400, "", "voice", []string{`"onyx"`, "am_onyx or am_michael", voices}},
		{"unknown voice in a blend", speak(map[string]any{"voice": "af_heart:0.5,zz_nobody:0.5"}), 400, "", "voice", []string{`"zz_nobody"`, voices}},
		{"voice path", speak(map[string]any{"voice": filepath.Join(dir, "voices", "af_heart.bin")}), 400, "", "voice", []string{"unknown voice", voices}},
		{"voice file name", speak(map[string]any{"voice": "af_heart.bin"}), 400, "", "voice", []string{"unknown voice", voices}},
		{"bad blend weight", speak(map[string]any{"voice": "af_heart:x"}), 400, "", "voice", []string{"not a number"}},
		{"custom voice object", speak(map[string]any{"voice": map[string]string{"id": "voice_1234"}}), 400, "unsupported_parameter", "voice", []string{"custom voice"}},
		{"mp3", speak(map[string]any{"response_format": "mp3"}), 400, "unsupported_parameter", "response_format", []string{"mp3 is not supported", "wav", "pcm"}},
		{"opus", speak(map[string]any{"response_format": "opus"}), 400, "unsupported_parameter", "response_format", []string{"opus", "wav", "pcm"}},
		{"aac", speak(map[string]any{"response_format": "aac"}), 400, "unsupported_parameter", "response_format", []string{"aac", "wav", "pcm"}},
		{"flac", speak(map[string]any{"response_format": "flac"}), 400, "unsupported_parameter", "response_format", []string{"flac", "wav", "pcm"}},
		{"unknown format", speak(map[string]any{"response_format": "ogg"}), 400, "", "response_format", []string{`"ogg"`, "wav or pcm"}},
		{"speed 0", speak(map[string]any{"speed": 0}), 400, "", "speed", []string{"[0.25, 4]", "got 0"}},
		{"speed 0.2", speak(map[string]any{"speed": 0.2}), 400, "", "speed", []string{"[0.25, 4]"}},
		{"speed 4.5", speak(map[string]any{"speed": 4.5}), 400, "", "speed", []string{"[0.25, 4]"}},
		{"instructions", speak(map[string]any{"instructions": "whisper"}), 400, "unsupported_parameter", "instructions", []string{"instructions"}},
		{"sse", speak(map[string]any{"stream_format": "sse"}), 400, "unsupported_parameter", "stream_format", []string{"sse"}},
		{"wrong method", nil, 405, "method_not_allowed", "", []string{"use POST"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.status == 405 {
				method = "GET"
			}
			resp, data := ts.do(t, method, "/v1/audio/speech", tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, tt.status, data)
			}
			e := openAIErr(t, data)
			if deref(e.Code) != tt.code || deref(e.Param) != tt.param || e.Type != "invalid_request_error" {
				t.Errorf("code %q, param %q, type %q; want %q, %q, invalid_request_error", deref(e.Code), deref(e.Param), e.Type, tt.code, tt.param)
			}
			for _, s := range tt.msg {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q lacks %q", e.Message, s)
				}
			}
		})
	}

	// Voices without the model: the weights' absence is found when the
	// model loads, and the message says where to put them.
	t.Run("voices without the model", func(t *testing.T) {
		bare := t.TempDir()
		if err := os.MkdirAll(filepath.Join(bare, "voices"), 0o755); err != nil {
			t.Fatal(err)
		}
		pack, err := os.ReadFile(filepath.Join(dir, "voices", "af_heart.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bare, "voices", "af_heart.bin"), pack, 0o644); err != nil {
			t.Fatal(err)
		}
		checkNoVoiceModel(t, bare, bare)
	})
}

// checkNoVoiceModel checks that a speech request to a server whose Kokoro
// directory is dir gets 404 naming where the files go.
func checkNoVoiceModel(t *testing.T, dir, where string) {
	t.Helper()
	ts := newTestServer(t, app.EngineOptions{Kokoro: dir}, Options{})
	resp, data := ts.do(t, "POST", "/v1/audio/speech", map[string]any{"model": "tts-1", "input": "Hello.", "voice": "af_heart"})
	if resp.StatusCode != 404 {
		t.Fatalf("status %s, want 404: %s", resp.Status, data)
	}
	e := openAIErr(t, data)
	if deref(e.Code) != "model_not_found" || deref(e.Param) != "model" || !strings.Contains(e.Message, where) {
		t.Errorf("code %q, param %q, message %q: want model_not_found about model, naming %s", deref(e.Code), deref(e.Param), e.Message, where)
	}
	// A client's user reads it: the command that gets the model, and no
	// package names stacked in front ("app: no voice model: kokoro: …").
	if !strings.HasPrefix(e.Message, "no Kokoro voice model: ") || strings.Contains(e.Message, "app:") || strings.Contains(e.Message, "kokoro:") ||
		!strings.Contains(e.Message, "hearth pull hexgrad/Kokoro-82M") {
		t.Errorf("the 404 says %q", e.Message)
	}
}

// TestSpeechWithoutVoiceModel: an empty Kokoro directory is a 404 that
// says where to put Kokoro's voices.
func TestSpeechWithoutVoiceModel(t *testing.T) {
	dir := t.TempDir()
	checkNoVoiceModel(t, dir, filepath.Join(dir, "voices"))
}

// TestAppendPCM16 checks the sample conversion: scaled by 32767 and
// rounded, clipped at ±1, NaN silent, little-endian.
func TestAppendPCM16(t *testing.T) {
	in := []float32{0, 0.5, -0.5, 1, -1, 1.5, -2, float32(math.NaN()), 1.0 / 32767, -0.4 / 32767}
	want := []int16{0, 16384, -16384, 32767, -32767, 32767, -32767, 0, 1, 0}
	got := appendPCM16([]byte{9}, in)
	if got[0] != 9 || len(got) != 1+2*len(in) {
		t.Fatalf("% x", got)
	}
	out := make([]int16, len(in))
	if err := binary.Read(bytes.NewReader(got[1:]), binary.LittleEndian, out); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("sample %g: %d, want %d", in[i], out[i], want[i])
		}
	}
}
