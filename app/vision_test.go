package app

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthstudio/hearth/app/library"
	"github.com/hearthstudio/hearth/engine/chat"
	"github.com/hearthstudio/hearth/engine/sample"
	"github.com/hearthstudio/hearth/engine/synth"
	"github.com/hearthstudio/hearth/engine/vision"
	"github.com/hearthstudio/hearth/gguf"
	"github.com/hearthstudio/hearth/internal/ggufedit"
	"github.com/hearthstudio/hearth/internal/visiontest"
)

// visionModel writes tiny-gemma3 and its projector into a folder and
// returns their paths.
func visionModel(t *testing.T) (modelPath, projPath string) {
	t.Helper()
	modelPath, projPath, err := visiontest.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return modelPath, projPath
}

// imageChat is a one-turn chat about img, drawn at temperature 1 from a
// fixed seed: tiny-gemma3's greedy reply is one token repeated whatever
// the prompt, but its draws follow the logits, so a reply shows what the
// image changed.
func imageChat(modelPath string, img []byte, text string) ChatRequest {
	req := hello(12)
	req.Sampling = sample.Options{Temperature: 1, Seed: 11}
	req.Model = modelPath
	req.Messages = []chat.Message{{Role: "user", Content: text, Images: []chat.Image{{Data: img, Ref: "test.png"}}}}
	return req
}

