package sample

import (
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name  string
		edit  func(o *Options)
		field string // "" when the options are valid
	}{
		{"defaults", func(o *Options) {}, ""},
		{"greedy zero value", func(o *Options) { *o = Options{} }, ""},
		{"whole history, Ollama's penalty", func(o *Options) { o.RepeatLastN, o.RepeatPenalty = -1, 1.1 }, ""},
		{"negative OpenAI penalties", func(o *Options) { o.FrequencyPenalty, o.PresencePenalty = -2, -0.5 }, ""},
		{"top-p and min-p at 1", func(o *Options) { o.TopP, o.MinP = 1, 1 }, ""},
		{"NaN temperature", func(o *Options) { o.Temperature = nan }, "Temperature"},
		{"negative temperature", func(o *Options) { o.Temperature = -0.1 }, "Temperature"},
		{"infinite temperature", func(o *Options) { o.Temperature = inf }, "Temperature"},
		{"negative top-k", func(o *Options) { o.TopK = -1 }, "TopK"},
		{"top-p above 1", func(o *Options) { o.TopP = 1.01 }, "TopP"},
		{"NaN top-p", func(o *Options) { o.TopP = nan }, "TopP"},
		{"negative min-p", func(o *Options) { o.MinP = -0.05 }, "MinP"},
		{"min-p above 1", func(o *Options) { o.MinP = 2 }, "MinP"},
		{"negative repeat penalty", func(o *Options) { o.RepeatPenalty = -1.1 }, "RepeatPenalty"},
		{"NaN repeat penalty", func(o *Options) { o.RepeatPenalty = nan }, "RepeatPenalty"},
		{"frequency penalty past 2", func(o *Options) { o.FrequencyPenalty = 2.5 }, "FrequencyPenalty"},
		{"infinite presence penalty", func(o *Options) { o.PresencePenalty = -inf }, "PresencePenalty"},
		{"window below -1", func(o *Options) { o.RepeatLastN = -2 }, "RepeatLastN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			tc.edit(&o)
			err := o.Validate()
			_, newErr := New(o)
			switch {
			case tc.field == "" && (err != nil || newErr != nil):
				t.Fatalf("rejected: %v", err)
			case tc.field != "" && (err == nil || newErr == nil):
				t.Fatalf("accepted %+v", o)
			case tc.field != "" && !strings.Contains(err.Error(), tc.field+" ="):
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// TestValidateReportsEveryField checks that all bad fields are reported at
// once, so a user fixes a request in one round.
func TestValidateReportsEveryField(t *testing.T) {
	err := Options{Temperature: -1, TopK: -1, MinP: 3}.Validate()
	for _, f := range []string{"Temperature", "TopK", "MinP"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

func TestCandidateCount(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		limit int
		want  int
	}{
		{Defaults(), 128, 40},
		{Options{Temperature: 0, TopK: 40}, 128, 1},
		{Options{Temperature: 1, TopK: 0}, 128, 128},
		{Options{Temperature: 1, TopK: 500}, 128, 128},
		{Options{Temperature: 1, TopK: 3}, 128, 3},
		{Defaults(), 0, 0},
	} {
		if got := tc.o.CandidateCount(tc.limit); got != tc.want {
			t.Errorf("%+v.CandidateCount(%d) = %d, want %d", tc.o, tc.limit, got, tc.want)
		}
	}
}
