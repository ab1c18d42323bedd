package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hearthstudio/hearth/app"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/vision"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// gemma is tiny-gemma3, served with the vision projector beside it.
const gemma = "tiny-gemma3"

// writeVisionModel writes tiny-gemma3 and its projector into a folder of
// their own, as a user's download lays them out, and returns the folder.
func writeVisionModel() (string, error) {
	dir, err := os.MkdirTemp("", "hearth-server-vision-")
	if err != nil {
		return "", err
	}
	_, _, err = visiontest.Write(dir)
	return dir, err
}

// newVisionServer serves tiny-gemma3 with its projector, and modelsDir's
// models, which have none.
func newVisionServer(t testing.TB, so Options) *testServer {
	t.Helper()
	return newServerOf(t, []string{visionDir, modelsDir}, app.EngineOptions{}, so)
}

func dataURL(img []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
}

// imagePart is an OpenAI content part holding img.
func imagePart(img []byte) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]string{"url": dataURL(img), "detail": "high"}}
}

// imageChatBody is an OpenAI chat about img, sampled at temperature 1 from
// a fixed seed: tiny-gemma3's greedy reply is one token repeated whatever
// the prompt, but its draws follow the logits, so the reply shows what the
// image changed.
func imageChatBody(parts []map[string]any, extra map[string]any) map[string]any {
	b := map[string]any{"model": gemma, "messages": []map[string]any{{"role": "user", "content": parts}},
		"temperature": 1, "seed": 11, "max_tokens": 8}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestChatWithImages sends one image and question through each API, in
// one piece and streamed, and through the engine directly: the same
// prompt (the image's 16 tokens and their framing in it) and the same
// sampled reply everywhere. Another image changes the reply, and the
// server records the conversation with the image's bytes.
func TestChatWithImages(t *testing.T) {
	var mu sync.Mutex
	var recorded []Exchange
	ts := newVisionServer(t, Options{Record: func(x Exchange) {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, x)
	}})
	img := visiontest.PNG(40, 30, 1)
	const question = "What is in it?"

	// The image stands before the text, where Ollama puts it.
	sampling := openAIDefaults()
	sampling.Seed = 11
	direct, err := ts.engine.Chat(context.Background(), app.ChatRequest{
		GenerateOptions: app.GenerateOptions{Model: gemma, MaxTokens: 8, Sampling: sampling},
		Messages:        []chat.Message{{Role: "user", Content: chat.ImageMarker + question, Images: []chat.Image{{Data: img}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	textOnly, err := ts.engine.Chat(context.Background(), app.ChatRequest{
		GenerateOptions: app.GenerateOptions{Model: gemma, MaxTokens: 8, Sampling: sampling},
		Messages:        []chat.Message{{Role: "user", Content: question}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "\n\n<start_of_image>", 16 rows, "<end_of_image>\n\n".
	if d := direct.Stats.PromptTokens - textOnly.Stats.PromptTokens; d < 18 || d > 22 {
		t.Fatalf("the image added %d prompt tokens, want its 16 and the framing", d)
	}

	parts := []map[string]any{imagePart(img), {"type": "text", "text": question}}
	var whole chatCompletion
	ts.post(t, "/v1/chat/completions", imageChatBody(parts, nil), &whole)
	if got := *whole.Choices[0].Message.Content; got != direct.Text || whole.Usage.PromptTokens != direct.Stats.PromptTokens {
		t.Errorf("OpenAI: %q from %d prompt tokens; the engine: %q from %d", got, whole.Usage.PromptTokens, direct.Text, direct.Stats.PromptTokens)
	}
	_, body := ts.do(t, "POST", "/v1/chat/completions", imageChatBody(parts, map[string]any{"stream": true, "stream_options": map[string]bool{"include_usage": true}}))
	if text, _, u := streamedChat(t, body); text != direct.Text || u == nil || u.PromptTokens != direct.Stats.PromptTokens {
		t.Errorf("OpenAI streamed: %q (%+v); the engine: %q", text, u, direct.Text)
	}

	// Ollama's options set to OpenAI's defaults: the same sampler.
	options := map[string]any{"temperature": 1, "top_p": 1, "seed": 11, "num_predict": 8}
	b64 := base64.StdEncoding.EncodeToString(img)
	for _, stream := range []bool{false, true} {
		_, data := ts.do(t, "POST", "/api/chat", map[string]any{"model": gemma, "stream": stream, "options": options,
			"messages": []map[string]any{{"role": "user", "content": question, "images": []string{b64}}}})
		objs := ndjson(t, data)
		var text string
		for _, o := range objs {
			text += o["message"].(map[string]any)["content"].(string)
		}
		if final := objs[len(objs)-1]; text != direct.Text || final["prompt_eval_count"] != float64(direct.Stats.PromptTokens) {
			t.Errorf("/api/chat stream %v: %q %v; the engine: %q", stream, text, final, direct.Text)
		}
	}
	var gen map[string]any
	ts.post(t, "/api/generate", map[string]any{"model": gemma, "prompt": question, "images": []string{b64}, "stream": false, "options": options}, &gen)
	if gen["response"] != direct.Text || gen["prompt_eval_count"] != float64(direct.Stats.PromptTokens) {
		t.Errorf("/api/generate: %v; the engine: %q", gen, direct.Text)
	}

	// Another image, another reply.
	var other chatCompletion
	ts.post(t, "/v1/chat/completions", imageChatBody([]map[string]any{imagePart(visiontest.PNG(50, 50, 9)), {"type": "text", "text": question}}, nil), &other)
	if *other.Choices[0].Message.Content == direct.Text {
		t.Errorf("two images got the reply %q", direct.Text)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(recorded) != 5 {
		t.Fatalf("%d exchanges recorded, want 5", len(recorded))
	}
	// Recorded as written: the image before the text needs no marker.
	for _, i := range []int{0, 2} {
		if msgs := recorded[i].Messages; len(msgs) != 1 || msgs[0].Content != question || len(msgs[0].Images) != 1 || !bytes.Equal(msgs[0].Images[0].Data, img) {
			t.Errorf("recorded %s exchange: %+v", recorded[i].API, msgs)
		}
	}
}

// TestImagePlacement: OpenAI's parts become one message whose text parts
// are joined by newlines and whose images stand where their parts stand,
// with no newline beside them (as llama.cpp's server joins them); images
// before all the text need no marker. An image in an assistant's message
// is taken, as llama.cpp and Ollama take it.
func TestImagePlacement(t *testing.T) {
	a, b := visiontest.PNG(8, 8, 1), visiontest.PNG(16, 8, 2)
	req := chatRequest{Messages: []openAIMessage{
		{Role: "user", Content: mustJSON(t, []map[string]any{{"type": "text", "text": "One"}, {"type": "text", "text": "two"}, imagePart(a), {"type": "text", "text": "three"}, imagePart(b)})},
		{Role: "assistant", Content: mustJSON(t, []map[string]any{imagePart(b)})},
		{Role: "user", Content: mustJSON(t, []map[string]any{imagePart(a), imagePart(b), {"type": "text", "text": "Compare them."}})},
		{Role: "user", Content: mustJSON(t, []map[string]any{imagePart(a), {"type": "text", "text": "And"}, imagePart(b)})},
	}}
	msgs, err := req.messages()
	if err != nil {
		t.Fatal(err)
	}
	m := chat.ImageMarker
	want := []string{"One\ntwo" + m + "three" + m, "", "Compare them.", m + "And" + m}
	for i, msg := range msgs {
		if msg.Content != want[i] {
			t.Errorf("message %d: %q, want %q", i, msg.Content, want[i])
		}
	}
	for i, n := range []int{2, 1, 2, 2} {
		if len(msgs[i].Images) != n {
			t.Errorf("message %d: %d images, want %d", i, len(msgs[i].Images), n)
		}
	}
	if !bytes.Equal(msgs[0].Images[0].Data, a) || !bytes.Equal(msgs[0].Images[1].Data, b) {
		t.Error("message 0: the images out of order")
	}

	ts := newVisionServer(t, Options{})
	var c chatCompletion
	ts.post(t, "/v1/chat/completions", map[string]any{"model": gemma, "max_tokens": 2, "messages": []map[string]any{
		{"role": "user", "content": "Draw a cat."},
		{"role": "assistant", "content": []map[string]any{imagePart(a)}},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "Another, like"}, {"type": "image_url", "image_url": dataURL(b)}}},
	}}, &c)
	if c.Usage.PromptTokens < 2*16 {
		t.Errorf("two images in %d prompt tokens", c.Usage.PromptTokens)
	}
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImageRefusals: what Hearth cannot read is refused with 400 naming the
// image and why, before the request waits for a model; the server then
// chats on.
func TestImageRefusals(t *testing.T) {
	ts := newVisionServer(t, Options{})
	img := visiontest.PNG(8, 8, 3)
	b64 := base64.StdEncoding.EncodeToString(img)
	text := base64.StdEncoding.EncodeToString([]byte("a text file, not a picture"))
	withURL := func(url string) map[string]any {
		return imageChatBody([]map[string]any{{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": map[string]string{"url": url}}}, nil)
	}
	const part = "messages[0].content[1].image_url.url"
	openAI := []struct {
		name        string
		body        any
		code, param string
		msg         string
	}{
		{"https URL", withURL("https://example.com/cat.png"), "invalid_image_url", part, "Hearth fetches nothing from the network; send the image itself in a data URL"},
		{"http URL", withURL("HTTP://192.168.1.2/cat.png"), "invalid_image_url", part, "is a remote URL"},
		{"file URL", withURL("file:///etc/passwd"), "invalid_image_url", part, "must be a data URL"},
		{"text data URL", withURL("data:text/plain;base64," + text), "invalid_image_format", part, `type "text/plain": want image/png`},
		{"data URL not base64", withURL("data:image/png,rawbytes"), "invalid_image_url", part, "must be a base64 data URL"},
		{"bad base64", withURL("data:image/png;base64,iVBOR*w0K"), "invalid_image", part, part + " is not valid base64"},
		{"not an image", withURL("data:image/png;base64," + text), "invalid_image", part, part + `: not a PNG, JPEG, GIF or WebP image (it starts with "a text f")`},
		{"empty image", withURL("data:image/jpeg;base64,"), "invalid_image", part, "the image is empty"},
		{"truncated header", withURL("data:image/png;base64," + base64.StdEncoding.EncodeToString(img[:20])), "invalid_image", part, "not a valid PNG image"},
		{"no url", imageChatBody([]map[string]any{{"type": "image_url", "image_url": map[string]string{"detail": "low"}}}, nil), "", "messages[0].content[0].image_url", `must be {"url"`},
		{"no projector", map[string]any{"model": llama, "messages": []map[string]any{{"role": "user", "content": []map[string]any{imagePart(img)}}}},
			"vision_not_supported", "model", "tiny-llama reads no images: Hearth found no vision projector (mmproj file) for it"},
		{"marker in text", imageChatBody([]map[string]any{{"type": "text", "text": "what is " + chat.ImageMarker}, imagePart(img)}, nil),
			"", "messages[0].content", "holds the text " + chat.ImageMarker},
	}
	for _, tt := range openAI {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := ts.do(t, "POST", "/v1/chat/completions", tt.body)
			e := openAIErr(t, data)
			if resp.StatusCode != 400 || !strings.Contains(e.Message, tt.msg) || deref(e.Param) != tt.param || tt.code != "" && deref(e.Code) != tt.code {
				t.Errorf("%s: %+v (param %q, code %q), want 400 %q (param %q, code %q)", resp.Status, e, deref(e.Param), deref(e.Code), tt.msg, tt.param, tt.code)
			}
		})
	}

	ollama := []struct {
		name, path string
		body       map[string]any
		msg        string
	}{
		{"bad base64", "/api/chat", map[string]any{"model": gemma, "messages": []map[string]any{{"role": "user", "content": "Hi", "images": []string{"not base64!"}}}},
			"messages[0].images[0] is not valid base64"},
		{"not an image", "/api/chat", map[string]any{"model": gemma, "messages": []map[string]any{{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yes?"},
			{"role": "user", "content": "This", "images": []string{b64, text}}}}, "messages[2].images[1]: not a PNG, JPEG, GIF or WebP image"},
		{"remote URL", "/api/chat", map[string]any{"model": gemma, "messages": []map[string]any{{"role": "user", "content": "Hi", "images": []string{"https://example.com/a.png"}}}},
			"Hearth fetches nothing"},
		{"no projector", "/api/chat", map[string]any{"model": qwen, "messages": []map[string]any{{"role": "user", "content": "Hi", "images": []string{b64}}}},
			"tiny-qwen3 reads no images"},
		{"marker in text", "/api/chat", map[string]any{"model": gemma, "messages": []map[string]any{{"role": "system", "content": "Use " + chat.ImageMarker}, {"role": "user", "content": "Hi", "images": []string{b64}}}},
			"messages[0].content holds the text " + chat.ImageMarker},
		{"generate not an image", "/api/generate", map[string]any{"model": gemma, "prompt": "Hi", "images": []string{text}}, "images[0]: not a PNG"},
		{"generate no projector", "/api/generate", map[string]any{"model": llama, "prompt": "Hi", "images": []string{b64}}, "tiny-llama reads no images"},
		{"generate raw", "/api/generate", map[string]any{"model": gemma, "prompt": "Hi", "raw": true, "images": []string{b64}}, "images with a raw prompt are not supported"},
	}
	for _, tt := range ollama {
		t.Run("ollama "+tt.name, func(t *testing.T) {
			resp, data := ts.do(t, "POST", tt.path, tt.body)
			var e map[string]string
			if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != 400 || !strings.Contains(e["error"], tt.msg) {
				t.Errorf("%s %s, want 400 %q", resp.Status, data, tt.msg)
			}
		})
	}
	// Every refusal so far came before the engine.
	if st := ts.engine.Status(); st.Model != nil {
		t.Errorf("a refused request loaded %s", st.Model.Name)
	}

	// An image whose header reads but whose pixels are cut short is found
	// when the engine decodes it: a 400 too, naming the image.
	cut := img[:len(img)-20]
	resp, data := ts.do(t, "POST", "/v1/chat/completions", imageChatBody([]map[string]any{imagePart(cut), {"type": "text", "text": "Hi"}}, nil))
	if e := openAIErr(t, data); resp.StatusCode != 400 || !strings.Contains(e.Message, "image 1: not a valid PNG image") {
		t.Errorf("a damaged image: %s %+v, want 400 naming image 1", resp.Status, e)
	}

	// The server chats on, with an image and without.
	var c chatCompletion
	ts.post(t, "/v1/chat/completions", imageChatBody([]map[string]any{imagePart(img), {"type": "text", "text": "And this?"}}, nil), &c)
	ts.post(t, "/v1/chat/completions", chatBody(llama, 3, nil), &c)
	if c.Usage.CompletionTokens != 3 {
		t.Errorf("a chat after the refusals: %+v", c.Usage)
	}
}

// TestImageBodyLimit: a photo's worth of base64 fits the default bound on
// a body; a body over the bound is answered 413 saying so, though the
// server stops reading it at the bound, while the client still sends.
func TestImageBodyLimit(t *testing.T) {
	// 6 MB of noise does not compress: an 8 MB body.
	noise := make([]byte, 6<<20)
	for i := range noise {
		noise[i] = byte(i*7919 ^ i>>9)
	}
	big := append(visiontest.PNG(4, 4, 1), noise...)
	body := map[string]any{"model": llama, "messages": []map[string]any{{"role": "user", "content": []map[string]any{imagePart(big)}}}}

	ts := newVisionServer(t, Options{})
	resp, data := ts.do(t, "POST", "/v1/chat/completions", body)
	if e := openAIErr(t, data); resp.StatusCode != 400 || deref(e.Code) != "vision_not_supported" {
		t.Errorf("an 8 MB body within the default bound: %s %+v", resp.Status, e)
	}

	small := newVisionServer(t, Options{MaxBody: 1 << 20})
	resp, data = small.do(t, "POST", "/v1/chat/completions", body)
	if e := openAIErr(t, data); resp.StatusCode != http.StatusRequestEntityTooLarge || deref(e.Code) != "request_too_large" || !strings.Contains(e.Message, "1048576 bytes") {
		t.Errorf("over the bound: %s %+v", resp.Status, e)
	}
}

// TestShowVision: /api/show lists "vision" for a model with a projector,
// after "completion", as Ollama does, and not for one without.
func TestShowVision(t *testing.T) {
	ts := newVisionServer(t, Options{})
	for name, want := range map[string]bool{gemma: true, llama: false} {
		var show struct{ Capabilities []string }
		ts.post(t, "/api/show", map[string]any{"model": name}, &show)
		if got := slices.Contains(show.Capabilities, "vision"); got != want || show.Capabilities[0] != "completion" {
			t.Errorf("%s: capabilities %v", name, show.Capabilities)
		}
	}
}

// TestCheckImage: the header check takes the four formats vision.Decode
// reads, and refuses before any pixel is decoded what vision.Decode
// would: another format, and an image of more pixels than it allows, as a
// PNG whose 33-byte header claims 50 000 × 50 000.
func TestCheckImage(t *testing.T) {
	small := image.NewRGBA(image.Rect(0, 0, 3, 2))
	var jpg, gf bytes.Buffer
	if err := jpeg.Encode(&jpg, small, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gf, small, nil); err != nil {
		t.Fatal(err)
	}
	// A 1×1 lossless WebP.
	webp, _ := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	for name, data := range map[string][]byte{"PNG": visiontest.PNG(3, 2, 0), "JPEG": jpg.Bytes(), "GIF": gf.Bytes(), "WebP": webp} {
		if err := checkImage(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := vision.Decode(data, name); err != nil {
			t.Errorf("%s passed the check, but vision.Decode: %v", name, err)
		}
	}

	huge := visiontest.PNG(1, 1, 0)
	binary.BigEndian.PutUint32(huge[16:], 50_000) // IHDR width
	binary.BigEndian.PutUint32(huge[20:], 50_000) // and height
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	bmp := append([]byte("BM"), make([]byte, 60)...)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"too many pixels": {huge, "50000x50000 (2500000000 pixels), more than the 50000000"},
		"BMP":             {bmp, `not a PNG, JPEG, GIF or WebP image (it starts with "BM\x00\x00`},
	} {
		if err := checkImage(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if _, err := vision.Decode(tc.data, name); err == nil {
			t.Errorf("%s: vision.Decode took it", name)
		}
	}
}