// TestChatWithImages: a chat with an image on both backends gives the same
// reply; the image's 16 tokens are in the prompt; the next turn finds the
// image in the cache and reads no image again; another image is read.
// The projector comes from EngineOptions.Projector.
func TestChatWithImages(t *testing.T) {
	modelPath, projPath := visionModel(t)
	paired := func(name, path string) (string, error) { return projPath, nil }
	img := visiontest.PNG(40, 30, 1)
	var replies []Reply
	for _, backend := range []string{"cpu", "gpu"} {
		e := NewEngine(EngineOptions{Backend: backend, Projector: paired})
		t.Cleanup(e.Close)
		ctx := context.Background()
		first, added := chatWithAndWithout(t, e, modelPath, img)
		if _, err := e.Chat(ctx, imageChat(modelPath, nil, "What is in it?"), nil); err == nil || !strings.Contains(err.Error(), "test.png") {
			t.Errorf("%s: an image with no bytes: %v, want an error naming it", backend, err)
		}
		// "\n\n<start_of_image>", 16 rows, "<end_of_image>\n\n".
		if d := added; d < 18 || d > 22 {
			t.Errorf("%s: the image added %d prompt tokens, want its 16 and the framing", backend, d)
		}

		// A second turn: the image is in the cache.
		turn := imageChat(modelPath, img, "What is in it?")
		turn.Messages = append(turn.Messages, chat.Message{Role: "assistant", Content: first.Text}, chat.Message{Role: "user", Content: "And the colours?"})
		again, err := e.Chat(ctx, imageChat(modelPath, img, "What is in it?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Text != first.Text {
			t.Errorf("%s: the same chat again said %q, then %q", backend, first.Text, again.Text)
		}
		second, err := e.Chat(ctx, turn, nil)
		if err != nil {
			t.Fatal(err)
		}
		if second.Stats.CachedTokens < first.Stats.PromptTokens-1 {
			t.Errorf("%s: the second turn reused %d tokens of the first's %d", backend, second.Stats.CachedTokens, first.Stats.PromptTokens)
		}
		// Another image in the first turn's place: read again from there.
		other, err := e.Chat(ctx, imageChat(modelPath, visiontest.PNG(50, 50, 9), "What is in it?"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if other.Stats.CachedTokens >= first.Stats.PromptTokens-10 {
			t.Errorf("%s: another image reused %d tokens of %d: its rows were taken from the cache", backend, other.Stats.CachedTokens, first.Stats.PromptTokens)
		}
		if other.Text == first.Text {
			t.Errorf("%s: both images got the reply %q", backend, first.Text)
		}
		replies = append(replies, first)
	}
	if replies[0].Text != replies[1].Text {
		t.Errorf("the CPU said %q, the GPU %q", replies[0].Text, replies[1].Text)
	}
}

// chatWithAndWithout chats about img with e, then sends the same message
// without it, and returns the first reply and how many prompt tokens the
// image added.
func chatWithAndWithout(t *testing.T, e *Engine, modelPath string, img []byte) (Reply, int) {
	t.Helper()
	ctx := context.Background()
	with, err := e.Chat(ctx, imageChat(modelPath, img, "What is in it?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := imageChat(modelPath, nil, "What is in it?")
	plain.Messages[0].Images = nil
	without, err := e.Chat(ctx, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	return with, with.Stats.PromptTokens - without.Stats.PromptTokens
}

// TestChatImageRefusals: a model with no projector, a projector of another
// width, a file that is no image and a marker count that does not match
// are refused by name, and the engine then chats on.
func TestChatImageRefusals(t *testing.T) {
	modelPath, projPath := visionModel(t)
	e := cpuEngine(t, EngineOptions{})
	ctx := context.Background()
	img := visiontest.PNG(8, 8, 2)
	if _, err := e.Chat(ctx, imageChat(modelPath, img, "Hi"), nil); !errors.Is(err, ErrNoProjector) {
		t.Errorf("no projector: %v, want ErrNoProjector", err)
	}
	// A model whose own file holds its tower, as Ollama converts them: the
	// refusal says so.
	ollamaStyle := filepath.Join(t.TempDir(), "gemma3-ollama.gguf")
	ggufedit.Rewrite(t, modelPath, ollamaStyle, map[string]gguf.Value{"gemma3.vision.block_count": gguf.ValueOf(uint32(27))}, nil, nil)
	if _, err := e.Chat(ctx, imageChat(ollamaStyle, img, "Hi"), nil); !errors.Is(err, ErrNoProjector) || !strings.Contains(err.Error(), "Ollama's own layout") {
		t.Errorf("a tower inside the model's file: %v, want ErrNoProjector saying so", err)
	}
	wide := filepath.Join(t.TempDir(), "mmproj-wide.gguf")
	pp, _ := synth.ProjectorPresetByName("tiny-gemma3-vision")
	pp.TextHidden = 64
	if err := synth.WriteProjector(wide, pp, 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  ChatRequest
		proj string
		want string
	}{
		{"projector of another width", imageChat(modelPath, img, "Hi"), wide, "tokens are 64 wide"},
		{"not an image", imageChat(modelPath, []byte("just text"), "Hi"), projPath, "test.png"},
		{"markers and images differ", imageChat(modelPath, img, chat.ImageMarker+" and "+chat.ImageMarker), projPath, "2 image markers"},
	} {
		tc.req.Projector = tc.proj
		if _, err := e.Chat(ctx, tc.req, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	plain := hello(3)
	plain.Model = modelPath
	if _, err := e.Chat(ctx, plain, nil); err != nil {
		t.Errorf("a chat after the refusals: %v", err)
	}

	// Images that do not fit the context are refused before any is read:
	// the third is a PNG cut after its header (the prompt is built from
	// the headers, the decode would fail), and the refusal is the
	// context's.
	small := cpuEngine(t, EngineOptions{Context: 48, Projector: func(string, string) (string, error) { return projPath, nil }})
	req := imageChat(modelPath, img, "Hi")
	req.Messages[0].Images = append(req.Messages[0].Images, chat.Image{Data: img}, chat.Image{Data: img[:60]})
	if _, err := small.Chat(ctx, req, nil); !errors.Is(err, ErrContextFull) {
		t.Errorf("three images in a 48-token context: %v, want ErrContextFull", err)
	}
}

// TestChatWithImagesGemma4: a Gemma 4 chat with an image, its projector
// paired by the library's rule: both backends give the same reply, and the
// image stands in the prompt as "<|image>", as many <|image|> as the
// tower makes of its size and aspect, "<image|>".
func TestChatWithImagesGemma4(t *testing.T) {
	dir := t.TempDir()
	modelPath, projPath := filepath.Join(dir, "tiny-gemma4.gguf"), filepath.Join(dir, "mmproj-tiny-gemma4-f16.gguf")
	mp, _ := synth.PresetByName("tiny-gemma4")
	if err := synth.WriteFile(modelPath, mp, synth.Options{Quant: "F32", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	pp, _ := synth.ProjectorPresetByName("tiny-gemma4-vision")
	if err := synth.WriteProjector(projPath, pp, 5); err != nil {
		t.Fatal(err)
	}
	paired := func(name, path string) (string, error) { return library.ProjectorFor(path) }
	tw, err := vision.Open(projPath)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	g, err := tw.Config.GridFor(40, 30)
	if err != nil {
		t.Fatal(err)
	}
	tokens := tw.Config.TokensFor(g)
	img := visiontest.PNG(40, 30, 1)
	var replies []Reply
	for _, backend := range []string{"cpu", "gpu"} {
		e := NewEngine(EngineOptions{Backend: backend, Projector: paired})
		t.Cleanup(e.Close)
		with, d := chatWithAndWithout(t, e, modelPath, img)
		if d != tokens+2 {
			t.Errorf("%s: the image added %d prompt tokens, want its %d (a %d×%d-patch grid) and the two that frame it", backend, d, tokens, g.Cols, g.Rows)
		}
		replies = append(replies, with)
	}
	if replies[0].Text != replies[1].Text {
		t.Errorf("the CPU said %q, the GPU %q", replies[0].Text, replies[1].Text)
	}

	// A smaller budget: fewer tokens for the same image; one Gemma 4 does
	// not take is refused by name.
	if err := tw.SetBudget(70); err != nil {
		t.Fatal(err)
	}
	small, err := tw.Config.GridFor(40, 30)
	if err != nil {
		t.Fatal(err)
	}
	if tw.Config.TokensFor(small) >= tokens {
		t.Fatalf("a 70-token budget gives %d tokens, 280's %d", tw.Config.TokensFor(small), tokens)
	}
	ctx := context.Background()
	e := NewEngine(EngineOptions{Backend: "cpu", Projector: paired, ImageTokens: 70})
	t.Cleanup(e.Close)
	with, err := e.Chat(ctx, imageChat(modelPath, img, "What is in it?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := with.Stats.PromptTokens - replies[0].Stats.PromptTokens; d != tw.Config.TokensFor(small)-tokens {
		t.Errorf("at a budget of 70 the prompt changed by %d tokens, want %d", d, tw.Config.TokensFor(small)-tokens)
	}
	odd := NewEngine(EngineOptions{Backend: "cpu", Projector: paired, ImageTokens: 100})
	t.Cleanup(odd.Close)
	if _, err := odd.Chat(ctx, imageChat(modelPath, img, "What is in it?"), nil); err == nil || !strings.Contains(err.Error(), "budget of 100") {
		t.Errorf("a budget of 100: %v, want a refusal naming it", err)
	}
}
